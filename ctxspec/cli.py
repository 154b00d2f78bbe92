"""Command-line entry point: ``ctxspec budget | trace | schemas``.

Exit codes: 0 for every evaluation (an error verdict of the design is a result, not a failure
of the tool); 2 for invalid arguments or configuration, with a message naming the field.
"""

import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxspec import catalogue, schemas
from ctxspec.limits import MAX_TOKENS, shown
from ctxspec.reference.budget import (
    BudgetConfig,
    CompactionEvaluation,
    ConfigurationError,
    K,
    ResolvedBudget,
    SummaryRecheck,
    evaluate_compaction,
    recheck_after_summary,
    resolve_budget,
)

if TYPE_CHECKING:  # the harness is imported by the conformance command only
    from ctxspec.conformance.case import Case
    from ctxspec.conformance.harness import CaseResult, DriverFactory
    from ctxspec.conformance.scenario import Scenario
    from ctxspec.conformance.stdio import StdioDriver

USAGE_ERROR = 2
_TOKENS = re.compile(r"[ \t]*([0-9]{1,16})[ \t]*([kK]?)[ \t]*")
"""ASCII digits only: ``int`` would take the digits of every script (``١٢٨``) and ``_``."""


class Tokens(click.ParamType[int]):
    """An integer count of tokens: ``131072`` or ``128K`` (1K = 1024, design §7)."""

    name = "tokens"

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            return value
        match = _TOKENS.fullmatch(str(value))
        if not match:
            self.fail(f"{shown(value)} is not a token count (ASCII digits, optionally followed "
                      "by K for 1024 tokens, e.g. 128K)", param, ctx)
        number = int(match.group(1)) * (K if match.group(2) else 1)
        if number > MAX_TOKENS:
            self.fail(f"{shown(value)} is more than {MAX_TOKENS} tokens", param, ctx)
        return number


TOKENS = Tokens()


class Count(click.ParamType[int]):
    """An integer of ASCII digits within bounds: click's own ``int`` would take digits of other
    scripts, ``1_0`` and ``+1``."""

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> int:
        if isinstance(value, int) and not isinstance(value, bool):  # a default
            return value
        text = str(value).strip(" \t")
        if not re.fullmatch(r"[0-9]{1,12}", text) or not self.low <= int(text) <= self.high:
            self.fail(f"{shown(value)} is not an integer from {self.low} to {self.high} "
                      "(ASCII digits)", param, ctx)
        return int(text)


class Seconds(click.ParamType[float]):
    """Seconds as ASCII decimal text within bounds (``float`` would take ``nan``, ``1e3`` and
    digits of other scripts)."""

    name = "seconds"

    def __init__(self, low: float, high: float) -> None:
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> float:
        if isinstance(value, float):  # a default
            return value
        text = str(value).strip(" \t")
        if not re.fullmatch(r"[0-9]{1,6}(\.[0-9]{1,6})?", text) \
                or not self.low <= float(text) <= self.high:
            self.fail(f"{shown(value)} is not a number of seconds from {self.low:g} to "
                      f"{self.high:g} (ASCII decimal text)", param, ctx)
        return float(text)


@click.group()
@click.version_option(package_name="ctxspec")
def main() -> None:
    """ctxspec: executable specification of the Session, Context and Compaction design."""


# --- budget ------------------------------------------------------------------------------


def _in_k(tokens: int) -> str:
    """Tokens in K for people (1K = 1024): exact when whole, else ≈ to one decimal."""
    if tokens % K == 0:
        return f"{tokens // K}K"
    tenths = round(Fraction(tokens * 10, K))
    return f"≈{'-' if tenths < 0 else ''}{abs(tenths) // 10}.{abs(tenths) % 10}K"


def _budget_document(budget: ResolvedBudget, evaluation: CompactionEvaluation | None,
                     recheck: SummaryRecheck | None) -> dict[str, Any]:
    document: dict[str, Any] = {
        "window": budget.window,
        "output_reserve": budget.output_reserve,
        "output_reserve_source": budget.output_reserve_source,
        "safety_margin": budget.safety_margin,
        "safety_margin_source": budget.safety_margin_source,
        "input_budget": budget.input_budget,
        "trigger_ratio": budget.trigger_ratio_text,
        "trigger_threshold": budget.trigger_threshold,
    }
    if evaluation is not None:
        document.update(
            input_tokens=evaluation.input_tokens,
            decision=evaluation.decision,
            error_code=evaluation.error_code.value if evaluation.error_code else None,
            summary_space=evaluation.summary_space,
            summary_output_cap=evaluation.summary_output_cap,
            summary_default_cap=evaluation.summary_default_cap,
            soft_target_space=evaluation.soft_target_space,
            summary_target=evaluation.summary_target,
        )
    if recheck is not None:
        document.update(assembled_tokens=recheck.assembled_tokens,
                        after_summary=str(recheck.verdict))
    return document


_LABELS = {
    "window": "W  window",
    "output_reserve": "O  output reserve",
    "safety_margin": "S  safety margin",
    "input_budget": "B  input budget (W − O − S)",
    "trigger_threshold": "   trigger floor(r × B)",
    "input_tokens": "I  input (F + M)",
    "summary_space": "H  summary space (B − F)",
    "summary_output_cap": "P  summary output cap",
    "summary_default_cap": "C  default summary cap",
    "soft_target_space": "D  room below 60% (floor(B × 0.60) − F)",
    "summary_target": "T  summary target",
    "assembled_tokens": "   assembled after summary",
}


def _print_budget_table(document: dict[str, Any]) -> None:
    rows: list[tuple[str, str, str]] = []
    for key, label in _LABELS.items():
        value = document.get(key)
        if value is None:
            continue
        source = document.get(f"{key}_source", "")
        rows.append((label, _in_k(value), f"{value} tokens" + (f"  ({source})" if source else "")))
    width = max(len(r[0]) for r in rows)
    click.echo(f"{'r  trigger ratio'.ljust(width)}  {document['trigger_ratio']}")
    for label, in_k, tokens in rows:
        click.echo(f"{label.ljust(width)}  {in_k:>9}  {tokens}")
    if "decision" in document:
        verdict = document["decision"]
        if document["error_code"]:
            verdict += f" ({document['error_code']})"
        click.echo(f"{'decision'.ljust(width)}  {verdict}")
    if "after_summary" in document:
        click.echo(f"{'after summary'.ljust(width)}  {document['after_summary']}")


@main.command()
@click.option("--window", type=TOKENS, required=True,
              help="W, the model's context window in tokens (verified or explicit; 128K = 131072).")
@click.option("--output-reserve", type=TOKENS,
              help="O. Default: min(--max-output or 4096, floor(W/4)).")
@click.option("--max-output", type=TOKENS, help="The model's known maximum output tokens.")
@click.option("--safety-margin", type=TOKENS, help="S. Default: max(256, ceil(W × 1%)).")
@click.option("--trigger-ratio", default="0.80", show_default=True,
              help="r, as decimal text, 0 < r < 1.")
@click.option("--summary-target", type=TOKENS,
              help="context.summary_target_tokens, overriding T_auto (capped by P).")
@click.option("--provider-output-limit", type=TOKENS,
              help="The provider's output limit, when known (part of P).")
@click.option("--fixed", type=TOKENS, help="F: fixed input tokens of the request (§8).")
@click.option("--material", type=TOKENS, help="M: compressible material tokens of the request.")
@click.option("--summary-tokens", type=TOKENS,
              help="X: size of the summary returned, for the post-compaction re-check.")
@click.option("--added-after-compaction", type=TOKENS, default=0, show_default=True,
              help="Tokens that arrived during compaction (e.g. a supplement).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def budget(window: int, output_reserve: int | None, max_output: int | None,
           safety_margin: int | None, trigger_ratio: str, summary_target: int | None,
           provider_output_limit: int | None, fixed: int | None, material: int | None,
           summary_tokens: int | None, added_after_compaction: int, as_json: bool) -> None:
    """Resolve the §7 budget; with --fixed/--material evaluate the §8 decision."""
    resolved = resolve_budget(BudgetConfig(
        window=window, output_reserve=output_reserve, known_max_output=max_output,
        safety_margin=safety_margin, trigger_ratio=trigger_ratio,
        summary_target=summary_target, provider_output_limit=provider_output_limit))
    if isinstance(resolved, ConfigurationError):
        option = "--" + resolved.field.replace("_", "-")
        raise click.UsageError(f"{resolved.code.value}: {option}: {resolved.rule}")
    if (fixed is None) != (material is None):
        raise click.UsageError("--fixed and --material go together: a request has both F and M")
    if summary_tokens is None and added_after_compaction:
        raise click.UsageError("--added-after-compaction needs --summary-tokens")
    evaluation = None if fixed is None or material is None \
        else evaluate_compaction(resolved, fixed, material)
    if summary_tokens is not None and evaluation is None:
        raise click.UsageError("--summary-tokens needs --fixed and --material")
    recheck = None
    if evaluation is not None and summary_tokens is not None and fixed is not None \
            and evaluation.decision == "compact":
        recheck = recheck_after_summary(resolved, fixed, summary_tokens, added_after_compaction)
    document = _budget_document(resolved, evaluation, recheck)
    if as_json:
        click.echo(json.dumps(document, indent=2))
    else:
        _print_budget_table(document)


# --- trace -------------------------------------------------------------------------------


@main.command("trace")
@click.option("--json", "as_json", is_flag=True,
              help="Print a list of objects: id, section, level, status, covered_by, ...")
@click.option("--summary", is_flag=True, help="Print only the counts per section.")
@click.option("--section", "only_section", type=Count(1, 11),
              help="Print the matrix of this section only.")
@click.option("--matrix", "matrix_of", metavar="ID",
              help="Print which points of the hook matrix pin this requirement.")
def trace_command(as_json: bool, summary: bool, only_section: int | None,
                  matrix_of: str | None) -> None:
    """The traceability matrix: each requirement, the conformance cases and tests that pin it,
    and its status (conformance, unit, not_testable, uncovered); then the counts per section."""
    try:
        requirements = catalogue.load_catalogue()
    except catalogue.CatalogueError as error:
        raise click.ClickException(str(error)) from error
    declarations, tests_found = catalogue.scan_declarations()
    unknown = catalogue.unknown_ids(declarations, requirements)
    if unknown:
        listed = ", ".join(f"{rid} in {where}" for rid, where in unknown)
        raise click.ClickException(f"coverage declared for unknown requirement IDs: {listed}")
    rows = catalogue.trace(requirements, declarations)
    if not tests_found:
        click.echo("note: no tests/ directory beside the package (not a checkout); unit "
                   "coverage is not shown", err=True)
    if as_json:
        click.echo(json.dumps([asdict(row) for row in rows], indent=2, ensure_ascii=False))
        return
    if matrix_of is not None:
        chosen = [row for row in rows if row.id == matrix_of]
        if not chosen:
            raise click.ClickException(f"no requirement {matrix_of} in the catalogue")
        _print_matrix(chosen[0])
        return
    if not summary:
        for row in rows:
            if only_section is None or row.section == only_section:
                click.echo(f"{row.id:<10} {row.status:<13} {_pinned_by(row)}")
        click.echo()
    statuses: tuple[catalogue.Status, ...] = ("conformance", "unit", "not_testable", "uncovered")
    click.echo(f"{'section':<8}{'total':>6}" + "".join(f"{s:>14}" for s in statuses))
    totals: Counter[catalogue.Status] = Counter()
    for section in catalogue.SECTIONS:
        counts = Counter(row.status for row in rows if row.section == section)
        total = sum(counts.values())
        totals.update(counts)
        click.echo(f"§{section:<7}{total:>6}" + "".join(f"{counts[s]:>14}" for s in statuses))
    click.echo(f"{'all':<8}{len(rows):>6}" + "".join(f"{totals[s]:>14}" for s in statuses))


def _print_matrix(row: catalogue.TraceRow) -> None:
    """A requirement's hook matrix as a grid — a row per hook point and decision, a column per
    role and ending, "✓" where a case pins that point, "·" where none does — then the cases."""
    from ctxspec.conformance.matrix import DIMENSIONS, SHORT

    cells = {(p["point"], p["decision"], p["role"], p["ending"]): p["case"]
             for p in row.matrix}
    space = 1
    for values in DIMENSIONS.values():
        space *= len(values)
    click.echo(f"{row.id} {row.status}: {row.statement}")
    click.echo(f"hook matrix: {len(cells)} of {space} points pinned "
               f"({' × '.join(DIMENSIONS)})")
    if not cells:
        return
    columns = [(role, ending) for role in DIMENSIONS["role"] for ending in DIMENSIONS["ending"]]
    click.echo(f"{'':<14}" + "".join(f"{role[:4]:>10}" for role, _ in columns))
    click.echo(f"{'':<14}" + "".join(f"{ending:>10}" for _, ending in columns))
    for point in DIMENSIONS["point"]:
        for decision in DIMENSIONS["decision"]:
            marks = ["✓" if (point, decision, role, ending) in cells else "·"
                     for role, ending in columns]
            click.echo(f"{SHORT[point] + ' ' + decision:<14}" + "".join(
                f"{mark:>10}" for mark in marks))
    click.echo("pinned by: " + ", ".join(sorted(cells.values())))


def _pinned_by(row: catalogue.TraceRow) -> str:
    """The cases by ID (the crash matrix as one entry), then how many unit tests; or why none
    can pin it."""
    if row.status == "not_testable":
        return f"not testable: {row.not_testable}"
    prefix = "conformance case "
    cases = [c.removeprefix(prefix) for c in row.covered_by if c.startswith(prefix)]
    crashes = [c for c in cases if c.startswith("CRASH-")]
    named = [c for c in cases if not c.startswith(("CRASH-", "HM-"))]
    if crashes:
        named.append(f"crash matrix ({len(crashes)} cases)")
    if row.matrix:
        named.append(f"hook matrix ({len(row.matrix)} points; --matrix {row.id})")
    tests = len(row.covered_by) - len(cases)
    if tests:
        named.append(f"{tests} unit test{'s' if tests > 1 else ''}")
    if row.status == "unit" and row.white_box:
        named.append(f"white box: {row.white_box}")
    return ", ".join(named) or "-"


# --- schemas -----------------------------------------------------------------------------


@main.command("schemas")
@click.option("--check", is_flag=True, help="Exit 1 if spec/schemas/ differs from the models.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Directory to write (default: the package's spec/schemas).")
def schemas_command(check: bool, out: Path | None) -> None:
    """Write (or check) the JSON Schemas of the data contracts."""
    directory = out or catalogue.package_root() / "spec" / "schemas"
    if check:
        stale = schemas.drifted(directory)
        if stale:
            click.echo(f"schemas differ from the models: {', '.join(stale)}; run "
                       "`ctxspec schemas` and commit", err=True)
            sys.exit(1)
        click.echo(f"{len(schemas.published_schemas())} schemas match the models")
        return
    if out is not None:
        _writable(out.parent if not out.is_dir() else out, "--out")
    try:
        written = schemas.write(directory)
    except OSError as error:
        raise click.ClickException(f"--out {directory}: {error.strerror or error}") from error
    click.echo(f"wrote {len(written)} schemas to {directory}")


def _writable(folder: Path, option: str) -> None:
    """A file an option names must be writable in an existing folder: checked before anything
    runs, so a long run never ends in a report it cannot write."""
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        raise click.UsageError(f"{option}: {str(folder)!r} is not a folder this user can write "
                               "to")


# --- replay ------------------------------------------------------------------------------


@main.command("replay")
@click.argument("scenario_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the neutral trace as JSON.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the timeline as one self-contained HTML page.")
def replay_command(scenario_file: Path, as_json: bool, html_file: Path | None) -> None:
    """Run a scenario on the reference runtime and print what happened, request by request."""
    if html_file is not None:
        _writable(html_file.resolve().parent, "--html")
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.scenario import ScenarioError, load_scenario
    from ctxspec.conformance.timeline import timeline
    from ctxspec.reference.ports import ScriptExhausted

    try:
        scenario = load_scenario(scenario_file)
        _refuse_bad_budgets(scenario)
    except ScenarioError as error:
        raise click.UsageError(f"malformed scenario: {error}") from error
    driver = ReferenceDriver()
    try:
        run_scenario(scenario, lambda: driver)
    except ScriptExhausted as error:
        raise click.ClickException(f"the scenario's script ran out: {error}") from error
    except ScenarioError as error:  # a hook target with nothing behind it at its call
        raise click.UsageError(f"malformed scenario: {error}") from error
    if html_file is not None:
        from ctxspec.conformance.replay_page import write_replay_page
        _write_page(html_file, lambda: write_replay_page(html_file, scenario, driver.trace()))
    if as_json:
        click.echo(json.dumps(driver.trace(), indent=2, ensure_ascii=False))
        return
    click.echo(f"scenario {scenario.name}: {scenario.description}".rstrip(": "))
    for line in timeline(driver.trace()):
        click.echo(line)


def _write_page(path: Path, write: Callable[[], None]) -> None:
    """A page that cannot be written is said, with the reason, not raised (exit 1)."""
    try:
        write()
    except OSError as error:
        raise click.ClickException(f"--html {path}: {error.strerror or error}") from error


def _refuse_bad_budgets(scenario: "Scenario") -> None:
    """The reference refuses an Agent whose §7 budget breaks a rule when it is configured;
    replay says so before anything runs, with the design's code, as a usage error."""
    agents = [("scenario.agent", scenario.agent)]
    if scenario.workflow is not None:
        agents += [(f"scenario.workflow.{node.agent_node.name}", node.agent_node.agent)
                   for stage in scenario.workflow.stages for node in stage
                   if node.agent_node is not None]
    for path, agent in agents:
        resolved = resolve_budget(agent.budget())
        if isinstance(resolved, ConfigurationError):
            raise click.UsageError(f"the reference refuses the Agent: {resolved.code.value}: "
                                   f"{path}.{resolved.field}: {resolved.rule}")


# --- conformance -------------------------------------------------------------------------


@main.command("conformance")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="The driver to test (default: the reference runtime).")
@click.option("--stdio", "stdio_command", metavar="COMMAND",
              help="Drive a runtime in a subprocess over the stdio protocol v1 instead.")
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
              "those that did not pass.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=1, show_default=True,
              help="Run the cases in this many worker processes, each with its own driver "
              "(with --stdio, its own runtime subprocess).")
def conformance_command(driver_spec: str | None, stdio_command: str | None,
                        stdio_timeout: float, stdio_max_line: int,
                        case_ids: tuple[str, ...], as_json: bool, jsonl: Path | None,
                        junit: Path | None, html_file: Path | None, verbose: bool,
                        jobs: int) -> None:
    """Run the conformance cases against a driver and print a table grouped by source (§12 row,
    worked example, crash matrix); exit 1 unless every case passed or is unsupported."""
    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.stdio import ProtocolError, StdioDriver, parse_command

    if driver_spec and stdio_command is not None:
        raise click.UsageError("give --driver or --stdio, not both")
    for option, path in (("--report", jsonl), ("--junit", junit), ("--html", html_file)):
        if path is not None:
            _writable(path.resolve().parent, option)
    try:  # every argument is checked before a runtime is started
        factory = load_factory(driver_spec)
        cases = by_id(case_ids or None)
        if stdio_command is not None:
            parse_command(stdio_command)
    except (ValueError, KeyError, ImportError) as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    stdio: StdioDriver | None = None
    previous = signal.getsignal(signal.SIGTERM)
    # A SIGTERM unwinds like Ctrl-C, so the runtime's process is ended on the way out too.
    signal.signal(signal.SIGTERM, _terminated)
    try:
        if stdio_command is not None:
            try:
                stdio = StdioDriver(stdio_command, stdio_timeout, stdio_max_line)
            except OSError as error:  # the command cannot be started: a bad argument
                raise click.UsageError(f"--stdio {stdio_command!r}: {error.strerror}") \
                    from error
            except ProtocolError as error:
                raise click.ClickException(f"--stdio {stdio_command!r}: {error}") from error
        _conformance(driver_spec, factory, stdio, cases, as_json, jsonl, junit, html_file,
                     verbose, jobs)
    finally:
        if stdio is not None:
            stdio.close()
        signal.signal(signal.SIGTERM, previous)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def _conformance(driver_spec: str | None, factory: "DriverFactory",
                 stdio: "StdioDriver | None", cases: Sequence["Case"], as_json: bool,
                 jsonl: Path | None, junit: Path | None, html_file: Path | None,
                 verbose: bool, jobs: int = 1) -> None:
    from ctxspec.conformance.harness import (
        SUITE_VERSION,
        confirm_capabilities,
        run_suite,
        run_suite_in_processes,
        write_reports,
    )

    began = time.perf_counter()
    if stdio is not None:
        driver_spec = f"stdio: {stdio.command}"
        connected = stdio

        def factory() -> "StdioDriver":
            return connected
    probes = confirm_capabilities(factory)
    unconfirmed = [p for p in probes.values() if p.status == "not_confirmed"]
    if not as_json:
        click.echo(f"capabilities: {len(probes)} declared, "
                   f"{sum(p.status == 'confirmed' for p in probes.values())} confirmed by probing"
                   + "".join(f"\n  {p.capability} NOT confirmed: {p.detail}" for p in unconfirmed)
                   + "".join(f"\n  {p.capability} not probed: {p.detail}"
                             for p in probes.values() if p.status == "not_probed"))
    results = []
    suite = run_suite(cases, factory, probes) if jobs == 1 else run_suite_in_processes(
        cases, jobs, driver_spec=None if stdio else driver_spec,
        stdio=None if stdio is None else (stdio.command, stdio.timeout, stdio.max_line),
        probes=probes)
    for result in suite:
        results.append(result)
        if as_json:
            continue
        if verbose or result.status in ("failed", "error"):
            click.echo(f"{result.case.id:<40} {result.status:<11} "
                       f"{result.seconds * 1000:7.0f} ms  {result.case.title}"
                       + "".join(f"\n{'':41}{line}" for line in result.detail.splitlines()))
        if sys.stderr.isatty():  # progress on one rewritten line
            click.echo(f"\r[{len(results)}/{len(cases)}] {result.case.id:<48}", nl=False,
                       err=True)
    if sys.stderr.isatty() and not as_json:
        click.echo("\r" + " " * 60 + "\r", nl=False, err=True)
    if stdio is not None:
        stdio.close()  # before the reports: the runtime's exit is part of the run
    summary = Counter(r.status for r in results)
    total = time.perf_counter() - began
    try:
        write_reports(results, driver_spec or "reference", jsonl=jsonl, junit=junit)
    except OSError as error:  # the folder was checked; the disk may still refuse
        raise click.ClickException(f"a report could not be written: {error}") from error
    if html_file is not None:
        from ctxspec.conformance.report_html import write_report_page
        _write_page(html_file, lambda: write_report_page(html_file, results,
                                                         driver_spec or "reference", probes,
                                                         total))
    if as_json:
        click.echo(json.dumps({
            "suite_version": SUITE_VERSION, "driver": driver_spec or "reference",
            "probes": [p.to_json() for p in probes.values()],
            "cases": [r.to_json() for r in results],
            "summary": {s: summary.get(s, 0) for s in ("passed", "failed", "unsupported",
                                                       "error")}}, ensure_ascii=False))
    else:
        click.echo(_grouped(results))
        click.echo(f"{len(results)} cases in {total:.2f} s: " + ", ".join(
            f"{summary.get(s, 0)} {s}" for s in ("passed", "failed", "unsupported", "error")))
    if summary.get("failed") or summary.get("error"):
        sys.exit(1)


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


@main.command("compat")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY", required=True,
              help="The production runtime's driver.")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              default=Path("docs/compatibility"), show_default=True,
              help="The folder of the reports and their README table.")
@click.option("--date", metavar="YYYY-MM-DD", help="The report's date (default: today), so a "
              "fresh run can reproduce a checked-in report.")
@click.option("--case", "case_ids", multiple=True, metavar="ID",
              help="Run only this case (repeatable).")
def compat_command(driver_spec: str, out: Path, date: str | None,
                   case_ids: tuple[str, ...]) -> None:
    """Run a driver over the suite and write its compatibility report: <runtime>.md and
    <runtime>.json in --out, and the folder's README table (runtime × §12 row)."""
    import datetime

    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.compat import run_compat
    from ctxspec.conformance.compat_page import write_report
    from ctxspec.conformance.harness import load_factory

    try:
        factory = load_factory(driver_spec)
        cases = by_id(case_ids or None)
        day = datetime.date.fromisoformat(date) if date else datetime.date.today()
    except (ValueError, KeyError, ImportError) as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    report = run_compat(factory, driver_spec, cases, day.isoformat())
    for path in write_report(out, report):
        click.echo(f"wrote {path}")
    click.echo(", ".join(f"{count} {status}" for status, count in report["summary"].items()))


# --- mutants -----------------------------------------------------------------------------


@main.command("mutants")
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


# --- vectors -----------------------------------------------------------------------------


@main.command("vectors")
@click.option("--check", is_flag=True, help="Exit 1 if spec/vectors/ differs from the cases.")
@click.option("--replay", "replay_dir", type=click.Path(exists=True, file_okay=False,
                                                       path_type=Path),
              help="Replay the vectors of this directory against --driver instead.")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="The driver to replay against (default: the reference runtime).")
def vectors_command(check: bool, replay_dir: Path | None, driver_spec: str | None) -> None:
    """Write the golden vectors (scenario, the reference's observations, a manifest) into
    spec/vectors/, check them for drift, or replay a directory of them against a driver."""
    from ctxspec.conformance.driver import ReferenceDriver
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.vectors import VECTORS, drifted, generate, replay

    if replay_dir is not None:
        try:
            factory = load_factory(driver_spec)
        except (ValueError, ImportError) as error:
            raise click.UsageError(str(error)) from error
        if not any(replay_dir.glob("*.json")):  # nothing read is not a pass
            raise click.UsageError(f"--replay {str(replay_dir)!r}: no *.json vector files")
        results = replay(replay_dir, factory, progress=lambda r: click.echo(
            f"{r.name:<22} {r.status:<11} {r.detail}".rstrip()))
        summary = Counter(r.status for r in results)
        click.echo(f"{len(results)} vectors: " + ", ".join(
            f"{summary.get(s, 0)} {s}" for s in ("passed", "failed", "unsupported", "error",
                                                 "unread")))
        if summary.get("failed") or summary.get("error") or summary.get("unread"):
            sys.exit(1)
        return
    if check:
        stale = drifted(VECTORS, ReferenceDriver)
        if stale:
            click.echo(f"vectors differ from the cases: {', '.join(stale)}; run "
                       "`ctxspec vectors` and commit", err=True)
            sys.exit(1)
        click.echo(f"{len(generate(ReferenceDriver))} vectors match the cases")
        return
    VECTORS.mkdir(parents=True, exist_ok=True)
    written = generate(ReferenceDriver)
    for retired in {p.name for p in VECTORS.glob("*.json")} - written.keys():
        (VECTORS / retired).unlink()
    for name, text in written.items():
        (VECTORS / name).write_text(text, "utf-8")
    click.echo(f"wrote {len(written)} vectors to {VECTORS}")


# --- stdio-driver ------------------------------------------------------------------------


@main.command("stdio-driver")
@click.option("--max-line", type=Count(1024, 1 << 30), default=64 << 20,
              show_default=True, metavar="BYTES", help="The longest request line read.")
def stdio_driver_command(max_line: int) -> None:
    """Serve the reference runtime over the stdio protocol v1 (docs/stdio-protocol.md)."""
    from ctxspec.conformance.stdio import main as serve_stdio

    serve_stdio(max_line)
