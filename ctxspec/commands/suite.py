"""``ctxspec conformance`` (the suite against a driver), ``ctxspec compat`` (a production
runtime's compatibility report) and ``ctxspec mutants`` (the kill matrix of the deliberately wrong
runtimes)."""

import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ctxspec.commands.options import (
    Count,
    Jobs,
    Seconds,
    folder_of,
    workers_for,
    writable,
    write_page,
)

if TYPE_CHECKING:  # the harness is imported by the commands only
    from ctxspec.conformance.case import Case
    from ctxspec.conformance.harness import CaseResult, DriverFactory
    from ctxspec.conformance.probes import ProbeResult
    from ctxspec.conformance.stdio import StdioDriver
# --- conformance -------------------------------------------------------------------------


def _list_cases(cases: Sequence["Case"], as_json: bool) -> None:
    """Each case's ID, source, rule (its title: the one rule it checks), requirement IDs and
    the capabilities it needs — a row's cases share its source (§12 row 7: ROW-07,
    ROW-07-PLACEHOLDERS)."""
    listed = [{"id": case.id, "source": case.source, "rule": case.title,
               "requirements": list(case.requirements), "capabilities": sorted(case.needs)}
              for case in cases]
    if as_json:
        click.echo(json.dumps({"cases": listed}, ensure_ascii=False, indent=1))
        return
    width = max(len(case["id"]) for case in listed)
    source = max(len(case["source"]) for case in listed)
    click.echo(f"{'case':<{width}}  {'source':<{source}}  rule  [requirements]  needs")
    for case in listed:
        needs = ", ".join(case["capabilities"]) or "-"
        click.echo(f"{case['id']:<{width}}  {case['source']:<{source}}  {case['rule']}  "
                   f"[{', '.join(case['requirements'])}]  needs {needs}")


@click.command("conformance")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="The driver to test (default: the reference runtime).")
@click.option("--stdio", "stdio_command", metavar="COMMAND",
              help="Drive a runtime in a subprocess over the stdio protocol v2 instead.")
@click.option("--stdio-timeout", type=Seconds(0.1, 86400), default=60.0,
              show_default=True, metavar="SECONDS",
              help="How long to wait for each answer of the --stdio runtime before ending it.")
@click.option("--stdio-max-line", type=Count(1024, 1 << 30), default=64 << 20,
              show_default=True, metavar="BYTES",
              help="The longest answer line read from the --stdio runtime.")
@click.option("--case", "case_ids", multiple=True, metavar="ID",
              help="Run only this case (repeatable).")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: suite_version, driver, cases, summary.")
@click.option("--report", "jsonl", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a JSON Lines report (spec/schemas/ConformanceReportLine.json).")
@click.option("--junit", type=click.Path(dir_okay=False, path_type=Path),
              help="Write a JUnit XML report for CI.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report as one HTML page: status matrices, failures one click away.")
@click.option("--verbose", "-v", is_flag=True, help="Print a line for every case, not only for "
              "those that did not pass, and each failed case's trace in a few lines (each "
              "model request: its kind, I, the §8 decision and its messages).")
@click.option("--traces", is_flag=True, help="With --json: each failed or errored case's "
              "entry carries its trace (the linear form of trace format 2, as far as it got).")
@click.option("--jobs", "-j", type=Jobs(), default="auto", show_default=True,
              help="Run the cases in this many worker processes, each with its own driver "
              "(with --stdio, its own runtime subprocess); auto: one per core, at most one "
              "per 100 cases; 1: in this process.")
@click.option("--list", "list_only", is_flag=True, help="List the cases (or the --case ones): "
              "each one's ID, source, rule, requirement IDs and the capabilities it needs; "
              "with --json as JSON. Runs nothing.")
def conformance_command(driver_spec: str | None, stdio_command: str | None,
                        stdio_timeout: float, stdio_max_line: int,
                        case_ids: tuple[str, ...], as_json: bool, jsonl: Path | None,
                        junit: Path | None, html_file: Path | None, verbose: bool,
                        traces: bool, jobs: int | None, list_only: bool) -> None:
    """Run the conformance cases against a driver and print a table grouped by source (§12 row,
    worked example, crash matrix); exit 1 unless every case passed or is unsupported."""
    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.stdio import ProtocolError, StdioDriver, Stop, parse_command

    if list_only:
        try:
            _list_cases(by_id(case_ids or None), as_json)
        except KeyError as error:
            raise click.UsageError(str(error).strip("'\"")) from error
        return

    if driver_spec and stdio_command is not None:
        raise click.UsageError("give --driver or --stdio, not both")
    for option, path in (("--report", jsonl), ("--junit", junit), ("--html", html_file)):
        if path is not None:
            writable(folder_of(path, option), option)
    try:  # every argument is checked before a runtime is started
        factory = load_factory(driver_spec)
        cases = by_id(case_ids or None)
        if stdio_command is not None:
            parse_command(stdio_command)
    except (ValueError, KeyError, ImportError) as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    stdio: StdioDriver | None = None
    stop = Stop()
    stop.install()
    try:
        if stdio_command is not None:
            try:
                stdio = StdioDriver(stdio_command, stdio_timeout, stdio_max_line, stop.check)
            except OSError as error:  # the command cannot be started: a bad argument
                raise click.UsageError(f"--stdio {stdio_command!r}: {error.strerror}") \
                    from error
            except ProtocolError as error:
                raise click.ClickException(f"--stdio {stdio_command!r}: {error}") from error
        _conformance(driver_spec, factory, stdio, cases, as_json, jsonl, junit, html_file,
                     (verbose, traces), jobs, stop.check)
    finally:
        try:
            if stdio is not None:
                stdio.close()
        finally:
            stop.restore()


def _connected(stdio: "StdioDriver") -> "DriverFactory":
    """The factory of a runtime already running: every case is sent to the same process."""
    return lambda: stdio


def _conformance(driver_spec: str | None, factory: "DriverFactory",
                 stdio: "StdioDriver | None", cases: Sequence["Case"], as_json: bool,
                 jsonl: Path | None, junit: Path | None, html_file: Path | None,
                 shown: tuple[bool, bool], jobs: int | None, stop: Callable[[], None]) -> None:
    """Run the cases; ``shown``: (``-v``, ``--traces``)."""
    from ctxspec.conformance.harness import (
        confirm_capabilities,
        run_suite,
        run_suite_in_processes,
        write_reports,
    )

    began = time.perf_counter()
    if stdio is not None:
        driver_spec, factory = f"stdio: {stdio.command}", _connected(stdio)
    probes = confirm_capabilities(factory)
    if not as_json:
        _echo_probes(probes)
    results = []
    workers = workers_for(jobs, len(cases))
    suite = run_suite(cases, factory, probes) if workers == 1 else run_suite_in_processes(
        cases, workers, driver_spec=None if stdio else driver_spec,
        stdio=None if stdio is None else (stdio.command, stdio.timeout, stdio.max_line),
        probes=probes)
    for result in suite:
        stop()  # a stop whose exception was dropped ends the run here, between cases
        results.append(result)
        if not as_json:
            _echo_result(result, len(results), len(cases), shown[0],
                         driver_spec or "reference")
    if sys.stderr.isatty() and not as_json:
        click.echo("\r" + " " * 60 + "\r", nl=False, err=True)
    if stdio is not None:
        stdio.close()  # before the reports: the runtime's exit is part of the run
    total = time.perf_counter() - began
    try:
        write_reports(results, driver_spec or "reference", jsonl=jsonl, junit=junit)
    except OSError as error:  # the folder was checked; the disk may still refuse
        raise click.ClickException(f"a report could not be written: {error}") from error
    if html_file is not None:
        from ctxspec.conformance.compat import profile_of, reasons
        from ctxspec.conformance.report_html import write_report_page
        why = {} if stdio is not None or driver_spec is None else \
            reasons(profile_of(factory(), driver_spec))
        write_page(html_file, lambda: write_report_page(html_file, results,
                                                         driver_spec or "reference", probes,
                                                         total, why))
    _print(results, probes, driver_spec, as_json, total, shown[1])


def _print(results: Sequence["CaseResult"], probes: Mapping[str, "ProbeResult"],
           driver_spec: str | None, as_json: bool, total: float, traces: bool = False) -> None:
    """The run's outcome on stdout — JSON, or the tables and the summary line — and its exit
    code: 1 when a case failed or erred, or a probe's trace broke a universal check."""
    from ctxspec.conformance.harness import SUITE_VERSION
    from ctxspec.conformance.replays import replay_command
    from ctxspec.conformance.universal import table, tally
    summary = Counter(r.status for r in results)
    universal = tally([*((f"probe {p.capability}", p.universal) for p in probes.values()),
                       *((r.case.id, r.universal) for r in results)])
    if as_json:
        click.echo(json.dumps({
            "suite_version": SUITE_VERSION, "driver": driver_spec or "reference",
            "probes": [p.to_json() for p in probes.values()],
            "cases": [_entry(r, replay_command(r.case.id, driver_spec or "reference"),
                             traces) for r in results],
            "universal": universal,
            "summary": {s: summary.get(s, 0) for s in ("passed", "failed", "unsupported",
                                                       "error")}}, ensure_ascii=False))
    else:
        click.echo(_grouped(results))
        click.echo(table(universal))
        click.echo(f"{len(results)} cases in {total:.2f} s: " + ", ".join(
            f"{summary.get(s, 0)} {s}" for s in ("passed", "failed", "unsupported", "error")))
    if summary.get("failed") or summary.get("error") \
            or any(p.universal.violations for p in probes.values()):
        sys.exit(1)


def _entry(result: "CaseResult", replay: str, traces: bool) -> dict[str, object]:
    """A case's ``--json`` entry; with ``--traces`` a failure's trace too (linear form)."""
    from ctxspec.conformance.linear_trace import linear

    entry = result.to_json(replay)
    if traces and result.status in ("failed", "error"):
        entry["trace"] = None if result.trace is None else linear(result.trace)
    return entry


def _echo_probes(probes: Mapping[str, "ProbeResult"]) -> None:
    """The capabilities the driver declared, how many probing confirmed, and each one that was
    not confirmed or not probed, with why."""
    unconfirmed = [p for p in probes.values() if p.status == "not_confirmed"]
    click.echo(f"capabilities: {len(probes)} declared, "
               f"{sum(p.status == 'confirmed' for p in probes.values())} confirmed by probing"
               + "".join(f"\n  {p.capability} NOT confirmed: {p.detail}" for p in unconfirmed)
               + "".join(f"\n  {p.capability} not probed: {p.detail}"
                         for p in probes.values() if p.status == "not_probed"))


def _echo_result(result: "CaseResult", done: int, total: int, verbose: bool,
                 driver: str) -> None:
    """A case that did not pass (every case with --verbose), with its detail and the command
    that replays it; with --verbose a failure's trace in a few lines. On a terminal, the
    progress on one rewritten line."""
    from ctxspec.conformance.replays import replay_command
    from ctxspec.conformance.trace_summary import summary_lines

    failed = result.status in ("failed", "error")
    if verbose or failed:
        click.echo(f"{result.case.id:<40} {result.status:<11} "
                   f"{result.seconds * 1000:7.0f} ms  {result.case.title}"
                   + "".join(f"\n{'':41}{line}" for line in result.detail.splitlines())
                   + "".join(f"\n{'':41}log: {line}" for line in result.log))
    if failed:
        click.echo(f"{'':41}replay: {replay_command(result.case.id, driver)}")
    if failed and verbose:
        click.echo(f"{'':41}the trace:" if result.trace is not None else
                   f"{'':41}(no trace: the runtime gave none)")
        for line in summary_lines(result.trace or []) if result.trace is not None else ():
            click.echo(f"{'':43}{line}")
    if sys.stderr.isatty():
        click.echo(f"\r[{done}/{total}] {result.case.id:<48}", nl=False, err=True)


def _grouped(results: Sequence["CaseResult"]) -> str:
    """One row per source (a §12 row, a worked example, the crash matrix), in suite order."""
    statuses = ("passed", "failed", "unsupported", "error")
    groups: dict[str, list[CaseResult]] = {}
    for result in results:
        groups.setdefault(result.case.source, []).append(result)
    rows = [f"{'source':<18} {'cases':>5} " + " ".join(f"{s:>11}" for s in statuses)
            + f" {'time':>9}"]
    for source, members in groups.items():
        counts = Counter(str(r.status) for r in members)
        rows.append(f"{source:<18} {len(members):>5} "
                    + " ".join(f"{counts.get(s, 0):>11}" for s in statuses)
                    + f" {sum(r.seconds for r in members) * 1000:>6.0f} ms")
    return "\n".join(rows)


# --- compat ------------------------------------------------------------------------------


@click.command("compat")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="The production runtime's driver.")
@click.option("--stdio", "stdio_command", metavar="COMMAND",
              help="Instead: a runtime in a subprocess over the stdio protocol v2.")
@click.option("--profile", "profile_file", type=click.Path(dir_okay=False, exists=True,
                                                           path_type=Path),
              help="With --stdio: the JSON file of what the report says of the framework "
                   "(conformance/compat_stdio.py), e.g. adapters/langchain-js/profile.json.")
@click.option("--stdio-timeout", type=Seconds(0.1, 86400), default=60.0, show_default=True,
              metavar="SECONDS", help="How long to wait for each answer of the --stdio runtime.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("docs/compatibility"), show_default=True,
              help="The folder of the reports and their README table.")
@click.option("--date", metavar="YYYY-MM-DD", help="The report's date (default: today), so a "
              "fresh run can reproduce a checked-in report.")
@click.option("--case", "case_ids", multiple=True, metavar="ID",
              help="Run only this case (repeatable).")
def compat_command(driver_spec: str | None, stdio_command: str | None,
                   profile_file: Path | None, stdio_timeout: float, out: Path,
                   date: str | None, case_ids: tuple[str, ...]) -> None:
    """Run a driver (or a --stdio runtime) over the suite and write its compatibility report:
    <runtime>.md and <runtime>.json in --out, and the folder's README table (runtime × §12
    row)."""
    import datetime

    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.compat import run_compat
    from ctxspec.conformance.compat_page import write_report
    from ctxspec.conformance.compat_stdio import ProfileError, load_profile, run_compat_stdio
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.stdio import ProtocolError, parse_command

    if (driver_spec is None) == (stdio_command is None):
        raise click.UsageError("give --driver or --stdio (exactly one)")
    if profile_file is not None and stdio_command is None:
        raise click.UsageError("--profile goes with --stdio (a driver carries its own profile)")
    try:
        cases = by_id(case_ids or None)
        day = datetime.date.fromisoformat(date) if date else datetime.date.today()
        if stdio_command is not None:
            parse_command(stdio_command)
            if profile_file is not None:
                load_profile(profile_file)  # refused before any runtime starts
        else:
            factory = load_factory(driver_spec)
    except (ValueError, KeyError, ImportError) as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    if stdio_command is not None:
        try:
            report = run_compat_stdio(stdio_command, profile_file, cases, day.isoformat(),
                                      stdio_timeout)
        except (OSError, ProtocolError, ProfileError) as error:
            raise click.ClickException(f"--stdio {stdio_command!r}: {error}") from error
    else:
        assert driver_spec is not None
        report = run_compat(factory, driver_spec, cases, day.isoformat())
    for path in write_report(out, report):
        click.echo(f"wrote {path}")
    click.echo(", ".join(f"{count} {status}" for status, count in report["summary"].items()))


# --- mutants -----------------------------------------------------------------------------


@click.command("mutants")
@click.option("--json", "as_json", is_flag=True,
              help="Print one JSON object: mutants (id, description, killed_by, errored) and "
                   "summary (total, killed).")
@click.option("--mutant", "mutant_ids", multiple=True, metavar="ID",
              help="Judge only this mutant (repeatable).")
@click.option("--case", "case_ids", multiple=True, metavar="ID",
              help="Judge against only this case (repeatable; default: every case).")
def mutants_command(as_json: bool, mutant_ids: tuple[str, ...],
                    case_ids: tuple[str, ...]) -> None:
    """Run the conformance cases against every deliberately wrong runtime and print the kill
    matrix; exit 1 if a mutant survives (a missing case, or one left out by --case)."""
    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.mutants import all_mutants, judge

    mutants = all_mutants()
    unknown = sorted(set(mutant_ids) - {m.id for m in mutants})
    if unknown:
        raise click.UsageError(f"no mutant {', '.join(unknown)}")
    try:
        cases = by_id(case_ids or None)
    except KeyError as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    chosen = [m for m in mutants if not mutant_ids or m.id in mutant_ids]
    began = time.perf_counter()
    verdicts = []
    for number, mutant in enumerate(chosen, start=1):
        verdict = judge(mutant, cases)
        verdicts.append(verdict)
        if not as_json:  # progress: one line per mutant as it is judged
            killers = verdict.killed_by
            shown = ", ".join(killers[:3]) + (f" and {len(killers) - 3} more"
                                              if len(killers) > 3 else "")
            click.echo(f"[{number}/{len(chosen)}] {mutant.id:<28} "
                       + (f"killed by {shown}" if killers else "SURVIVED"))
    killed = sum(1 for v in verdicts if v.killed_by)
    if as_json:
        click.echo(json.dumps({"mutants": [v.to_json() for v in verdicts],
                               "summary": {"total": len(verdicts), "killed": killed}},
                              ensure_ascii=False))
    else:
        click.echo(f"{killed} of {len(verdicts)} mutants killed in "
                   f"{time.perf_counter() - began:.1f} s")
    if killed < len(verdicts):
        sys.exit(1)
