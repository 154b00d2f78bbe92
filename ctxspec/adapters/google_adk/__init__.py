"""Google ADK under the conformance suite (extra ``google-adk``):
``ctxspec conformance --driver ctxspec.adapters.google_adk:make_driver`` (the best
configuration; ``make_default_driver``: ADK's defaults)."""

from ctxspec.adapters.google_adk.driver import (
    GoogleAdkDriver,
    make_default_driver,
    make_driver,
)

__all__ = ["GoogleAdkDriver", "make_default_driver", "make_driver"]
