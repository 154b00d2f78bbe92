"""What the Google ADK driver's compatibility report says of ADK: the capabilities the adapter
supplies itself, the divergence each failing case shows, and the ADK behaviours found with
the source read (docs/compatibility/google-adk.md is generated from this and a fresh run).
Sources are files under the installed ``google/adk`` package."""

from importlib.metadata import version

from ctxspec.conformance.compat import Profile

PACKAGES = ("google-adk", "google-genai", "sqlalchemy", "aiosqlite")

PROFILE = Profile(
    runtime="google-adk",
    framework="Google ADK (Runner over DatabaseSessionService)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "ADK has no window, output reserve, safety margin or input "
                               "budget: the adapter measures what ADK hands the model with "
                               "the injected estimator, computes W, O, S, B and the trigger, "
                               "and refuses a fixed input over B before it is sent",
    },
    defaults="ctxspec.adapters.google_adk:make_default_driver",
)
