"""Capabilities at a fine grain (conformance/capabilities.py): each case needs the finest
capabilities its scenario uses, and the tables that say which cases fold chunks or read
snapshots agree with what the cases do."""

import inspect
import re

import pytest

from ctxspec.conformance.capabilities import CHUNKED, SNAPSHOTS, declared
from ctxspec.conformance.cases import CASES
from tests.reference_traces import TraceOf

BY_ID = {case.id: case for case in CASES}
COMPACTING = [c for c in CASES if "compaction_summary" in c.needs
              and c.source != "§10 crash matrix"]


@pytest.mark.first  # the reference traces' parts, shared by the workers as they start
def test_the_chunked_cases_are_those_whose_episodes_fold_more_than_one_chunk(
        reference_trace: TraceOf) -> None:
    folded = set()
    for case in COMPACTING:
        keys = [e["purpose_key"] for e in reference_trace(case.scenario)
                if e["kind"] == "model_request" and e["purpose"] == "compaction"]
        if any(re.search(r":chunk:([2-9]|\d\d)", key) for key in keys):
            folded.add(case.id)
    assert folded == CHUNKED
    assert all("compaction_chunks" in BY_ID[i].needs for i in CHUNKED)


def test_every_case_reading_a_snapshot_needs_snapshots() -> None:
    for case in COMPACTING:
        source = inspect.getsource(case.check) + (
            inspect.getsource(case.compare) if case.compare else "")
        if "snapshot" in source:
            assert case.id in SNAPSHOTS, case.id
    assert all("compaction_snapshots" in BY_ID[i].needs for i in SNAPSHOTS)


def test_hook_points_and_a_stop_mid_batch_come_from_the_scenario() -> None:
    assert BY_ID["ROW-07-PLACEHOLDERS"].needs >= {"stop", "stop_mid_batch"}
    assert "hooks:tool.pre_call" in BY_ID["ROW-21"].needs
    assert not any(need == "hooks" or need == "compaction" for c in CASES for need in c.needs
                   if c.scenario.get("hooks") or need == "compaction")


def test_a_coarse_declaration_covers_its_parts() -> None:
    assert declared({"compaction"}) >= {"compaction_summary", "compaction_chunks",
                                        "compaction_snapshots"}
    assert "hooks:capability.pre_call" in declared({"hooks"})
    assert declared({"stop"}) == {"stop"}
