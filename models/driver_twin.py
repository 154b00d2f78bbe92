"""A crashed Session against its uncrashed twin (§10), for the driver-level model: the same
scenario without the crash, played on a fresh driver of the same factory, must give the same
observable outcome wherever the design fixes it — as models/workflow_model.py
``check_recovered`` does for workflows and conformance/crash_matrix.py for the worked examples.

What the design fixes, and so what is compared: every Run's ending (status and error code),
each tool run with the arguments the model proposed and those it ran with, each hook point's
chains, and the requests sent (their messages, identifiers masked) — §10 "旧所有者的晚到结果不能
推进已终结 Run", §12 "原始结果保存后宕机 | 从后置 Hook/结果提交阶段继续，不重新请求模型、工具或
摘要", "批次一项完成后宕机 | 已保存结果复用，剩余成员继续". Where it allows a difference the
twin is not compared (:func:`comparable`): a tool whose outcome the crash made unknown (Q44), a
hook running at the crash (dropped, Q50), and the answer in flight (asked again) when the Run
has a deadline or a trigger counts requests or moments — the extra asking takes a tick and
shifts what the scripted world counts.
"""

import json
import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ctxspec.conformance.crash_matrix import HOOK_DROPPED, LOST_ANSWER, UNKNOWN_TOOL
from ctxspec.conformance.driver import Driver, perform

Trace = list[dict[str, Any]]
Play = Callable[[Mapping[str, Any]], Trace]
"""Plays a whole scenario document on a fresh driver and returns its trace (as JSON)."""

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_CUT_ID = re.compile(r"(?m)(?<![0-9A-Za-z])[0-9a-f][0-9a-f-]{0,35}$"
                     r"|^[0-9a-f-]{0,35}[0-9a-f](?![0-9A-Za-z])")
"""The two halves of an identifier a chunk's character range cut apart (the end of one piece,
the start of the next): masked like a whole one. A hex word that merely ends or starts a line
is masked as well, on both sides alike, so no difference is made up."""


def _masked(text: str) -> str:
    return _CUT_ID.sub("<id>", _UUID.sub("<id>", text))


def inside_a_request(document: Mapping[str, Any], phase: str | None) -> bool:
    """Whether an input_accepted crash may come while a model request is in flight: a
    trigger's supplement arrives just before a request's answer (conformance/crash_matrix.py
    INSIDE_A_TOOL is the same for a tool), so dying at it loses that answer too."""
    return phase == "input_accepted" and any(
        t["on"].get("purpose") is not None and "supplement" in t["do"]
        for t in document.get("triggers", ()))


def comparable(document: Mapping[str, Any], trace: Trace) -> bool:
    """Whether the design fixes the crashed Session's outcome as its twin's."""
    crash = document.get("crash")
    restarts = [e for e in trace if e["kind"] == "restarted"]
    if crash is None or not restarts:
        return False
    phase = restarts[0].get("phase") or crash.get("phase")
    when = "before" if restarts[0]["when"] == "fails" else restarts[0]["when"]
    if (phase, when) in UNKNOWN_TOOL | HOOK_DROPPED:
        return False
    triggers = document.get("triggers", ())
    if (phase, when) in LOST_ANSWER or inside_a_request(document, phase):
        return not triggers and not document["agent"].get("run_deadline")
    # A moment passed again by the takeover counts again; a tool or a request does not.
    return not any("moment" in t["on"] for t in triggers)


def outcome(trace: Trace) -> dict[str, object]:
    """What the design fixes of a Session, restarts left out."""
    sent: dict[tuple[str, int], list[tuple[str, str, str]]] = {}
    for event in trace:
        if event["kind"] == "model_request":
            sent.setdefault((_UUID.sub("<id>", event["purpose_key"]), event["attempt"]), [
                (m["role"], m["kind"], _masked(m["text"]))
                for m in event["view"]["messages"]])
    return {
        "Run endings": [(e["run_no"], e["status"], e["error_code"]) for e in trace
                        if e["kind"] == "run_ended"],
        "tools run": Counter(
            f"{e['name']} {json.dumps(e['proposed_arguments'], sort_keys=True)} → "
            f"{json.dumps(e['effective_arguments'], sort_keys=True)}"
            for e in trace if e["kind"] == "tool_executed"),
        "hook chains": Counter(e["point"] for e in trace if e["kind"] == "hook_called"),
        "requests sent": list(sent.values()),
    }


def endings_once(trace: Trace) -> Trace:
    """The trace with each Run's ending kept once, the last: a dead incarnation may have
    traced an ending it never committed, which the takeover then commits (the workflow
    model's rule)."""
    last = {e["run_id"]: i for i, e in enumerate(trace) if e["kind"] == "run_ended"}
    return [e for i, e in enumerate(trace) if e["kind"] != "run_ended"
            or last[e["run_id"]] == i]


def compare(document: Mapping[str, Any], crashed: Trace, play: Play) -> str | None:
    """The first difference between the crashed Session and its twin, or None."""
    plain = {key: value for key, value in document.items() if key != "crash"}
    mine, twin = outcome(endings_once(crashed)), outcome(play(plain))
    for what, value in mine.items():
        if value != twin[what]:
            return (f"crashed at {document['crash']}, the Session differs from the same "
                    f"Session without the crash in its {what}: {_short(value)} against "
                    f"{_short(twin[what])}")
    return None


def _short(value: object) -> str:
    text = str(value)
    return text if len(text) < 600 else text[:600] + "…"


def player(factory: Callable[[], Driver],
           ports: Callable[[Mapping[str, Any]], Sequence[Any]]) -> Play:
    """A :data:`Play` on fresh drivers of ``factory`` (``ports`` builds the scenario and its
    ports, see models/driver_machine.py)."""
    def play(document: Mapping[str, Any]) -> Trace:
        scenario, built, triggers = ports(document)
        driver = factory()
        driver.configure(scenario, built)
        triggers.act = lambda step: perform(driver, step)
        for step in scenario.steps:
            perform(driver, step)
        trace: Trace = json.loads(json.dumps(driver.trace(), default=str))
        return trace
    return play


__all__ = ["Play", "comparable", "compare", "endings_once", "inside_a_request", "outcome",
           "player"]
