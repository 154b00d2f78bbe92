"""Fuzzing every entry point with hostile input (docs/robustness.md): generated arguments,
scenario documents, vector files, stdio lines both ways and a misbehaving runtime.

Each entry point is checked for: no traceback (only the documented exits 0, 1, 2 and the
documented statuses), no hang (a watchdog per input), codes only from the closed set, and no
input accepted that the documents say must be refused — judged by an oracle written here from
the documents, independently of the validators. The default tier runs a few dozen inputs per
entry point; the ``slow`` tier runs the batch whose figures docs/robustness.md records.
"""

import contextlib
import io
import json
import os
import re
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxspec.cli import main
from ctxspec.conformance.case import example
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.scenario import PATCH_TARGETS
from ctxspec.conformance.stdio import ProtocolError, StdioDriver, serve
from ctxspec.conformance.vectors import OBSERVED, VECTORS, replay
from ctxspec.reference.errors import ErrorCode

BATCH = 3000
"""Inputs per entry point of the slow tier's batch under the ``thorough`` profile, the figure
docs/robustness.md records; the default tier takes the Hypothesis profile's count
(tests/conftest.py)."""
CI_BATCH = 300
"""The slow tier's batch under any other profile: a tenth, so that CI stays within its time."""
WATCHDOG = 20
"""Seconds one input may take before it counts as a hang."""
CODES = {code.value for code in ErrorCode}
TALLY: Counter[str] = Counter()
"""Per entry point: inputs run, and how many were accepted and refused (printed with -s)."""


def batch() -> settings:
    """The slow tier's batch: a fixed count, like a hunt, so its figures can be quoted."""
    thorough = settings.get_profile("thorough").max_examples
    count = BATCH if settings().max_examples >= thorough else CI_BATCH
    return settings(max_examples=count, deadline=None, database=None,
                    suppress_health_check=list(HealthCheck))


def profile(cap: int | None = None) -> settings:
    """The default tier: the profile's count (capped for a test that starts a process per
    input), no deadline, no health check about slow or large inputs."""
    count = settings().max_examples  # the loaded profile's
    return settings(max_examples=count if cap is None else min(count, cap), deadline=None,
                    database=None, suppress_health_check=list(HealthCheck))


@contextlib.contextmanager
def watchdog(seconds: int = WATCHDOG) -> Iterator[None]:
    """Fail an input that runs past ``seconds``: a hang, not a slow answer."""
    def hung(signum: int, frame: object) -> None:
        raise AssertionError(f"no answer within {seconds} s: a hang")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def cli(args: list[str]) -> tuple[int, str]:
    with watchdog():
        result = CliRunner().invoke(main, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"traceback for {args!r:.300}: {result.exception!r}")
    assert result.exit_code in (0, 1, 2), (args, result.exit_code, result.output)
    return result.exit_code, result.output


# --- hostile values ---------------------------------------------------------------------------

DIGITS_OF_OTHER_SCRIPTS = "\u0660\u0661\u0665\u06f1\u0967\u09e7\uff11\U0001d7cf"
junk_text = st.one_of(
    st.text(max_size=12),
    st.text(st.sampled_from("0123456789kK._ -+e" + DIGITS_OF_OTHER_SCRIPTS), max_size=12),
    st.integers(-(10**20), 10**20).map(str),
    st.sampled_from(["", " ", "128K", "0.8_0", "1e3", "nan", "inf", "0x10", "9" * 5000,
                     "\u0661\u0662\u0668K", "\u0660.\u0665", "0.80", "-1", "4096", "true",
                     "\ud800", "1" + "0" * 13, " 12 k"]))
argv_text = st.one_of(
    junk_text.filter(lambda t: "\x00" not in t and not re.search("[\ud800-\udfff]", t)),
    st.binary(max_size=16).filter(lambda b: b"\x00" not in b).map(os.fsdecode))
"""What a real command line can hold: no NUL, and no surrogate but those ``os.fsdecode``
makes of bytes that are not UTF-8."""
json_leaf = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
    st.sampled_from(["\ud800", "x\udfff", "128", "", "nonsense", 10**13, 128.0, True]))
json_values = st.recursive(json_leaf, lambda inner: st.one_of(
    st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8)


# --- ctxspec budget ---------------------------------------------------------------------------

TOKEN_OPTIONS = ["--window", "--output-reserve", "--max-output", "--safety-margin",
                 "--summary-target", "--provider-output-limit", "--fixed", "--material",
                 "--summary-tokens", "--added-after-compaction"]
_ASCII_COUNT = re.compile(r"[ \t]*([0-9]+)[ \t]*([kK]?)[ \t]*")
_ASCII_RATIO = re.compile(r"[ \t]*(?:[0-9]*\.[0-9]+|[0-9]+)[ \t]*")

plausible = st.one_of(st.integers(1, 10**6).map(str), st.integers(1, 512).map(lambda n: f"{n}K"),
                      st.sampled_from(["0.5", "0.80", ".9", "0.25"]))
budget_args = st.lists(st.tuples(st.sampled_from([*TOKEN_OPTIONS, "--trigger-ratio"]),
                                 st.one_of(argv_text, plausible)), min_size=1, max_size=4)


def _count_ok(text: str) -> bool:
    match = _ASCII_COUNT.fullmatch(text)
    return match is not None and int(match[1]) * (1024 if match[2] else 1) <= 10**12


def check_budget(pairs: list[tuple[str, str]]) -> None:
    args = ["budget", "--json", "--window", "128K"]
    for option, value in pairs:
        args += [option, value]
    code, _ = cli(args)
    TALLY["budget " + ("accepted" if code == 0 else "refused")] += 1
    if code == 0:  # the documents: ASCII digits (K for 1024), within bounds; r decimal text
        given = dict(pairs)
        for option, value in given.items():
            good = _ASCII_RATIO.fullmatch(value) is not None if option == "--trigger-ratio" \
                else _count_ok(value)
            assert good, f"accepted {option} {value!r}"


@profile()
@given(budget_args)
def test_budget_arguments(pairs: list[tuple[str, str]]) -> None:
    check_budget(pairs)


@pytest.mark.slow
@batch()
@given(budget_args)
def test_budget_arguments_batch(pairs: list[tuple[str, str]]) -> None:
    check_budget(pairs)


# --- the other commands' arguments -----------------------------------------------------------

def _junk_option(value: str) -> list[list[str]]:
    """Commands that read only their arguments before acting, each with a hostile value where
    a name, a path, a number or a command goes (never one that writes or runs the whole
    suite)."""
    nowhere = f"/nonexistent/{value}"
    return [["replay", nowhere], ["replay", value], ["vectors", "--replay", nowhere],
            ["conformance", "--case", f"NO-SUCH-{value}"],
            ["conformance", "--driver", f"zz_{value}:f"],
            ["conformance", "--stdio", value, "--case", "NO-SUCH-CASE"],
            ["conformance", "--stdio-timeout", value, "--case", "NO-SUCH-CASE"],
            ["trace", "--section", value], ["mutants", "--mutant", f"NO-SUCH-{value}"],
            ["stdio-driver", "--max-line", value],
            ["conformance", "--case", "NO-SUCH-CASE", "--report", nowhere]]


ASCII_IN_RANGE = {7: (1, 11), 9: (1024, 1 << 30)}
"""The options above that a good value lets through (``trace --section``, ``stdio-driver
--max-line``): ASCII digits within their bounds, and nothing else."""


CASE_IDS = frozenset(case.id for case in CASES)
REPLAY_BY_NAME = 1
"""``replay VALUE``: Hypothesis draws string constants from the code it runs, so VALUE is at
times a real case ID, which replay rightly runs. A relative path that exists would be read as
well, so these commands run in an empty folder."""


def check_arguments(value: str, which: int) -> None:
    args = _junk_option(value)[which]
    with tempfile.TemporaryDirectory() as folder, contextlib.chdir(folder):
        code, _ = cli(args)
    TALLY[f"{args[0]} exit {code}"] += 1
    bounds = ASCII_IN_RANGE.get(which)
    good = (bounds is not None and re.fullmatch(r"[ \t]*[0-9]{1,12}[ \t]*", value) is not None
            and bounds[0] <= int(value) <= bounds[1]) \
        or (which == REPLAY_BY_NAME and value in CASE_IDS)
    assert code == (0 if good else 2), f"{args!r:.200}: exit {code}"


command_args = st.tuples(argv_text,
                         st.integers(0, len(_junk_option("x")) - 1))


@profile()
@given(command_args)
def test_command_arguments(case: tuple[str, int]) -> None:
    check_arguments(*case)


def test_a_case_id_where_replay_takes_a_name_is_replayed() -> None:
    """The input the fuzzer once drew from the code's own constants (CI, 2026-12-03)."""
    check_arguments("S7-BYTES-CJK", REPLAY_BY_NAME)
    check_arguments("S7-BYTES-CJK-NOT", REPLAY_BY_NAME)


@pytest.mark.slow
@batch()
@given(command_args)
def test_command_arguments_batch(case: tuple[str, int]) -> None:
    check_arguments(*case)


# --- scenario documents (ctxspec replay) ------------------------------------------------------

BASES = ["tool-batch-hook", "supplements-across-runs", "workflow-sibling-failure",
         "planner-two-executors"]
DEEP = "<nested "
INT_FIELDS = [("agent", "window"), ("agent", "recent_runs"), ("agent", "loop_limit"),
              ("agent", "model_attempts")]


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _leaves(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _leaves(item, (*path, index))
    yield path, value


def _set(document: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        document = document[part]
    document[path[-1]] = value


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[dict[str, Any], str | None]:
    """A real scenario damaged one way, and what the documents say of it: the rule it breaks
    (so it must be refused), or None when it may be accepted."""
    document = example(draw(st.sampled_from(BASES)))
    kind = draw(st.sampled_from(["as-is", "text", "leaf", "int-type", "unknown-key",
                                 "surrogate", "deep", "target", "ask-twice", "delete"]))
    if kind in ("ask-twice", "delete") and "steps" not in document:  # a workflow has none
        document = example("tool-batch-hook")
    if kind == "as-is":
        return document, None
    if kind == "text":  # any Unicode text where the document has text: accepted, and run
        texts = [p for p, v in _leaves(document) if isinstance(v, str) and p
                 and p[-1] in ("ask", "supplement", "text", "system_prompt", "description")]
        _set(document, draw(st.sampled_from(texts)),
             draw(st.text(st.characters(exclude_categories=["Cs"]), max_size=40)))
        return document, None
    if kind == "leaf":
        paths = [p for p, _ in _leaves(document) if p]
        _set(document, draw(st.sampled_from(paths)), draw(json_values))
        return document, None
    if kind == "int-type":
        section, field = draw(st.sampled_from(INT_FIELDS))
        document[section][field] = draw(st.sampled_from([True, False, "128", 128.0, 10**13,
                                                         -(10**13), None]))
        return document, "a number is a JSON integer within bounds"
    if kind == "unknown-key":
        where = draw(st.sampled_from([(), ("agent",), ("steps", 0)] if "steps" in document
                                     else [(), ("agent",), ("workflow",)]))
        target: Any = document
        for part in where:
            target = target[part]
        target[draw(st.sampled_from(["surprise", "Window", "x" * 1000]))] = 1
        return document, "unknown fields are refused"
    if kind == "surrogate":
        texts = [p for p, v in _leaves(document) if isinstance(v, str) and p]
        _set(document, draw(st.sampled_from(texts)), "a\ud800b")
        return document, "text is Unicode"
    if kind == "deep":  # spliced into the text: json itself cannot write it
        document["description"] = f"{DEEP}{draw(st.integers(65, 100_000))}"
        return document, "nesting is bounded"
    if kind == "target":
        document["hooks"] = [{"point": "model.pre_request", "items": [{"context_patch": [
            {"target": draw(st.text(max_size=10).filter(
                lambda t: t not in PATCH_TARGETS and not t.startswith("shared:")
                and not _is_uuid(t))), "field": "text"}]}]}]
        return document, "a patch target is a name or a uuid"
    if kind == "ask-twice":
        document["steps"] = [{"ask": "a"}, {"ask": "b"}, {"advance": True}]
        return document, "an ask waits for the previous Run"
    document["steps"] = [*document["steps"], {"delete_agent": True},
                         draw(st.sampled_from([{"ask": "x"}, {"advance": True},
                                               {"supplement": "y"}, {"stop": True}]))]
    return document, "nothing runs after delete_agent"


def _is_uuid(text: str) -> bool:
    from uuid import UUID
    try:
        UUID(text)
    except ValueError:
        return False
    return True


def check_replay(case: tuple[dict[str, Any], str | None]) -> None:
    document, rule = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.json"
        text = re.sub(f'"{DEEP}([0-9]+)"', lambda m: "[" * int(m[1]) + "]" * int(m[1]),
                      json.dumps(document))
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        code, output = cli(["replay", str(path)])
    TALLY[f"replay exit {code}"] += 1
    if rule is not None:
        assert code == 2, f"accepted a scenario that breaks {rule!r}: {output[:300]}"
    if code == 2:
        assert any(c in output for c in CODES), output[:300]


@profile()
@given(scenarios())
def test_scenario_documents(case: tuple[dict[str, Any], str | None]) -> None:
    check_replay(case)


@pytest.mark.slow
@batch()
@given(scenarios())
def test_scenario_documents_batch(case: tuple[dict[str, Any], str | None]) -> None:
    check_replay(case)


# --- vector files (ctxspec vectors --replay) --------------------------------------------------

VECTOR_BASES = ["ROW-02.json", "BAD-BUDGET.json", "ROW-12.json"]


@st.composite
def vector_files(draw: st.DrawFn) -> bytes:
    document = json.loads((VECTORS / draw(st.sampled_from(VECTOR_BASES))).read_text("utf-8"))
    for _ in range(draw(st.integers(0, 3))):
        part = draw(st.sampled_from(["manifest", "expected", "top"]))
        holder = document if part == "top" or not isinstance(document.get(part), dict) \
            else document[part]
        keys = list(holder) or ["x"]
        key = draw(st.sampled_from([*keys, "needs", "refusal", "format", "extra"]))
        if draw(st.booleans()) and key in holder:
            del holder[key]
        else:
            holder[key] = draw(json_values)
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=40))
    return json.dumps(document).encode("utf-8", "surrogatepass")


def _whole(expected: object) -> bool:
    """The documents' rule for an expectation: a known refusal code alone, or every
    observation as a list."""
    if not isinstance(expected, dict):
        return False
    if expected.get("refusal") is not None:  # null is no refusal
        return set(expected) == {"refusal"} and expected["refusal"] in CODES
    return all(isinstance(expected.get(key), list) for key in OBSERVED)


def check_vector(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder, watchdog():
        (Path(folder) / "v.json").write_bytes(data)
        [result] = replay(Path(folder), ReferenceDriver)
    TALLY[f"vector {result.status}"] += 1
    assert result.status in ("passed", "failed", "unsupported", "error", "unread")
    if result.status != "unread":
        document = json.loads(data)
        assert _whole(document["expected"]), f"read a vector with {document['expected']!r:.200}"
        needs = document["manifest"].get("needs", [])
        assert isinstance(needs, list) and all(isinstance(n, str) for n in needs)
        assert type(document["manifest"]["format"]) is int


@profile()
@given(vector_files())
def test_vector_files(data: bytes) -> None:
    check_vector(data)


@pytest.mark.slow
@batch()
@given(vector_files())
def test_vector_files_batch(data: bytes) -> None:
    check_vector(data)


# --- stdio lines to the server (ctxspec stdio-driver) -----------------------------------------

HELLO = {"protocol": "ctxspec-stdio", "version": 1, "op": "hello"}


@st.composite
def request_lines(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["junk", "field", "run"]))
    if kind == "junk":
        return draw(st.text(max_size=60)).replace("\n", " ")
    message: dict[str, Any] = dict(HELLO)
    if kind == "run":
        message.update(op="run", scenario=example("tool-batch-hook"))
    key = draw(st.sampled_from(["protocol", "version", "op", "scenario", "extra", None]))
    if key is not None:
        message[key] = draw(json_values)
    return json.dumps(message)


def _valid_request(line: str) -> bool:
    """StdioRequest.json, read independently: the three fields exactly, op run with a scenario
    object and only then."""
    try:
        message = json.loads(line)
    except ValueError:
        return False
    if not isinstance(message, dict) or set(message) - {"protocol", "version", "op",
                                                        "scenario"}:
        return False
    scenario = message.get("scenario")
    return (message.get("protocol") == "ctxspec-stdio" and type(message.get("version")) is int
            and message.get("version") == 1 and message.get("op") in ("hello", "run", "bye")
            and (message.get("op") == "run") == isinstance(scenario, dict)
            and (scenario is None or isinstance(scenario, dict)))  # the schema allows null


def check_server(lines: list[str]) -> None:
    out = io.StringIO()
    with watchdog():
        serve(iter([*lines, json.dumps({**HELLO, "op": "bye"})]), out)
    answers = [json.loads(line) for line in out.getvalue().splitlines()]
    said_bye = next((i for i, line in enumerate(lines)
                     if _valid_request(line) and json.loads(line)["op"] == "bye"), None)
    asked = lines if said_bye is None else lines[:said_bye + 1]
    assert len(answers) == len(asked) + (said_bye is None), "one answer a line"
    for line, answer in zip(asked, answers, strict=False):
        TALLY["server " + ("ok" if answer["ok"] else "refused")] += 1
        assert isinstance(answer["ok"], bool)
        if answer["ok"]:
            assert _valid_request(line), f"accepted {line!r:.200}"
        else:
            assert answer.get("code") in CODES | {None} and isinstance(answer["error"], str)
            if not _valid_request(line):
                assert answer.get("code") in ("STDIO_REQUEST_INVALID", "SCENARIO_INVALID")


@profile()
@given(st.lists(request_lines(), min_size=1, max_size=4))
def test_stdio_requests(lines: list[str]) -> None:
    check_server(lines)


@pytest.mark.slow
@batch()
@given(st.lists(request_lines(), min_size=1, max_size=4))
def test_stdio_requests_batch(lines: list[str]) -> None:
    check_server(lines)


# --- stdio answers to the harness (ctxspec conformance --stdio) ------------------------------

@st.composite
def answer_lines(draw: st.DrawFn) -> bytes:
    kind = draw(st.sampled_from(["bytes", "field", "long"]))
    if kind == "bytes":
        return draw(st.binary(max_size=60)).replace(b"\n", b" ")
    if kind == "long":
        return b'{"ok": true, "trace": [], "pad": "' + b"x" * 70_000 + b'"}'
    answer: dict[str, Any] = {"ok": True, "version": 1, "capabilities": ["root_loop"]}
    answer[draw(st.sampled_from(["ok", "version", "capabilities", "trace", "exhausted"]))] = \
        draw(json_values)
    return json.dumps(answer).encode("utf-8", "surrogatepass")


def _valid_hello(line: bytes) -> bool:
    """StdioAnswer.json read independently, for a hello: ok true, version 1, capabilities
    names, and every known field of its type."""
    try:
        answer = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    if not isinstance(answer, dict) or len(line) > 65_536:
        return False
    caps = answer.get("capabilities")
    trace = answer.get("trace")
    return (answer.get("ok") is True and type(answer.get("version")) is int
            and answer.get("version") == 1 and isinstance(caps, list)
            and all(isinstance(c, str) and not re.search("[\ud800-\udfff]", c) for c in caps)
            and (trace is None or isinstance(trace, dict)  # the linear form (trace format 2)
                 or (isinstance(trace, list) and all(isinstance(e, dict) for e in trace)))
            and answer.get("exhausted") in (None, True, False))


FAKE = ("import sys\nline = open(sys.argv[1], 'rb').read()\n"
        "for _ in sys.stdin.buffer:\n    sys.stdout.buffer.write(line + b'\\n')\n"
        "    sys.stdout.buffer.flush()\n")


def check_harness(line: bytes, fake: Path, answer: Path) -> None:
    answer.write_bytes(line)
    with watchdog():
        try:
            # -S: the fake needs no site-packages, and without them Python starts in about a
            # third of the time (one start per input: most of this test's time).
            driver = StdioDriver([sys.executable, "-S", str(fake), str(answer)], timeout=10,
                                 max_line=65_536)
        except ProtocolError:
            TALLY["harness refused"] += 1
            return
    TALLY["harness accepted"] += 1
    try:
        assert _valid_hello(line), f"accepted the hello {line!r:.200}"
        assert all(isinstance(c, str) for c in driver.capabilities)
    finally:
        driver.close()
    assert driver.process.returncode is not None, "the runtime was left running"


@pytest.fixture(scope="module")
def fake_runtime() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory() as folder:
        fake = Path(folder) / "fake.py"
        fake.write_text(FAKE)
        yield fake, Path(folder) / "answer"


@profile(cap=10)
@given(answer_lines())
def test_stdio_answers(fake_runtime: tuple[Path, Path], line: bytes) -> None:
    check_harness(line, *fake_runtime)


@pytest.mark.slow
@batch()
@given(answer_lines())
def test_stdio_answers_batch(fake_runtime: tuple[Path, Path], line: bytes) -> None:
    check_harness(line, *fake_runtime)


@pytest.fixture(scope="module", autouse=True)
def tally() -> Iterator[None]:
    yield
    if TALLY:
        print("\nfuzz tally: " + ", ".join(f"{k} {v}" for k, v in sorted(TALLY.items())))

