"""Drivers that put production agent runtimes under the conformance suite, each behind an
optional extra (``ctxspec[langchain]``, …) so the core install stays small."""
