"""Universal checks (issue #31): design invariants that hold on every request, every tool run
and every Run ending, evaluated by the harness on the trace of every case and probe a driver
runs, whatever the case is about (docs/conformance.md "Universal checks").

Each invariant reads the neutral JSON trace only — plus, for U-FAILED-SUMMARY, which scripted
compaction answers failed in the case's own scenario document, and for U-AFTER-STOP when the
harness performed each stop (the trace's length then). A check that needs a field or fact a
trace may leave out (an optional field of the trace contract, the Run's start events) is
*skipped* for that trace, never failed, and the skip is reported with why. Only what the design
fixes is asserted: identities, kinds, order and counts, never a runtime's wording.

Every check is one pass over the trace (linear in its events and their messages).
"""

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Trace = list[dict[str, Any]]
Event = dict[str, Any]


@dataclass(frozen=True)
class Invariant:
    id: str
    requirements: tuple[str, ...]
    """The requirement IDs (spec/requirements.toml) it checks, the first its main one."""
    sentence: str
    """The design's own sentence."""
    rule: str
    """What is checked on the trace, in English."""


@dataclass(frozen=True)
class Violation:
    invariant: str
    event: int
    """The index of the event in the trace."""
    request: int | None
    """The index of the model request among the trace's model requests (None: not one)."""
    evidence: str

    def __str__(self) -> str:
        where = f"request {self.request} (event {self.event})" if self.request is not None \
            else f"event {self.event}"
        return f"{self.invariant} at {where}: {self.evidence}"


@dataclass(frozen=True)
class Findings:
    violations: tuple[Violation, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    """(invariant, why) for each invariant this trace could not be judged on."""

    def counts(self) -> dict[str, int]:
        return dict(Counter(v.invariant for v in self.violations))


INVARIANTS = (
    Invariant("U-PAIRED", ("CTX-6.2", "CTX-6.3"),
              "完整 assistant tool_calls 与每项 tool result 保持同一调用关联",
              "every tool result or placeholder in a request has its call before it"),
    Invariant("U-SETTLED", ("CTX-6.4", "CTX-6.6", "CTX-6.7", "CTX-6.1"),
              "已完成普通批次：原 assistant 调用消息 + 全部对应结果；当前批次尚未全部结算："  # noqa: RUF001 (the design's own punctuation)
              "不构造下一业务模型请求",
              "every call a business request shows has exactly one result or placeholder, "
              "a batch's in action order"),
    Invariant("U-PROTECTED", ("CTX-5.5", "CTX-5.6", "CTX-5.24"),
              "受保护输入按原文、身份和顺序重新进入每次实际请求",
              "each protected input a business request lists is shown once, with the text its "
              "identity has everywhere in the trace, in receive order"),
    Invariant("U-WINDOW", ("CTX-7.13", "CTX-8.45"),
              "硬窗口条件 I + O + S <= W",
              "every request sent: I + max_output_tokens + S <= W (for a compaction request "
              "max_output_tokens is its T, Q32)"),
    Invariant("U-BUDGET", ("CTX-7.17", "CTX-8.53"),
              "绝不能发送超过 B 的输入",
              "no business request is sent with I over B"),
    Invariant("U-COMPACTION-TOOLS", ("CTX-8.2", "CTX-8.67"),
              "不继承其业务 Prompt、Skill、Tool、MCP 或 Executor 权限",
              "a compaction request offers none of the business requests' tools and carries no "
              "provider tool message (its material is transcript data)"),
    Invariant("U-AFTER-END", ("CTX-10.23",),
              "旧所有者的晚到结果不能推进已终结 Run",
              "no model request or tool run while no Run is running (after its run_ended, "
              "before the next Run starts)"),
    Invariant("U-AFTER-STOP", ("CTX-11.5", "CTX-10.22"),
              "用户在准备／压缩期间 Stop：不启动新的压缩或业务 Attempt",  # noqa: RUF001 (the design's own punctuation)
              "no model request or tool run starts after the user's stop, until the stopped Run "
              "has ended"),
    Invariant("U-AFTER-DEADLINE", ("CTX-8.7", "CTX-8.72"),
              "所有调用受同一 Run deadline",
              "a Run with a deadline of D logical ticks makes at most D model calls and tool "
              "runs (one tick each, docs/scenarios.md)"),
    Invariant("U-ONE-ENDING", ("CTX-10.23", "CTX-11.7"),
              "旧所有者的晚到结果不能推进已终结 Run；Runtime 仍发送异常终态",  # noqa: RUF001 (the design's own punctuation)
              "an ended Run has exactly one run_ended"),
    Invariant("U-FAILED-SUMMARY", ("CTX-8.22", "CTX-8.23", "CTX-8.9"),
              "不假装已生成摘要；不能伪造压缩来源、覆盖水位或把失败改成成功",  # noqa: RUF001 (the design's own punctuation)
              "no summary a request shows carries the text of a compaction answer that failed "
              "(its error or its partial output)"),
)
BY_ID = {invariant.id: invariant for invariant in INVARIANTS}


def _id(value: object) -> str:
    text = str(value)
    return text if len(text) <= 12 else text[:8] + "…"


def _text(value: str, limit: int = 40) -> str:
    return repr(value if len(value) <= limit else value[:limit - 1] + "…")


@dataclass
class _Context:
    """What the checks share: the trace, its model requests (event index, request index), the
    case's scenario document and the harness's stop marks."""

    trace: Trace
    scenario: Mapping[str, Any] | None
    stops: Sequence[int] | None
    requests: list[tuple[int, int, Event]]
    skipped: list[tuple[str, str]]

    def skip(self, invariant: str, why: str) -> None:
        self.skipped.append((invariant, why))


Check = Callable[[_Context], Iterator[Violation]]


def _messages(request: Event) -> list[Event]:
    view = request.get("view")
    messages = view.get("messages") if isinstance(view, dict) else None
    return messages if isinstance(messages, list) else []


def _paired(context: _Context) -> Iterator[Violation]:
    for event, index, request in context.requests:
        called: set[str] = set()
        for position, message in enumerate(_messages(request)):
            for call in message.get("tool_calls") or ():
                called.add(str(call.get("call_id")))
            call_id = message.get("call_id")
            if message.get("kind") in ("tool_result", "placeholder") and call_id is not None \
                    and str(call_id) not in called:
                yield Violation("U-PAIRED", event, index,
                                f"message {position} is a {message['kind']} for call "
                                f"{_id(call_id)}, whose call no earlier message makes")


def _settled(context: _Context) -> Iterator[Violation]:
    for event, index, request in context.requests:
        if request.get("purpose") != "business":
            continue
        calls: dict[str, tuple[int, int]] = {}
        answers: Counter[str] = Counter()
        order: dict[int, list[int]] = {}
        for position, message in enumerate(_messages(request)):
            for call in message.get("tool_calls") or ():
                calls[str(call.get("call_id"))] = (position, int(call.get("action_ordinal", 0)))
            call_id = message.get("call_id")
            if message.get("kind") in ("tool_result", "placeholder") and call_id is not None \
                    and str(call_id) in calls:
                answers[str(call_id)] += 1
                made, ordinal = calls[str(call_id)]
                order.setdefault(made, []).append(ordinal)
        for call_id, (position, _) in calls.items():
            if answers[call_id] != 1:
                yield Violation("U-SETTLED", event, index,
                                f"call {_id(call_id)} (message {position}) has "
                                f"{answers[call_id]} results or placeholders; a settled batch "
                                f"has exactly one")
        for position, ordinals in order.items():
            if ordinals != sorted(ordinals):
                yield Violation("U-SETTLED", event, index,
                                f"the results of message {position}'s calls come in action "
                                f"order {ordinals}")


def _receive_order(trace: Trace) -> dict[str, int]:
    """Each input's place in receive order: its first delivery event."""
    order: dict[str, int] = {}
    for event in trace:
        if event.get("kind") == "delivery" and event.get("input_id") is not None:
            order.setdefault(str(event["input_id"]), len(order))
    return order


def _protected(context: _Context) -> Iterator[Violation]:
    received = _receive_order(context.trace)
    texts: dict[str, str] = {}
    judged = False
    for event, index, request in context.requests:
        shown: dict[str, list[tuple[int, str]]] = {}
        for position, message in enumerate(_messages(request)):
            input_id = message.get("input_id")
            if message.get("kind") == "user_ref" and input_id is not None:
                shown.setdefault(str(input_id), []).append((position, str(message.get("text"))))
        listed = request.get("protected_input_ids")
        if request.get("purpose") != "business" or not isinstance(listed, list):
            _remember(shown, texts)
            continue
        judged = True
        yield from _shown_once(event, index, [str(i) for i in listed], shown, texts, received)
        _remember(shown, texts)
    if not judged and any(r.get("purpose") == "business" for _, _, r in context.requests):
        context.skip("U-PROTECTED", "the trace's business requests carry no "
                                    "protected_input_ids (optional)")


def _remember(shown: Mapping[str, list[tuple[int, str]]], texts: dict[str, str]) -> None:
    for input_id, places in shown.items():
        texts.setdefault(input_id, places[0][1])


def _shown_once(event: int, index: int, listed: list[str],
                shown: Mapping[str, list[tuple[int, str]]], texts: Mapping[str, str],
                received: Mapping[str, int]) -> Iterator[Violation]:
    for input_id in listed:
        places = shown.get(input_id, [])
        if len(places) != 1:
            yield Violation("U-PROTECTED", event, index,
                            f"protected input {_id(input_id)} is shown {len(places)} times as a "
                            f"user message; it is shown once, verbatim")
            continue
        first = texts.get(input_id)
        if first is not None and places[0][1] != first:
            yield Violation("U-PROTECTED", event, index,
                            f"protected input {_id(input_id)} reads {_text(places[0][1])}, "
                            f"elsewhere {_text(first)}")
    # Receive order: the inputs' first delivery events; without them (an Executor's hand-over)
    # the order the request lists them in.
    rank = received if all(i in received for i in listed) else {
        input_id: place for place, input_id in enumerate(listed)}
    seen = [input_id for input_id in sorted(
        (i for i in listed if len(shown.get(i, ())) == 1), key=lambda i: shown[i][0][0])]
    if seen != sorted(seen, key=lambda i: rank[i]):
        yield Violation("U-PROTECTED", event, index,
                        f"the protected inputs are shown in the order "
                        f"{[_id(i) for i in seen]}, not in receive order")


def _window(context: _Context) -> Iterator[Violation]:
    for event, index, request in context.requests:
        try:
            estimated, out = int(request["estimated_input_tokens"]), \
                int(request["max_output_tokens"])
            margin, window = int(request["safety_margin"]), int(request["window"])
            budget = int(request["input_budget"])
        except (KeyError, TypeError, ValueError):
            continue  # the trace contract reports the field
        if estimated + out + margin > window:
            yield Violation("U-WINDOW", event, index,
                            f"I + max_output_tokens + S = {estimated} + {out} + {margin} = "
                            f"{estimated + out + margin} > W = {window}")
        if request.get("purpose") == "business" and estimated > budget:
            yield Violation("U-BUDGET", event, index,
                            f"a business request with I = {estimated} > B = {budget}")


def _compaction_tools(context: _Context) -> Iterator[Violation]:
    business: set[str] = set()
    rendered_any = False
    for _, _, request in context.requests:
        rendered = request.get("rendered")
        if request.get("purpose") == "business" and isinstance(rendered, dict):
            business.update(map(str, rendered.get("tool_schemas") or ()))
    for event, index, request in context.requests:
        if request.get("purpose") != "compaction":
            continue
        rendered = request.get("rendered")
        if isinstance(rendered, dict):
            rendered_any = True
            offered = sorted(business & set(map(str, rendered.get("tool_schemas") or ())))
            if offered:
                yield Violation("U-COMPACTION-TOOLS", event, index,
                                f"the compaction request offers {len(offered)} business "
                                f"tool(s): {_text(offered[0])}")
        for position, message in enumerate(_messages(request)):
            if message.get("tool_calls") or message.get("kind") == "tool_result":
                yield Violation("U-COMPACTION-TOOLS", event, index,
                                f"message {position} is a provider tool message "
                                f"({message.get('kind')}); chunk material is transcript data")
    if not rendered_any and any(r.get("purpose") == "compaction" for *_, r in context.requests):
        context.skip("U-COMPACTION-TOOLS", "no compaction request carries rendered (optional): "
                                           "its tool schemas were not judged")


SENT = ("model_request", "tool_executed")
"""The events that show the runtime acting: a request sent, a tool run."""


def _runs(context: _Context) -> Iterator[Violation]:
    """U-AFTER-END and U-ONE-ENDING: which Runs are running, from the Runs' own lifecycle
    events (a client ``run_started``, the ``run_ended``)."""
    if not any(e.get("kind") == "client_event" and e.get("event") == "run_started"
               for e in context.trace):
        if any(e.get("kind") in SENT for e in context.trace):
            context.skip("U-AFTER-END", "the trace has no client_event run_started: when a Run "
                                        "runs is not known")
        yield from _endings(context.trace)
        return
    running: set[str] = set()
    numbers = {event: index for index, (event, _, _) in enumerate(context.requests)}
    for position, event in enumerate(context.trace):
        kind = event.get("kind")
        if kind == "client_event" and event.get("event") == "run_started":
            running.add(str(event.get("run_id")))
        elif kind == "run_ended":
            running.discard(str(event.get("run_id")))
        elif kind in SENT and not running and event.get("role", "root") is not None:
            what = "a model request was sent" if kind == "model_request" else \
                f"tool {_text(str(event.get('name')))} ran"
            yield Violation("U-AFTER-END", position, numbers.get(position),
                            f"{what} while no Run was running (after its run_ended)")
    yield from _endings(context.trace)


def _endings(trace: Trace) -> Iterator[Violation]:
    """One ending per Run. A runtime that died may have announced an ending it never
    committed: the takeover then ends that Run again, the same way (Q280)."""
    ended: dict[str, tuple[int, object, object]] = {}
    """By Run: the incarnation that ended it (restarts before it), its status and code."""
    incarnation = 0
    for position, event in enumerate(trace):
        if event.get("kind") == "restarted":
            incarnation += 1
        if event.get("kind") != "run_ended":
            continue
        run_id = str(event.get("run_id"))
        ending = (event.get("status"), event.get("error_code"))
        before = ended.get(run_id)
        ended[run_id] = (incarnation, *ending)
        if before is None:
            continue
        if before[0] == incarnation or before[1:] != ending:
            yield Violation("U-ONE-ENDING", position, None,
                            f"run {event.get('run_no')} ({_id(run_id)}) ends again, "
                            f"{ending[0]}, after it ended {before[1]}"
                            + (" in the same runtime" if before[0] == incarnation else ""))


def _nth(n: int) -> str:
    return {2: "second", 3: "third"}.get(n, f"{n}th")


def _after_stop(context: _Context) -> Iterator[Violation]:
    """No request after a stop the harness performed while a Run was running, until that Run
    ended. Tool runs are not judged: a tool's event comes when it settled, so one in flight at
    the stop shows after it (and its placeholder is the design's answer)."""
    if context.stops is None and not _stops_in(context.scenario):
        return  # the scenario stops nothing: there is nothing to judge
    if context.stops is None:
        if any(e.get("kind") == "model_request" for e in context.trace):
            context.skip("U-AFTER-STOP", "when each stop arrived is not known (a driver over "
                                         "stdio, or a trace its crashed_runs computed)")
        return
    marks = sorted(set(context.stops))
    running: set[str] = set()
    stopped: set[str] = set()
    numbers = {event: index for index, (event, _, _) in enumerate(context.requests)}
    for position, event in enumerate(context.trace):
        while marks and marks[0] <= position:
            stopped |= running
            marks.pop(0)
        kind = event.get("kind")
        if kind == "restarted":
            # The dead incarnation may have announced a Run it never committed (a crash before
            # its question was accepted), whose end never comes: what ran before a restart is
            # not carried past it, so no Run is taken for stopped on its word (Q284).
            running.clear()
            stopped.clear()
        elif kind == "client_event" and event.get("event") == "run_started":
            running.add(str(event.get("run_id")))
        elif kind == "run_ended":
            running.discard(str(event.get("run_id")))
            stopped.discard(str(event.get("run_id")))
        elif kind == "model_request" and stopped:
            yield Violation("U-AFTER-STOP", position, numbers.get(position),
                            f"a {event.get('purpose')} request (attempt {event.get('attempt')}) "
                            f"was sent after the user's stop, before the Run ended")


def _stops_in(document: object) -> bool:
    """Whether a scenario document (or None: not known) has a stop anywhere: a step, a
    trigger's step, a workflow's ``stop_after``."""
    if document is None:
        return True
    if isinstance(document, Mapping):
        return any((key in ("stop", "stop_after") and bool(value)) or _stops_in(value)
                   for key, value in document.items() if value is not None)
    if isinstance(document, (list, tuple)):
        return any(_stops_in(item) for item in document)
    return False


def _deadline(context: _Context) -> Iterator[Violation]:
    """A Run's calls are its logical clock (docs/scenarios.md: one tick per model call and
    tool run; a workflow's deadline over the whole tree)."""
    scenario = context.scenario or {}
    workflow = scenario.get("workflow")
    if isinstance(workflow, Mapping):
        limit, per_run = workflow.get("deadline"), False
    else:
        agent = scenario.get("agent")
        limit, per_run = (agent.get("run_deadline") if isinstance(agent, Mapping) else None), True
    if not isinstance(limit, int):
        return
    ticks: Counter[str] = Counter()
    current = ""
    numbers = {event: index for index, (event, _, _) in enumerate(context.requests)}
    for position, event in enumerate(context.trace):
        kind = event.get("kind")
        if per_run and kind == "client_event" and event.get("event") == "run_started":
            current = str(event.get("run_id"))
        elif kind in (*SENT, "capability_called"):
            ticks[current] += 1
            if ticks[current] > limit:
                what = "model request" if kind == "model_request" else "tool run"
                yield Violation("U-AFTER-DEADLINE", position, numbers.get(position),
                                f"the Run's call {ticks[current]} (a {what}) is past its "
                                f"deadline of {limit} ticks")


def _failed_texts(scenario: Mapping[str, Any]) -> list[str]:
    """The error texts and partial outputs of the scenario's failing compaction answers,
    unless a successful one says the same."""
    scripts = [scenario.get("model")]
    workflow = scenario.get("workflow")
    if isinstance(workflow, Mapping):
        scripts += [node.get("agent_node", {}).get("model") for stage in
                    workflow.get("stages", ()) for node in stage if isinstance(node, Mapping)]
    failed: list[str] = []
    good: list[str] = []
    for script in scripts:
        for answer in (script or {}).get("compaction", ()) if isinstance(script, Mapping) else ():
            if answer.get("fail") is not None:
                failed += [str(answer[k]) for k in ("fail", "partial") if answer.get(k)]
            elif isinstance(answer.get("text"), str):
                good.append(answer["text"])
    return [t for t in dict.fromkeys(failed) if len(t) >= 8 and not any(t in g for g in good)]


def _failed_summary(context: _Context) -> Iterator[Violation]:
    texts = _failed_texts(context.scenario or {})
    if not texts:
        return
    for event, index, request in context.requests:
        for position, message in enumerate(_messages(request)):
            if message.get("kind") != "summary":
                continue
            body = str(message.get("body") or message.get("text") or "")
            found = next((t for t in texts if t in body), None)
            if found is not None:
                yield Violation("U-FAILED-SUMMARY", event, index,
                                f"message {position} is a summary carrying the failed "
                                f"compaction answer {_text(found)}")


CHECKS: tuple[Check, ...] = (_paired, _settled, _protected, _window, _compaction_tools, _runs,
                             _after_stop, _deadline, _failed_summary)


def check(trace: Trace, scenario: Mapping[str, Any] | None = None,
          stops: Sequence[int] | None = None) -> Findings:
    """Every universal invariant on ``trace`` (a list of events, read back as JSON); the case's
    ``scenario`` document and ``stops``, the trace's length each time the harness performed a
    stop step (None: not known), where a check needs them."""
    if not isinstance(trace, list):
        return Findings()
    events = [e if isinstance(e, dict) else {} for e in trace]
    requests = [(position, 0, event) for position, event in enumerate(events)
                if event.get("kind") == "model_request"]
    context = _Context(events, scenario, stops,
                       [(p, index, e) for index, (p, _, e) in enumerate(requests)], [])
    found = tuple(v for each in CHECKS for v in each(context))
    return Findings(tuple(sorted(found, key=lambda v: v.event)), tuple(context.skipped))


def summary(findings: Findings, limit: int = 3) -> str:
    """The violations in words: per invariant its count, rule and first few, short."""
    lines = []
    counts = findings.counts()
    for invariant in INVARIANTS:
        mine = [v for v in findings.violations if v.invariant == invariant.id]
        if not mine:
            continue
        lines.append(f"{invariant.id} ({invariant.requirements[0]}: {invariant.rule}): "
                     f"{counts[invariant.id]} violation{'s' if len(mine) > 1 else ''}")
        lines += [f"  {v}" for v in mine[:limit]]
        if len(mine) > limit:
            lines.append(f"  … and {len(mine) - limit} more")
    return "\n".join(lines)


def tally(judged: Iterable[tuple[str, Findings]]) -> list[dict[str, Any]]:
    """Per invariant, over the named traces' findings (cases, probes): its requirements,
    sentence and rule, the number of violations, the names that violated it and how many
    skipped it — the report's ``universal`` entries."""
    violations: Counter[str] = Counter()
    skipped: Counter[str] = Counter()
    violated_by: dict[str, list[str]] = {i.id: [] for i in INVARIANTS}
    for name, findings in judged:
        for invariant, count in findings.counts().items():
            violations[invariant] += count
            violated_by[invariant].append(name)
        skipped.update({i for i, _ in findings.skipped})
    return [{"id": i.id, "requirements": list(i.requirements), "sentence": i.sentence,
             "rule": i.rule, "violations": violations[i.id], "violated_by": violated_by[i.id],
             "skipped": skipped[i.id]} for i in INVARIANTS]


def table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The terminal's table of :func:`tally`'s rows."""
    lines = [f"{'universal check':<19} {'requirement':<11} {'violations':>10} {'in':>5} "
             f"{'skipped':>8}"]
    lines += [f"{r['id']:<19} {r['requirements'][0]:<11} {r['violations']:>10} "
              f"{len(r['violated_by']):>5} {r['skipped']:>8}" for r in rows]
    return "\n".join(lines)


__all__ = ["BY_ID", "INVARIANTS", "Findings", "Invariant", "Violation", "check", "summary",
           "table", "tally"]
