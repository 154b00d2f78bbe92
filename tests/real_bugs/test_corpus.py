"""The real-bug corpus as regression probes (issue #31): each bug put back, or reached where it
is still present, must make its named cases fail; without it they pass; and putting a fixed
bug back leaves the framework as it was. Slow: each probe runs whole cases on a framework."""


import pytest

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.harness import confirm_capabilities, load_factory, run_case
from tests.real_bugs.corpus import CORPUS, Bug
from tests.real_bugs.patches import CHANGES, PATCHES


def _statuses(driver: str, cases: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    factory = load_factory(driver)
    probes = confirm_capabilities(factory)
    return {case.id: (result.status, result.detail) for case in by_id(list(cases))
            for result in [run_case(case, factory, probes)]}


@pytest.mark.slow
@pytest.mark.parametrize("bug", CORPUS, ids=[bug.report for bug in CORPUS])
def test_the_bug_is_caught(bug: Bug) -> None:
    if bug.patch is None:
        seen = _statuses(bug.driver, bug.cases)
    else:
        with bug.patch():
            seen = _statuses(bug.driver, bug.cases)
    missed = {case: detail for case, (status, detail) in seen.items()
              if status != "failed" or bug.shows not in detail}
    seeing = f" with {bug.shows}" if bug.shows else ""
    assert not missed, (
        f"{bug.report} ({bug.broken}) is no longer caught: with it, {sorted(missed)} did not "
        f"fail{seeing} on {bug.driver}. Find the case that sees it now, or say in "
        "tests/real_bugs/corpus.py why none does.")


@pytest.mark.slow
@pytest.mark.parametrize("bug", CORPUS, ids=[bug.report for bug in CORPUS])
def test_without_the_bug_its_cases_pass(bug: Bug) -> None:
    # The cases fail because of the bug, not for another reason.
    seen = _statuses(bug.clean or bug.driver, bug.cases)
    failing = {case: detail for case, (status, detail) in seen.items() if status != "passed"}
    assert not failing, (
        f"without {bug.report}, {sorted(failing)} do not pass on {bug.clean or bug.driver}, so "
        f"their failure does not show the bug: {failing}")


@pytest.mark.slow
@pytest.mark.parametrize("report", sorted(PATCHES))
def test_putting_a_bug_back_leaves_the_framework_as_it_was(report: str) -> None:
    changed = CHANGES[report]()
    before = dict(vars(changed))
    with PATCHES[report]():
        assert dict(vars(changed)) != before, f"{report}: a patch that changes nothing"
    assert dict(vars(changed)) == before, f"{report}: a patch outlived its probe"
