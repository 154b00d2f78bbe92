"""The real-bug corpus (issue #31): each public bug report of a framework an adapter runs that
breaks a rule of the design, the adapter configuration that reaches it, and the cases that
must fail on it. A fixed bug is put back by a monkeypatch written by us from the report's
description (tests/real_bugs/patches.py); a bug still present in the pinned version needs
none, and the configuration without it (``clean``) passes the same cases.

Reports read (their descriptions, never their code) through the public issue threads; what
each says is summarised in ``broken`` in our words."""

from dataclasses import dataclass

from tests.real_bugs.patches import (
    Patch,
    cut_between_call_and_result,
    error_text_as_summary,
    orphaned_call_blocks_compaction,
    orphaned_results_sent,
)

LANGCHAIN = "ctxspec.adapters.langchain:make_driver"
LANGCHAIN_DEFAULTS = "ctxspec.adapters.langchain:make_default_driver"
LANGCHAIN_TRIM = "ctxspec.adapters.langchain:make_trim_driver"
AGENTS_SDK = "ctxspec.adapters.openai_agents:make_driver"
AGENTS_SDK_LIMITED = "ctxspec.adapters.openai_agents.driver:make_limited_driver"
PYDANTIC_AI = "ctxspec.adapters.pydantic_ai:make_driver"
PYDANTIC_AI_KEEP_LAST = "ctxspec.adapters.pydantic_ai.driver:make_keep_last_driver"
AGENTS_SDK_REOPENED = "ctxspec.adapters.openai_agents.reopened:make_reopened_driver"
GOOGLE_ADK = "ctxspec.adapters.google_adk:make_driver"


@dataclass(frozen=True)
class Bug:
    report: str
    """``owner/repo#number`` of the public report."""
    broken: str
    """What the bug does, in our words, and the design rule it breaks."""
    driver: str
    """The adapter configuration that reaches the bug."""
    cases: tuple[str, ...]
    """The cases that must fail while the bug is there."""
    patch: Patch | None = None
    """How the fixed bug is put back; None: present in the pinned framework version."""
    clean: str = ""
    """Where the same cases pass: the configuration without the bug (default: ``driver``
    with the patch undone)."""
    shows: str = ""
    """A text every named case's failure detail must contain: the check that sees the bug
    (default: any failure)."""


CORPUS: tuple[Bug, ...] = (
    Bug("langchain-ai/langchain#38867",
        "A summary call that raises becomes the text 'Error generating summary: …', which "
        "SummarizationMiddleware puts in as the summary after removing the whole history; the "
        "Run goes on (§8: a finally failed compaction ends the Run, the context kept).",
        LANGCHAIN, ("S8-SUMMARY-FAILS", "S11-COMPACTION-FAILED"), error_text_as_summary),
    Bug("langchain-ai/langchain#34282",
        "The summarisation cut falls between an AIMessage's tool calls and their "
        "ToolMessages, so the kept tail starts with a result whose call was summarised away "
        "(§6: every tool result in a request has its call).",
        LANGCHAIN, ("HM-CPRE-ALLOW-ROOT-SUCCEEDED", "HM-CPOST-ALLOW-ROOT-SUCCEEDED"),
        cut_between_call_and_result, shows="U-PAIRED"),
    Bug("langchain-ai/langchain#34664",
        "SummarizationMiddleware's trigger counts the chat history only, not the system "
        "prompt nor the tool schemas, so a request at the trigger is sent unsummarised (§7: I "
        "measures the whole request). Present in 1.5.2 with a counter of the messages handed "
        "to it; a token_counter of the whole request avoids it.",
        LANGCHAIN_DEFAULTS, ("ROW-04-AT", "ROW-04-FLOOR"), clean=LANGCHAIN),
    Bug("langchain-ai/langchain#39261",
        "When no HumanMessage falls inside trim_tokens_to_summarize, the summary model is never "
        "called and the whole history is replaced by a fixed placeholder sentence (§8: the "
        "material is summarised, never dropped). Present in 1.5.2 with the default 4000; "
        "trim_tokens_to_summarize=None avoids it.",
        LANGCHAIN_DEFAULTS, ("EX8-ROW1", "EX8-ROW2"), clean=LANGCHAIN),
    Bug("openai/openai-agents-python#3738",
        "A session's item limit cuts the history by items, not by Runs: what the Runner sends "
        "can begin in the middle of a Run, without the call a result answers or the question "
        "an answer replies to (§4: the current Run's records are all kept). Present in 0.24.0 "
        "with SessionSettings(limit=…).",
        AGENTS_SDK_LIMITED, ("ROW-07",), clean=AGENTS_SDK),
    Bug("langchain-ai/langchain#33245",
        "trim_messages(strategy='last') keeps the last max_tokens of the history by tokens "
        "alone: when an answer's own text and call outweigh what follows it, the kept tail "
        "starts with that answer's ToolMessage and no call (§6: a protocol group is never cut "
        "at a token tail). Present in langchain-core 1.8.3 as a pre-model hook with no "
        "start_on.",
        LANGCHAIN_TRIM, ("S6-CUT-KEEPS-GROUPS",), clean=LANGCHAIN, shows="U-PAIRED"),
    Bug("pydantic/pydantic-ai#2050",
        "A history processor is handed the current run's messages too, so one that keeps only "
        "the latest message (the documentation's example) cuts an answer's tool calls away "
        "from their returns, and the request sends a tool return whose call is gone (§6: every "
        "tool result in a request has its call). Fixed in 2.68 by dropping such returns "
        "before each request; put back, the orphan reaches the model. Reached with the "
        "keep-last history processor; the best configuration, without it, passes.",
        PYDANTIC_AI_KEEP_LAST, ("ROW-07",), orphaned_results_sent, clean=PYDANTIC_AI,
        shows="U-PAIRED"),
    Bug("openai/openai-agents-python#4628",
        "Compacting a session with an item limit: the compaction session loads the items it "
        "may compact through the limit and then replaces the whole stored history with the "
        "compaction of those last items, so the older ones are deleted, never summarised (§1: "
        "a summary never overwrites raw records). Present in 0.24.0 when the compaction "
        "session is opened on a history longer than its limit, as a server that opens the "
        "session for each question does; only a read of the stored items shows it (the limit "
        "keeps the lost items out of every request anyway), through the session's get_items.",
        AGENTS_SDK_REOPENED, ("S1-QUESTIONS-KEPT",), clean=AGENTS_SDK,
        shows="questions kept after the compaction"),
    Bug("google/adk-python#7236",
        "The range a compaction may cover ends before the first function_call still without a "
        "response, so a call that never gets one (its invocation stopped) is the first event "
        "of every later window and nothing after it is compacted again: the requests grow "
        "past B (§8: the trigger compacts the material; §7: no input over B is sent). Fixed "
        "in 2.13.0 (apps/compaction.py: _longest_self_contained_prefix skips the calls "
        "_provably_dead_call_ids finds).",
        GOOGLE_ADK, ("S8-STOPPED-CALL-COMPACTS",), orphaned_call_blocks_compaction,
        shows="U-BUDGET"),
)
"""The bugs the suite catches, each verified by tests/real_bugs/test_corpus.py."""

UNREACHED: dict[str, str] = {
    "langchain-ai/langchain#38352": "present in 1.5.2 (_find_safe_cutoff_point stops at the "
    "first AIMessage whose calls meet the run of ToolMessages at the cut, by set "
    "intersection), but it needs results of two different AIMessages side by side at the "
    "cut, and no path of create_agent makes that history (Q373): its tools node, "
    "ToolCallLimitMiddleware's error results, reviews and Command results all put an "
    "answer's results right after it; the documented trim and delete leave orphans only "
    "where no answer is kept before them; a Run stopped, failed or left in review mid-batch "
    "loses the batch's results (tests/real_bugs/test_langchain_38352.py runs those paths). "
    "make_driver keeps one message, so its cut meets a run of one result. "
    "S6-CUT-KEEPS-GROUPS, which cuts between a call and its result, passes on make_driver.",
    "google/adk-python#4740": "fixed in 2.13.0 (apps/compaction.py: "
    "_longest_self_contained_prefix keeps a call with requested_tool_confirmations open, and "
    "_provably_dead_call_ids protects those of the newest invocation), and unreachable from the "
    "suite: a confirmation pending across invocations is ADK's tool-confirmation flow "
    "(require_confirmation, ToolContext.request_confirmation), and the scenario's hook port "
    "answers every tool.pre_call chain at once, so the adapter maps that point onto "
    "before_tool_callback and no scenario leaves a call waiting for a confirmation.",
}
"""Reports of the corpus no case reaches today, and why."""
