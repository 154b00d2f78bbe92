"""The Sessions of the hook matrix (``conformance/matrix.py``), one per kind of call
(``hook_rules.CALLS``) and role: the *actor* makes the call the point's hook acts on (the
*subject*), whose result is large enough that the actor's next request reaches the compaction
trigger; the actor then answers ``final words``. What a hook item writes at each point
(:data:`MODIFY`) and which chain of the point it answers (:func:`ordinal`) are here too.

The arithmetic each Session relies on, with the suite's ``content`` estimator (one token per
character of scenario text, no overhead):

- ``tool`` and ``delegate``: W = 5000, O = 400, S = 100 give B = 4500 and the trigger
  floor(0.8 × 4500) = 3600. The subject's result is :data:`BIG` (3611 characters): the actor's
  second request (its prompt, its question or hand-over, RAW-DECISION with its call and BIG) is
  over 3600 and compacts; a result a hook replaced or denied leaves it far below.
- ``result_read``: W = 8000 gives B = 7500 and the trigger 6000. ``dump`` returns
  :data:`BODY`, 6500 characters, shown as a bounded preview of its first 4000 (§6; the second
  request, about 4030, stays below 6000); the model reads characters [4000, 6500) — the 2500
  characters of :data:`READ` — and the third request (4000 + 2500 and the rest) compacts.

Only the compaction points need that compaction; the Sessions of the other points are
widened (:data:`WIDER`) so that none happens.
"""

from collections.abc import Mapping
from typing import Any

from ctxspec.conformance.case import base, result_ref

BIG = "RAW-RESULT " + "r" * 3600
"""The subject's result for a tool and an Executor's answer for a delegation."""

READ = "READ-RESULT " + "r" * 2488
"""What result.read returns: characters [4000, 6500) of :data:`BODY`."""
BODY = "d" * 4000 + READ
DECISION = {"tool": {"name": "t", "arguments": {"path": "a"}},
            "delegate": {"name": "delegate", "arguments": {"task": "do it"}},
            "result_read": {"name": "result.read", "arguments": {
                "result_ref": result_ref(BODY), "from": 4000, "to": 6500}}}
"""The subject call the actor's model proposes, with its arguments."""

WIDER = 8000
"""How much wider the window of a Session that must not compact is: W = 13000 (B = 12500,
trigger 10000) for a tool or a delegation, W = 16000 (B = 15500, trigger 12400) for a read,
each far above the actor's largest request (about 3700 and 6600)."""

RAW = {"tool": "RAW-RESULT", "delegate": "RAW-RESULT", "result_read": "READ-RESULT"}
"""A word of the subject's result as produced, which no request shows once a hook replaced or
denied it."""

SHARED_OLD, SHARED_NEW = "BRIEF-OLD", "BRIEF-NEW"
"""A shared field's text as the Agent registers it, and as a shared-scope patch writes it."""

MODIFY: Mapping[str, dict[str, Any]] = {
    "model.pre_request": {"context_patch": [{"target": "last", "field": "text",
                                             "operation": "append_annotation",
                                             "value": "NOTE-PRE"}]},
    "model.post_response": {"payload_patch": [{"path": "text", "value": "PATCHED-DECISION"}]},
    "tool.post_call": {"payload_patch": [{"path": "result", "value": "PATCHED-RESULT"}]},
    "compaction.pre_request": {"context_patch": [{"target": "last", "field": "text",
                                                  "operation": "append_annotation",
                                                  "value": "NOTE-COMPACT"}]},
    "compaction.post_response": {"payload_patch": [{"path": "summary",
                                                    "value": "PATCHED-SUMMARY"}]},
}
"""What a private "modify" item writes at each point: a valid patch of a registered field.
``tool.pre_call`` patches the subject call's own arguments (:data:`PRE_CALL`)."""

PRE_CALL: Mapping[str, tuple[str, Any]] = {"tool": ("path", "b"),
                                           "delegate": ("task", "do it differently"),
                                           "result_read": ("from", 4001)}
"""A pre-call modify's argument and value, by kind of call: none changes how large the
subject's result is (t and the Executor answer as scripted; the read still spans 2499
characters), so compaction follows as with an allow."""

SHARED_PATCH = {"context_patch": [{"target": "shared:brief", "field": "text",
                                   "value": SHARED_NEW, "scope": "shared"}]}
"""A shared-scope item: the Run's shared field ``brief``, registered for the root role."""


def item(point: str, decision: str, call: str, scope: str) -> dict[str, Any]:
    """The one hook item the point's chain answers with."""
    if decision == "fail":
        return {"fails": True}
    patch: dict[str, Any] = {}
    if scope == "shared":
        patch = dict(SHARED_PATCH)
    elif decision == "modify" and point == "tool.pre_call":
        name, value = PRE_CALL[call]
        patch = {"payload_patch": [{"path": f"arguments.{name}", "value": value}]}
    elif decision == "modify":
        patch = dict(MODIFY[point])
    return {**patch, "decision": "deny"} if decision == "deny" else patch


def ordinal(point: str, decision: str, call: str, role: str, subject: int) -> int | None:
    """The chain the item answers: the subject's at a model or tool point (for an Executor
    the Planner's first request, delegating answer and delegate pre-call come first; its own
    tool settles before the delegation's post-call chain); the first chunk's at
    compaction.pre_request; every chunk's for a compaction.post_response modify, so that the
    summary the business request receives is the hook's."""
    if point.startswith("compaction."):
        return None if point == "compaction.post_response" and decision == "modify" else 1
    if role == "executor":
        return 1 if point == "tool.post_call" else 2
    return subject


def scenario(call: str, role: str, *, shared: bool = False, compacting: bool = True
             ) -> dict[str, Any]:
    """The Session of a kind of call in a role, without its hooks and triggers. Not
    ``compacting`` (a point that is no compaction call's), the window is widened so that no
    request reaches the trigger — the subject's result reaches the actor's next request as it
    is, and no compaction is scripted (Q393)."""
    wide = 0 if compacting else WIDER
    decision = {"text": "RAW-DECISION", "tool_calls": [DECISION[call]]}
    actor = [decision, {"text": "final words"}]
    tools: dict[str, Any] = {}
    if role == "executor":
        document = base(window=5000 + wide, executor={"tools": [{"name": "t"}]})
        document["model"] = {"business": [
            {"text": "", "tool_calls": [{"name": "delegate", "arguments": {"task": "do it"}}]},
            {"text": "planner done"}], "executor": actor}
        tools = {"t": [{"text": BIG}]}
    elif call == "delegate":
        document = base(window=5000 + wide, executor={"tools": []})
        document["model"] = {"business": actor, "executor": [{"text": BIG}]}
    elif call == "result_read":
        document = base(window=8000 + wide, tools=[{"name": "dump"}, {"name": "result.read"}])
        document["model"] = {"business": [{"text": "", "tool_calls": [{"name": "dump"}]},
                                          *actor]}
        tools = {"dump": [{"text": BODY}]}
    else:
        document = base(window=5000 + wide, tools=[{"name": "t"}])
        document["model"] = {"business": actor}
        tools = {"t": [{"text": BIG}]}
    if shared:
        document["agent"]["shared"] = [{"name": "brief", "text": SHARED_OLD,
                                        "consumers": ["root"]}]
    if compacting:
        document["model"]["compaction"] = [{"text": f"ZSUM{n}"} for n in range(1, 6)]
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    document["tools"] = tools
    return document


__all__ = ["BIG", "BODY", "DECISION", "MODIFY", "PRE_CALL", "RAW", "READ", "SHARED_NEW",
           "SHARED_OLD", "item", "ordinal", "scenario"]
