"""``ctxspec compat`` (issue #16): a driver's run over the suite written down as a compatibility
report and the folder's README table — checked on the toy driver of
docs/implementing-a-driver.md, whose statuses are known (tests/test_toy_driver.py)."""

import json
import sys
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from ctxspec.cli import main
from ctxspec.conformance.cases import by_id
from ctxspec.conformance.compat import Divergence, Profile, Setting, build_report, run_compat
from ctxspec.conformance.compat_page import write_report
from ctxspec.conformance.harness import CaseResult

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "docs" / "driver-example"))

from toy_driver import ToyDriver

CHOSEN = ("ROW-01", "ROW-02", "ROW-04-BELOW", "ROW-08")
"""ROW-01 needs ``stop`` (unsupported), ROW-02 nothing (passed), ROW-04-BELOW
``estimator_injection``, ROW-08 bounded previews the toy lacks (failed)."""


class ProfiledToy(ToyDriver):
    compat_profile = Profile(
        runtime="toy", framework="The toy runtime", versions={"toy": "1.0"},
        adapter_supplied={"estimator_injection": "the toy has no estimator of its own"},
        divergences={"ROW-08": Divergence(
            "The toy sends a large result whole, never a bounded preview.",
            "toy_driver.py: ToyDriver._decide")})


def _report() -> dict[str, Any]:
    return run_compat(ProfiledToy, "tests:ProfiledToy", by_id(CHOSEN), "2026-01-02")


def test_a_report_gives_each_row_its_status_and_each_failure_its_sentence() -> None:
    report = _report()
    rows = report["rows"]
    assert [rows[n]["status"] for n in ("1", "2", "4", "8", "25")] == [
        "unsupported", "passed", "adapter", "failed", "unsupported"]
    assert report["summary"] == {"passed": 1, "adapter": 1, "failed": 1, "unsupported": 1,
                                 "error": 0}
    [failure] = report["failures"]
    assert failure["case"] == "ROW-08" and failure["kind"] == "inherent"
    assert failure["source"] == "toy_driver.py: ToyDriver._decide"
    # The toy sends the whole result: the preview check fails, and cites its own rule (a
    # bounded preview marked truncated), not the case's first requirement (issue #36).
    assert failure["requirement"] == "CTX-6.14" != by_id(["ROW-08"])[0].requirements[0]
    assert failure["replay"] == ("`ctxspec replay ROW-08 --driver tests:ProfiledToy "
                                 "--compare --html ROW-08.html`")
    assert report["adapter_supplied"] == {"estimator_injection":
                                          "the toy has no estimator of its own"}


def test_a_failure_nobody_explained_says_so() -> None:
    report = run_compat(ToyDriver, "toy_driver:ToyDriver", by_id(["ROW-08"]), "2026-01-02")
    [failure] = report["failures"]
    assert failure["kind"] == "unexplained" and "preview" in failure["sentence"]
    assert report["runtime"] == "toy_driver"


def test_the_pages_are_reproducible_and_the_readme_sums_every_report(tmp_path: Path) -> None:
    first = [path.read_text("utf-8") for path in write_report(tmp_path / "a", _report())]
    second = [path.read_text("utf-8") for path in write_report(tmp_path / "b", _report())]
    assert first == second
    page, readme = first[1], first[2]
    assert "| 8 | a very large tool result | **FAIL** | ROW-08 failed |" in page
    assert "The toy sends a large result whole" in page
    assert "| 4. the 80% boundary | pass (adapter) |" in readme
    other = {**json.loads(first[0]), "runtime": "other"}
    (tmp_path / "a" / "other.json").write_text(json.dumps(other), "utf-8")
    readme = write_report(tmp_path / "a", _report())[2].read_text("utf-8")
    assert "| §12 row | [other](other.md) | [toy](toy.md) |" in readme


def test_the_command_writes_the_report_and_refuses_a_bad_date(tmp_path: Path) -> None:
    sys.modules.setdefault("tests_compat_toy", sys.modules[__name__])
    runner = CliRunner()
    done = runner.invoke(main, ["compat", "--driver", "tests_compat_toy:ProfiledToy", "--out",
                                str(tmp_path), "--date", "2026-01-02", "--case", "ROW-02"])
    assert done.exit_code == 0, done.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["README.md", "toy.json", "toy.md"]
    assert json.loads((tmp_path / "toy.json").read_text("utf-8"))["date"] == "2026-01-02"
    refused = runner.invoke(main, ["compat", "--driver", "tests_compat_toy:ProfiledToy",
                                   "--out", str(tmp_path), "--date", "tomorrow"])
    assert refused.exit_code == 2 and "tomorrow" in refused.output


class BareToy(ToyDriver):
    """The toy with its 'defaults': no injected estimator, so ROW-04-BELOW is unsupported."""

    capabilities = frozenset(ToyDriver.capabilities - {"estimator_injection"})


class TwoConfigurations(ToyDriver):
    compat_profile = Profile(
        runtime="toy", defaults="tests_compat_toy:BareToy",
        settings=(Setting("estimator=...", "none", "the injected one", "It measures nothing.",
                          frozenset({"ROW-04-BELOW"})),),
        divergences=ProfiledToy.compat_profile.divergences)


def test_two_configurations_stand_side_by_side_and_a_default_names_its_setting(
        tmp_path: Path) -> None:
    sys.modules.setdefault("tests_compat_toy", sys.modules[__name__])
    report = run_compat(TwoConfigurations, "tests:TwoConfigurations",
                        by_id(("ROW-04-BELOW", "ROW-08")), "2026-01-02")
    assert report["rows"]["4"]["status"] == "passed"
    assert report["rows"]["4"]["defaults"]["status"] == "unsupported"
    assert report["configurations"]["defaults"]["cases"]["ROW-04-BELOW"] == "unsupported"
    # ROW-08 fails in both: inherent, listed once, for the best configuration.
    assert [(f["case"], f["configuration"], f["kind"]) for f in report["failures"]] == [
        ("ROW-08", "best", "inherent")]
    page = write_report(tmp_path, report)[1].read_text("utf-8")
    assert "ROW-04-BELOW unsupported / passed" in page


def test_a_default_failure_names_its_setting_or_is_unexplained() -> None:
    [case] = by_id(["ROW-04-BELOW"])
    best = [CaseResult(case, "passed", "", 0.0)]
    plain = [CaseResult(case, "failed", "saw no summary", 0.0)]
    profile = TwoConfigurations.compat_profile
    [named] = build_report(profile, "x:y", best, (), {}, "2026-01-02", plain)["failures"]
    assert (named["configuration"], named["kind"], named["setting"]) == (
        "defaults", "default", "estimator=... = the injected one")
    bare = Profile(runtime="toy", defaults="x:z")
    [unnamed] = build_report(bare, "x:y", best, (), {}, "2026-01-02", plain)["failures"]
    assert unnamed["kind"] == "unexplained" and "no setting" in unnamed["sentence"]
    # A setting named as the fix that the best run does not confirm is no default either.
    failing = [CaseResult(case, "error", "raised", 0.0)]
    [unverified] = build_report(profile, "x:y", failing, (), {}, "2026-01-02", plain)["failures"]
    assert unverified["configuration"] == "best"


def test_without_a_profile_no_capability_is_said_to_be_the_frameworks(tmp_path: Path) -> None:
    # Issue #33: a driver without compat_profile had every capability "supplied by the
    # framework". Nothing is known of who supplies it: the report says so, and says why.
    report = run_compat(ToyDriver, "toy_driver:ToyDriver", by_id(["ROW-02"]), "2026-01-02")
    assert report["profile"] is False and report["runtime"] == "toy_driver"
    write_report(tmp_path, report)
    page = (tmp_path / "toy_driver.md").read_text("utf-8")
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    assert rows and all(line.endswith(
        "| not stated (the driver has no `compat_profile`) |") for line in rows), rows
    assert "the framework |" not in page
    # A profiled driver's own capabilities are still the framework's.
    assert "profile" not in _report()
