"""The pure core stays pure, enforced over every module the folder holds (tests/purity.py), and
the rule is not vacuous: each kind of impurity in a sample is caught, and the tokenizer adapter,
which reads a file and keeps a process-wide encoder, is caught too — that is why it lives in the
shell (reference/runtime/tokenizer.py) and not in the core."""

import pytest

from tests.purity import REFERENCE, SHELL, core_modules, violations


def test_every_module_of_the_core_is_pure() -> None:
    found = {path.relative_to(REFERENCE).as_posix(): violations(path.read_text("utf-8"))
             for path in core_modules()}
    assert {name: rules for name, rules in found.items() if rules} == {}, \
        "the pure core does I/O or keeps process-wide state (docs/reference-core.md)"


def test_the_core_is_found_by_walking_the_folder() -> None:
    # Every module of reference/ outside runtime/ is checked, whatever its name: a new module
    # is under the rule the moment it exists.
    names = {path.relative_to(REFERENCE).as_posix() for path in core_modules()}
    every = {path.relative_to(REFERENCE).as_posix() for path in REFERENCE.rglob("*.py")
             if not path.is_relative_to(SHELL) and "__pycache__" not in path.parts}
    assert names == every
    assert {"budget.py", "tokens.py", "delivery.py", "contracts.py"} <= names
    assert not any(name.startswith("runtime/") for name in names)


@pytest.mark.parametrize(("source", "finding"), [
    ("import sqlite3", "imports sqlite3"),
    ("from os import path", "imports os"),
    ("from pathlib import Path", "imports pathlib"),
    ("import time", "imports time"),
    ("import random", "imports random"),
    ("import threading", "imports threading"),
    ("import tiktoken", "imports tiktoken"),
    ("from ctxspec.reference.runtime.store import Store", "imports ctxspec.reference.runtime"),
    ("from uuid import uuid4", "imports uuid4 from uuid"),
    ("import uuid\nx = uuid.uuid4()", "uses .uuid4"),
    ("from datetime import datetime\nt = datetime.now()", "uses .now"),
    ("from functools import lru_cache", "imports lru_cache from functools"),
    ("import functools\n@functools.cache\ndef f() -> int: return 1", "uses .cache"),
    ("def f() -> str:\n    return open('x').read()", "uses open"),
    ("print('hi')", "uses print"),
    ("_SEEN = {}", "_SEEN is a shared mutable value"),
    ("_SEEN: list[int] = []", "_SEEN is a shared mutable value"),
    ("from collections import Counter\nCOUNTS = Counter()", "COUNTS is a shared mutable value"),
    ("class C:\n    registry = {}", "registry is a shared mutable value"),
    ("N = 0\ndef bump() -> None:\n    global N\n    N += 1", "global N"),
])
def test_the_rule_catches_each_kind_of_impurity(source: str, finding: str) -> None:
    assert any(finding in line for line in violations(source)), violations(source)


def test_the_rule_lets_pure_code_through() -> None:
    source = ("from types import MappingProxyType\nfrom uuid import UUID, uuid5\n"
              "CODES = MappingProxyType({'a': 1})\nNAMES = frozenset({'a'})\n"
              "__all__ = ['CODES']\n"
              "def f(cache: dict[str, int], now: int) -> UUID:\n"
              "    seen = {}\n    return uuid5(UUID(int=0), str(now + len(cache) + len(seen)))\n")
    assert violations(source) == []


def test_the_tokenizer_adapter_would_break_the_rule() -> None:
    adapter = violations((SHELL / "tokenizer.py").read_text("utf-8"))
    assert any("imports os" in line for line in adapter)
    assert any("global" in line for line in adapter)
