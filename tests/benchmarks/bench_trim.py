"""Projection and budget check beside LangChain's ``trim_messages`` on one agent session
(issue #20).

Run: ``python3 tests/benchmarks/bench_trim.py [--repeat 5]`` with the ``bench`` extra
installed (``pip install -e '.[bench]'``: langchain-core).

Both sides get the same 10,000-message agent session, built in memory before any timing:
100 Runs, each a question, 49 assistant turns of one tool call each with its result (30 to 400
words), and a final answer; the current (100th) Run has its question and 49 turns, and the
system prompt makes the 10,000th message. About 1.57 M cl100k tokens.

- ``floor``: one tiktoken count of every message's text, nothing else: what any exact count of
  the session costs at least. Taken just before and just after each cold request; the cold
  ratio divides by their mean.
- ``trim_messages``: LangChain's ``trim_messages(strategy="last")`` to a 100K budget with a
  tiktoken counter of one message (the counter a user writes: content, tool calls, framing).
  It keeps no state between calls, so every call is the same.
- ctxspec: one request as the runtime prepares it: the §4 history projection (protocol repair,
  de-duplication), §8's split into fixed input F and compressible material M counted by the
  tokenizer estimator (the whole request, system prompt and tool schema included), and §8's
  decision (``evaluate_compaction``) against B = 100,000. ``cold`` is the first request after
  the session was read (new records, nothing kept with them) with a fresh estimator (nothing
  counted yet), ``warm`` the next request of the same records and estimator: it projects
  every ended Run again, estimates I and F and takes the decision, reusing only what each
  record's revision and each message keep (their view message, rendering and counted text).
  ``projection`` is the history projection alone, cold and warm. Shapes: every Run projected
  (recent_runs covers all Runs, the worst case) and the default recent_runs = 2.

Times are the process's CPU time (``time.process_time``; nothing here starts a thread),
medians of ``--repeat`` rounds measured in one process. A round takes every figure once, one
after the other, and a ratio is the median of the rounds' ratios, so ratios hold on a loaded
machine even when the absolute times do not. Targets (issue #20), every Run
projected: warm >= 20x faster than trim_messages, cold <= 1.3x the floor; recent_runs = 2:
warm >= 100x faster than trim_messages. Figures are in docs/benchmarks.md.
"""

import argparse
import gc
import hashlib
import json
import random
import statistics
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any
from uuid import UUID

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    trim_messages,
)

from ctxspec.reference.budget import (
    BudgetConfig,
    ResolvedBudget,
    evaluate_compaction,
    resolve_budget,
)
from ctxspec.reference.compaction import RequestParts, split_request
from ctxspec.reference.contracts import (
    ContextRecord,
    InputKind,
    MessageRole,
    PayloadRef,
    RunStatus,
)
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement, project_history
from ctxspec.reference.runtime import tokenizer
from ctxspec.reference.runtime.tokenizer import TiktokenEstimator, default_cache_dir, load_cl100k
from ctxspec.reference.view import (
    EffectiveRecord,
    ModelView,
    ToolCall,
    ViewKind,
    ViewMessage,
    estimation_request,
)

RUNS = 100
TURNS = 49
"""Assistant turns (one tool call and its result each) per Run."""
BUDGET = 100_000
SYSTEM_PROMPT = "You are a careful coding agent. Read before you write; cite the files you used."
TOOL_SCHEMA = json.dumps({"name": "read", "description": "Read a file of the repository.",
                          "parameters": {"type": "object",
                                         "properties": {"path": {"type": "string"}},
                                         "required": ["path"]}}, sort_keys=True)
REF = PayloadRef(digest="sha256:" + hashlib.sha256(b"bench").hexdigest(), size_bytes=5)

_WORDS = (
    "the of and to in is that for it as with was on be by this are from at or an have not "
    "but which they you were their one all we can her has there been if more when will would "
    "who so no what up out about into than them only other new some could time these two may "
    "then do first any my now such like our over man me even most made after also did many "
    "before must through back years where much your way well down should because each just "
    "those people how too little state good very make world still own see men work long get "
    "here between both life being under never day same another know while last might us "
    "great old year off come since against go came right used take three function return "
    "import class self value error config file path test result string list dict none true "
    "false async await def lambda yield raise except finally assert module package version "
    "request response session context record budget token window summary compaction"
)
WORDS = _WORDS.split()
_CODE = (
    "parse_config() max_tokens=4096 user_id=42 src/app.py:118 TypeError: KeyError('path') "
    "self.window ctx.records[7] 0x7f3a9c HTTP/1.1 200 OK --recent-runs=2 run_no record_id "
    "json.loads(text) 2026-11-30T09:15:02Z tests/test_api.py::test_budget sha256:9f86d0 "
    "raise ValueError(msg) return None {\"status\": \"ok\"} async_client.get(url) "
    "await store.commit() @dataclass(frozen=True) def __init__(self): for i in range(n):"
)
CODE = _CODE.split()
CODE_SHARE = 0.135
"""Share of code-like words (about 3.7 tokens each; the plain words are about one token)."""
FILES = ("src/app.py", "src/store.py", "notes/design.md", "tests/test_api.py", "README.md",
         "src/budget/window.py", "pyproject.toml", "src/runtime/commit.py")


def ident(run: int, n: int) -> UUID:
    return UUID(int=(run << 32) | n)


@dataclass(frozen=True)
class Turn:
    """One message of the session, the neutral form both sides are built from."""

    run: int
    seq: int
    role: MessageRole
    kind: str
    text: str
    call_id: UUID | None = None
    path: str | None = None
    """For an assistant turn: the path its one ``read`` call reads."""


def prose(rng: random.Random, low: int, high: int) -> str:
    words = [rng.choice(CODE) if rng.random() < CODE_SHARE else rng.choice(WORDS)
             for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def run_turns(rng: random.Random, run: int, ended: bool) -> list[Turn]:
    turns = [Turn(run, 1, MessageRole.USER, "user_ref", f"Question {run}: " + prose(rng, 8, 30))]
    for n in range(TURNS):
        seq = 2 + 2 * n
        call = ident(run, 1000 + n)
        path = rng.choice(FILES)
        turns.append(Turn(run, seq, MessageRole.ASSISTANT, "assistant",
                          f"Reading {path}: " + prose(rng, 3, 12), call_id=call, path=path))
        turns.append(Turn(run, seq + 1, MessageRole.TOOL, "tool_result",
                          prose(rng, 30, 400), call_id=call))
    if ended:
        turns.append(Turn(run, 2 + 2 * TURNS, MessageRole.ASSISTANT, "assistant",
                          "Answer: " + prose(rng, 20, 120)))
    return turns


def session_turns(seed: int = 20) -> list[list[Turn]]:
    rng = random.Random(seed)
    return [run_turns(rng, run, ended=run < RUNS) for run in range(1, RUNS + 1)]


def arguments(path: str) -> str:
    return json.dumps({"path": path}, sort_keys=True)


# --- LangChain's side -------------------------------------------------------------------------


def langchain_messages(runs: list[list[Turn]]) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(SYSTEM_PROMPT)]
    for turns in runs:
        for turn in turns:
            if turn.role is MessageRole.USER:
                messages.append(HumanMessage(turn.text))
            elif turn.role is MessageRole.TOOL:
                messages.append(ToolMessage(turn.text, tool_call_id=str(turn.call_id)))
            elif turn.path is not None:
                messages.append(AIMessage(turn.text, tool_calls=[
                    {"name": "read", "args": {"path": turn.path}, "id": str(turn.call_id)}]))
            else:
                messages.append(AIMessage(turn.text))
    return messages


def langchain_counter(encoder: Any) -> Callable[[BaseMessage], int]:
    def count(message: BaseMessage) -> int:
        text = str(message.content)
        for call in getattr(message, "tool_calls", ()):
            text += f"\n{call['name']}({json.dumps(call['args'], sort_keys=True)})"
        return 3 + len(encoder.encode(message.type, disallowed_special=())) + len(
            encoder.encode(text, disallowed_special=()))
    count.__annotations__["message"] = BaseMessage  # trim_messages sums a one-message counter
    return count


# --- ctxspec's side ---------------------------------------------------------------------------


def effective(turn: Turn) -> EffectiveRecord:
    record = ContextRecord(
        record_id=ident(turn.run, 100_000 + turn.seq), context_id=ident(turn.run, 1),
        context_seq=turn.seq, run_id=ident(turn.run, 0), role=turn.role,
        message_kind=turn.kind, payload_ref=REF, operation_id=None,
        call_id=turn.call_id if turn.role is MessageRole.TOOL else None,
        origin_input_id=ident(turn.run, 2) if turn.kind == "user_ref" else None)
    calls = () if turn.path is None or turn.call_id is None else (
        ToolCall(call_id=turn.call_id, action_ordinal=1, name="read",
                 arguments=arguments(turn.path)),)
    return EffectiveRecord(record=record, text=turn.text, tool_calls=calls)


class Session:
    """The session as a store with every effective record in memory (a warm runtime's view of
    it): the HistorySource of the projection."""

    def __init__(self, runs: list[list[Turn]]) -> None:
        self.records = {run[0].run: [effective(turn) for turn in run] for run in runs}
        self.questions = {run[0].run: run[0].text for run in runs}
        self.ended = [EndedRun(ident(run, 0), run, RunStatus.SUCCEEDED, self.records[run][-1])
                      for run in range(1, RUNS)]

    def user_inputs(self, run: EndedRun) -> Iterable[InputOccurrence]:
        input_id = ident(run.run_no, 2)
        yield InputOccurrence(input_id, run.run_no, InputKind.QUESTION,
                              self.questions[run.run_no], self.placement(input_id))

    def root_records(self, run: EndedRun) -> Iterator[EffectiveRecord]:
        return iter(self.records[run.run_no])

    def placement(self, input_id: UUID) -> InputPlacement:
        run = UUID(int=input_id.int >> 32 << 32)
        return InputPlacement(run, run)


def project(session: Session, recent: int) -> ModelView:
    view = project_history(ended_runs=session.ended, recent_runs=recent, source=session,
                           current_run_id=ident(RUNS, 0),
                           current_records=iter(session.records[RUNS]),
                           protected_input_ids={ident(RUNS, 2)})
    assert isinstance(view, ModelView)
    return view


SYSTEM = ViewMessage(role=MessageRole.SYSTEM, kind=ViewKind.SYSTEM_PROMPT, text=SYSTEM_PROMPT)


def request(session: Session, recent: int, estimator: TiktokenEstimator,
            budget: ResolvedBudget) -> tuple[int, str]:
    """One request as the runtime prepares it: projection, F and M, the §8 decision."""
    view = project(session, recent)
    parts = RequestParts((SYSTEM,), (TOOL_SCHEMA,), view.messages, (), (),
                         frozenset({ident(RUNS, 2)}))
    split = split_request(parts, estimator)
    verdict = evaluate_compaction(budget, split.fixed_tokens, split.material_tokens)
    return split.input_tokens, verdict.decision


def fresh_estimator() -> TiktokenEstimator:
    """An estimator that has counted nothing. Before issue #20 the counts lived in a
    process-wide cache of the tokenizer module, which is emptied here so that cold is cold."""
    old_cache = getattr(tokenizer, "_count_text", None)
    if old_cache is not None:
        old_cache.cache_clear()
    return TiktokenEstimator("cl100k_base")


# --- timing -----------------------------------------------------------------------------------


def seconds(action: Callable[[], object]) -> float:
    """CPU seconds of this process running ``action``: on a machine shared with other work,
    wall time also counts the time spent waiting for a core."""
    gc.collect()
    start = time.process_time()
    action()
    return time.process_time() - start


class Collections:
    """CPU seconds the cyclic garbage collector spends inside a timed action, reported beside
    it (the bench never tunes the collector; the pure core has no global state to tune it)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.seconds += time.process_time() - self._start


def seconds_and_collections(action: Callable[[], object]) -> tuple[float, float]:
    """:func:`seconds` of ``action`` and the part of it the garbage collector took."""
    collections = Collections()
    gc.collect()
    gc.callbacks.append(collections)
    try:
        start = time.process_time()
        action()
        return time.process_time() - start, collections.seconds
    finally:
        gc.callbacks.remove(collections)


SHAPES = (("every Run projected", RUNS), ("recent_runs = 2", 2))


def measure_round(runs: list[list[Turn]], budget: ResolvedBudget, floor: Callable[[], object],
                  trim: Callable[[], object]) -> dict[str, float]:
    """One time of every figure, taken one after the other (a round): a ratio of two figures
    of one round is measured under the same load.

    Cold starts from a session just read (new records, nothing kept with them) and a fresh
    estimator (nothing counted), as a runtime's first request after it loaded the session;
    warm is the next request of the same session and estimator. The records are built before
    the clock starts: reading them is the store's cost (bench_history.py measures it).

    The floor a cold request is compared with is taken just before and just after it, and
    is their mean: the load of a shared machine moves from second to second, and a floor
    taken seconds away (with trim_messages between them) gave cold ratios scattering by a
    tenth or more round to round."""
    times = {"trim": seconds(trim)}
    for label, recent in SHAPES:
        projection = partial(project, Session(runs), recent)
        times[f"{label}: projection cold"] = seconds(projection)
        times[f"{label}: projection warm"] = seconds(projection)
        once = partial(request, Session(runs), recent, fresh_estimator(), budget)
        before = seconds(floor)
        times[f"{label}: cold"], times[f"{label}: cold, collector"] = (
            seconds_and_collections(once))
        times[f"{label}: floor"] = (before + seconds(floor)) / 2
        times[f"{label}: warm"] = seconds(once)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (medians are printed)")
    args = parser.parse_args()
    runs = session_turns()
    lc_messages = langchain_messages(runs)
    session = Session(runs)
    encoder = load_cl100k(default_cache_dir())
    budget = resolve_budget(BudgetConfig(window=110_000, output_reserve=8_000,
                                         safety_margin=2_000))
    assert isinstance(budget, ResolvedBudget) and budget.input_budget == BUDGET
    texts = [m.text for m in estimation_request(
        ModelView((SYSTEM, *project(session, RUNS).messages))).messages]
    counter = langchain_counter(encoder)

    def floor() -> None:
        for text in texts:
            encoder.encode(text, disallowed_special=())

    def trim() -> list[BaseMessage]:
        # list(...) keeps the type whether or not langchain-core (the bench extra) is installed.
        return list(trim_messages(lc_messages, max_tokens=BUDGET, token_counter=counter,
                                  strategy="last", include_system=True, start_on="human"))

    total = sum(len(encoder.encode(text, disallowed_special=())) for text in texts)
    print(f"session: {len(lc_messages):,} messages (ctxspec's view with every Run projected: "
          f"{len(texts):,}, with the terminal markers), {total:,} cl100k tokens; "
          f"trim_messages keeps {len(trim()):,}")
    rounds = [measure_round(runs, budget, floor, trim) for _ in range(args.repeat)]

    def median(key: str) -> float:
        return statistics.median(times[key] for times in rounds)

    def ratio(top: str, bottom: str) -> float:
        return statistics.median(times[top] / times[bottom] for times in rounds)

    print(f"medians of {args.repeat} rounds; ratios are medians of each round's ratio")
    every, default = (label for label, _ in SHAPES)
    print(f"{'floor (one count per message)':<44} {median(f'{every}: floor') * 1000:>9.1f} ms")
    print(f"{'trim_messages (tiktoken counter)':<44} {median('trim') * 1000:>9.1f} ms")
    for label, recent in SHAPES:
        estimator = fresh_estimator()
        tokens, decision = request(session, recent, estimator, budget)
        messages = len(project(session, recent).messages)
        print(f"ctxspec, {label} ({messages:,} messages, I = {tokens:,}, {decision}):")
        for state in ("cold", "warm"):
            projection = median(f"{label}: projection {state}")
            print(f"  {'projection, ' + state:<42} {projection * 1000:>9.1f} ms "
                  f"({projection / messages * 1e6:.1f} µs a message)")
        print(f"  {'cold request':<42} {median(f'{label}: cold') * 1000:>9.1f} ms  "
              f"{ratio(f'{label}: cold', f'{label}: floor'):.2f}x the floor")
        print(f"  {'  of which the garbage collector':<42} "
              f"{median(f'{label}: cold, collector') * 1000:>9.1f} ms")
        print(f"  {'warm request':<42} {median(f'{label}: warm') * 1000:>9.1f} ms  "
              f"{ratio('trim', f'{label}: warm'):.1f}x faster than trim_messages")
    print("each round's cold ratio, every Run projected: " + " ".join(
        f"{times[f'{every}: cold'] / times[f'{every}: floor']:.3f}" for times in rounds))
    print(f"targets: warm {ratio('trim', f'{every}: warm'):.1f}x (>= 20x), "
          f"cold {ratio(f'{every}: cold', f'{every}: floor'):.2f}x the floor (<= 1.3x), "
          f"recent_runs = 2 warm {ratio('trim', f'{default}: warm'):.1f}x (>= 100x)")


if __name__ == "__main__":
    main()
