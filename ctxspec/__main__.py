"""``python -m ctxspec`` runs the command line."""

from ctxspec.cli import main

main()
