"""A conformance case for §11's "根 Run 停止 … 不能被局部错误处理吞掉" where a retry policy is the
local error handling: the user's stop arrives while a business attempt that will fail is in
flight, with a retry left (issue #31).

The case judges one rule, the Run's ending. That no retry is sent after the stop (§11 "不启动新
的压缩或业务 Attempt") is not counted here: it holds on every request of every case and is
judged there by the universal check U-AFTER-STOP (conformance/universal.py; Q445), which this
scenario gives a failing attempt with a retry left to look at — no other case stops one.
"""

from typing import Any

from ctxspec.conformance.case import Case, Trace, base, endings, equal


def _scenario() -> dict[str, Any]:
    document = base(model_attempts=2)
    document["steps"] = [{"ask": "go"}, {"advance": True}]
    # Attempt 1 fails; the retry would be answered — a runtime that swallows the stop into its
    # retry policy ends the Run succeeded on that answer.
    document["model"] = {"business": [{"fail": "reset"}, {"text": "an answer"}]}
    document["triggers"] = [{"on": {"purpose": "business", "ordinal": 1}, "do": {"stop": True}}]
    return document


def _check(trace: Trace) -> None:
    # The stop is accepted while attempt 1 is in flight; the attempt fails with one of the
    # two model_attempts left. The failure is local error handling, which a root Run's stop
    # is never swallowed by (§11): the Run ends stopped with no error code — not failed
    # MODEL_FAILED, nor succeeded on a retry's answer.
    equal(endings(trace), [(1, "stopped", None)], "Run endings")


CASES: tuple[Case, ...] = (
    Case("S11-STOP-BEFORE-RETRY", "a stop while a failing attempt has a retry left ends the "
         "Run stopped", "§11", ("CTX-11.13", "CTX-11.5"), _scenario(), _check,
         frozenset({"triggers", "stop"})),
)
