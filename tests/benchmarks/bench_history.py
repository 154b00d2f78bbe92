"""Benchmark of the history projection (§4, §6) over synthetic sessions.

Run: ``python3 tests/benchmarks/bench_history.py [--repeat 5]``. Prints, for sessions of 1k, 10k
and 100k records, the median wall time of one projection end to end (``total``), of reading the
same records from the synthetic store alone (``source``: decoding rows into validated records,
the store's cost), their difference (``project``: the projection itself), records projected
per second, and the peak memory traced during one projection. The session is never held in
memory: the source generates each Run's records on demand, as a store answering paged queries
would, so the peak shows what the projection itself keeps (the view it produces, one open
batch, the shown input ids).

Two shapes per size: ``all-recent`` projects every record (recent_runs covers every Run), the
worst case; ``default`` uses recent_runs = 2, where older Runs contribute inputs and results only.
Token estimation is timed separately: counted once per message of the produced view.

Target (issue #3): the 100k-record all-recent projection under 1 s on the 2-core CI machine,
time growing linearly with records, peak memory proportional to the view. Measured figures and
what limits them are in docs/benchmarks.md.
"""

import argparse
import hashlib
import statistics
import time
import tracemalloc
from collections.abc import Iterable, Iterator
from uuid import UUID

from ctxspec.reference.contracts import (
    ContextRecord,
    InputKind,
    MessageRole,
    PayloadRef,
    RunStatus,
)
from ctxspec.reference.history import EndedRun, InputOccurrence, InputPlacement, project_history
from ctxspec.reference.tokens import ByteEstimator
from ctxspec.reference.view import EffectiveRecord, ModelView, ToolCall, estimation_request

RECORDS_PER_RUN = 1000
REF = PayloadRef(digest="sha256:" + hashlib.sha256(b"x").hexdigest(), size_bytes=1)


def ident(run: int, n: int) -> UUID:
    return UUID(int=(run << 32) | n)


class SyntheticSession:
    """Runs of RECORDS_PER_RUN records: a question, then rounds of an assistant decision with
    two tool calls and their two results (completed in reverse order), and a final answer."""

    def __init__(self, runs: int) -> None:
        self.runs = runs

    def ended(self) -> list[EndedRun]:
        return [EndedRun(ident(r, 0), r, RunStatus.SUCCEEDED, self._final(r))
                for r in range(1, self.runs)]

    def _record(self, run: int, seq: int, role: MessageRole, kind: str, text: str,
                call: UUID | None = None, input_id: UUID | None = None,
                calls: tuple[ToolCall, ...] = ()) -> EffectiveRecord:
        record = ContextRecord(record_id=ident(run, 1_000_000 + seq), context_id=ident(run, 1),
                               context_seq=seq, run_id=ident(run, 0), role=role,
                               message_kind=kind, payload_ref=REF, operation_id=None,
                               call_id=call, origin_input_id=input_id)
        return EffectiveRecord(record=record, text=text, tool_calls=calls)

    def _final(self, run: int) -> EffectiveRecord:
        return self._record(run, RECORDS_PER_RUN, MessageRole.ASSISTANT, "assistant",
                            f"final answer of run {run}")

    def records(self, run: int) -> Iterator[EffectiveRecord]:
        yield self._record(run, 1, MessageRole.USER, "user_ref", f"question {run}",
                           input_id=ident(run, 2))
        seq = 2
        while seq + 3 <= RECORDS_PER_RUN - 1:
            calls = tuple(ToolCall(call_id=ident(run, 10 * seq + k), action_ordinal=k,
                                   name="read", arguments='{"path": "a.md"}') for k in (1, 2))
            yield self._record(run, seq, MessageRole.ASSISTANT, "assistant", "reading",
                               calls=calls)
            for offset, call in enumerate(reversed(calls), start=1):
                yield self._record(run, seq + offset, MessageRole.TOOL, "tool_result",
                                   f"content {seq}", call=call.call_id)
            seq += 3
        while seq < RECORDS_PER_RUN:
            yield self._record(run, seq, MessageRole.ASSISTANT, "assistant", "thinking")
            seq += 1
        yield self._final(run)

    # HistorySource
    def user_inputs(self, run: EndedRun) -> Iterable[InputOccurrence]:
        yield InputOccurrence(ident(run.run_no, 2), run.run_no, InputKind.QUESTION,
                              f"question {run.run_no}", self.placement(ident(run.run_no, 2)))

    def root_records(self, run: EndedRun) -> Iterable[EffectiveRecord]:
        return self.records(run.run_no)

    def placement(self, input_id: UUID) -> InputPlacement:
        run = UUID(int=input_id.int >> 32 << 32)
        return InputPlacement(run, run)


def project(session: SyntheticSession, recent: int) -> ModelView:
    current = session.runs
    view = project_history(ended_runs=session.ended(), recent_runs=recent, source=session,
                           current_run_id=ident(current, 0),
                           current_records=session.records(current),
                           protected_input_ids={ident(current, 2)})
    assert isinstance(view, ModelView)
    return view


def drain_source(session: SyntheticSession, recent_n: int) -> int:
    """Read everything the projection reads from the source, doing nothing with it: the cost
    of the (synthetic) store, to subtract from the end-to-end time."""
    count = 0
    ended = session.ended()
    older = ended[:-recent_n] if recent_n else ended
    recent = ended[-recent_n:] if recent_n else []
    for run in older:
        count += sum(1 for _ in session.user_inputs(run))
    for run in recent:
        count += sum(1 for _ in session.root_records(run))
    count += sum(1 for _ in session.records(session.runs))
    return count


def measure(records: int, recent: int | None, repeat: int) -> None:
    session = SyntheticSession(max(1, records // RECORDS_PER_RUN))
    recent_n = session.runs if recent is None else recent
    view = project(session, recent_n)  # warm-up
    totals, sources = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        view = project(session, recent_n)
        totals.append(time.perf_counter() - start)
        start = time.perf_counter()
        read = drain_source(session, recent_n)
        sources.append(time.perf_counter() - start)
    tracemalloc.start()
    project(session, recent_n)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    start = time.perf_counter()
    tokens = ByteEstimator().estimate(estimation_request(view)).tokens
    estimate_s = time.perf_counter() - start
    total, source = statistics.median(totals), statistics.median(sources)
    projection = total - source
    shape = "all-recent" if recent is None else f"recent={recent}"
    print(f"{records:>8} {shape:>10} {read:>8} {total * 1000:>9.1f} {source * 1000:>9.1f} "
          f"{projection * 1000:>9.1f} {read / projection:>12,.0f} "
          f"{len(view.messages):>8} "
          f"{peak / 2**20:>8.1f} {estimate_s * 1000:>9.1f}  ({tokens} tokens)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per row (median)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[1_000, 10_000, 100_000])
    args = parser.parse_args()
    print("times in ms, medians of", args.repeat, "runs; memory = tracemalloc peak, MiB")
    print(f"{'records':>8} {'shape':>10} {'read':>8} {'total':>9} {'source':>9} "
          f"{'project':>9} {'rec/s':>12} {'messages':>8} {'memory':>8} {'estimate':>9}")
    for size in args.sizes:
        for recent in (None, 2):
            measure(size, recent, args.repeat)


if __name__ == "__main__":
    main()
