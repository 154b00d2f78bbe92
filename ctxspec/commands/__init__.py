"""The commands of ``ctxspec`` (ctxspec/cli.py), one module per group."""
