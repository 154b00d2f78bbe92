"""One rule per case, gated only on what that rule needs (issue #31): each case's rule and
capabilities are listed, and a case fails here when it needs a capability of which no check
of the case reads anything (docs/open-questions.md Q310 to Q312: a check reads what it looks up
in the reference's trace, conformance/reads.py; each capability's trace paths are
``EVIDENCE`` in conformance/capabilities.py)."""

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.capabilities import evidence, refine, unread
from ctxspec.conformance.case import Case, example, no_check
from ctxspec.conformance.cases import CASES
from ctxspec.conformance.harness import SharedRuns, load_factory
from ctxspec.conformance.reads import read_paths
from tests.reference_traces import JUDGED, TraceOf


def reads_of(case: Case, trace_of: TraceOf) -> set[str]:
    trace = trace_of(case.scenario)
    paths = set() if case.check is no_check else read_paths(case.check, trace)
    if case.compare is not None and case.baseline is not None:
        paths |= read_paths(case.compare, trace, trace_of(case.baseline))
    return paths


@pytest.mark.first  # the reference traces' parts, shared by the workers as they start
def test_every_case_reads_each_capability_it_needs(reference_trace: TraceOf) -> None:
    listed, unused = [], []
    for case in JUDGED:
        paths = reads_of(case, reference_trace)
        listed.append(f"{case.id}: {case.title} — needs {', '.join(sorted(case.needs))}")
        missing = unread(case, paths)
        if missing:
            unused.append(f"{case.id} ({case.title}) needs {', '.join(missing)}, which none of "
                          f"its checks reads")
    assert len(listed) == len(JUDGED)
    assert not unused, "\n".join(unused)


def test_a_needed_capability_never_read_is_caught() -> None:
    # ROW-07 over several Loops reads no placeholder: declaring stop_mid_batch would be unread.
    case = next(c for c in CASES if c.id == "ROW-07")
    paths = read_paths(case.check, SharedRuns(load_factory(None)).trace(case.scenario)[0])
    bundled = Case(case.id, case.title, case.source, case.requirements, case.scenario,
                   case.check, case.needs | {"stop_mid_batch", "history_api"})
    assert unread(bundled, paths) == ["history_api", "stop_mid_batch"]
    assert evidence(bundled, "history_api") == ("history_read*",)


@pytest.mark.parametrize("case_id", ["ROW-24", "ROW-25", "S11-AUDIT-NEEDS-GRANT"])
def test_a_hook_the_rule_never_reads_is_caught(case_id: str, reference_trace: TraceOf) -> None:
    # These read the history's kinds of record after one tool batch: put back the pre-call
    # hook their scenario once carried, and the hook point they would need is never read
    # (which kinds of record a history read serves is the same whether or not a hook acted).
    case = next(c for c in CASES if c.id == case_id)
    hooked = {**case.scenario, "hooks": example("tool-batch-hook")["hooks"]}
    bundled = refine(replace(case, scenario=hooked, needs=case.needs | {"hooks"}))
    assert "hooks:tool.pre_call" in bundled.needs
    paths = read_paths(case.check, SharedRuns(load_factory(None)).trace(hooked)[0])
    assert unread(bundled, paths) == ["hooks:tool.pre_call"]
    assert unread(case, reads_of(case, reference_trace)) == []


@pytest.mark.parametrize(("case_id", "needs"), [
    ("ROW-07", set()),
    ("ROW-07-PLACEHOLDERS", {"stop", "stop_mid_batch", "triggers"}),
    ("ROW-05", {"compaction_summary", "estimator_injection"}),
    ("ROW-05-SNAPSHOT", {"compaction_summary", "compaction_snapshots", "estimator_injection"}),
    ("S11-COMPACTION-FAILED", {"compaction_summary", "estimator_injection"}),
    ("S11-COMPACTION-FAILED-HISTORY", {"compaction_summary", "estimator_injection",
                                       "history_api"}),
    ("S8-SUMMARY-FAILS", {"compaction_summary", "estimator_injection"}),
    ("S8-SUMMARY-RETRIED", {"compaction_summary", "estimator_injection"}),
])
def test_the_split_cases_need_only_their_rule(case_id: str, needs: set[str]) -> None:
    case = next(c for c in CASES if c.id == case_id)
    assert case.needs == needs


def test_the_list_publishes_each_case_rule_and_capabilities() -> None:
    table = CliRunner().invoke(main, ["conformance", "--list"])
    assert table.exit_code == 0, table.output
    assert "ROW-07-PLACEHOLDERS" in table.output
    listed = CliRunner().invoke(main, ["conformance", "--list", "--json"])
    assert listed.exit_code == 0, listed.output
    cases = json.loads(listed.output)["cases"]
    assert [c["id"] for c in cases] == [c.id for c in CASES]
    row7 = next(c for c in cases if c["id"] == "ROW-07-PLACEHOLDERS")
    assert row7 == {"id": "ROW-07-PLACEHOLDERS", "source": "§12 row 7",
                    "rule": "a batch stopped mid-way gets placeholders for the calls that never "
                            "ran",
                    "requirements": ["CTX-6.6", "CTX-6.10", "CTX-6.12", "CTX-10.18",
                                     "CTX-10.22"],
                    "capabilities": ["stop", "stop_mid_batch", "triggers"]}
