"""What the LangChain driver declares and what its compatibility report says of LangChain: the
capabilities, those the adapter supplies itself, and the divergences, behaviours and source
read (docs/compatibility/langchain.md is generated from this and a fresh run)."""

from importlib.metadata import version

from ctxspec.conformance.compat import Finding, Profile

CAPABILITIES = frozenset({"root_loop", "estimator_injection", "compaction_summary", "stop",
                          "usage_reports"})
"""``root_loop``: create_agent's model/tools loop. ``compaction_summary``:
SummarizationMiddleware. ``stop``: the client stops reading the Run's stream at the next step. ``usage_reports``: the scripted answer's usage is the AIMessage's
``usage_metadata``, as a provider integration reports it. Not ``triggers``: LangChain cannot add an input
to a running ``invoke``/``stream``, so a scenario's step inside a call has nowhere to go."""

PACKAGES = ("langchain", "langchain-core", "langgraph", "langgraph-checkpoint")

PROFILE = Profile(
    runtime="langchain",
    framework="LangChain v1 (langchain.agents.create_agent)",
    versions={name: version(name) for name in PACKAGES},
    adapter_supplied={
        "estimator_injection": "LangChain has no window, output reserve, safety margin or input "
                               "budget; the adapter computes W, O, S, B and the §7 trigger and "
                               "passes the trigger to SummarizationMiddleware",
    },
)
