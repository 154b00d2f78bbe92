"""``ctxspec replay`` (a scenario, a vector or a case on a runtime, request by request, beside
the reference's with ``--compare``; conformance/replays.py resolves and runs it) and
``ctxspec stdio-driver`` (the reference runtime served over the stdio protocol)."""

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ctxspec.commands.options import Count, Seconds, folder_of, writable, write_page
from ctxspec.limits import shown
from ctxspec.reference.budget import ConfigurationError, resolve_budget

if TYPE_CHECKING:  # the conformance package is imported by the command only
    from ctxspec.conformance.harness import DriverFactory
    from ctxspec.conformance.replays import Replayed, Target
    from ctxspec.conformance.scenario import Scenario
# --- replay ------------------------------------------------------------------------------


@click.command("replay")
@click.argument("target", required=False, metavar="SCENARIO|VECTOR|CASE")
@click.option("--example", metavar="NAME",
              help="Replay a shipped worked example by name (supplements-across-runs, …) "
                   "instead of a TARGET.")
@click.option("--driver", "driver_spec", metavar="MODULE:FACTORY",
              help="Run it on this driver's runtime (default: the reference runtime).")
@click.option("--stdio", "stdio_command", metavar="COMMAND",
              help="Run it on a runtime in a subprocess over the stdio protocol instead.")
@click.option("--stdio-timeout", type=Seconds(0.1, 86400), default=60.0, show_default=True,
              metavar="SECONDS", help="How long to wait for each answer of the --stdio "
              "runtime.")
@click.option("--compare", is_flag=True,
              help="Run it on the reference too and show the differences; with --html, the "
                   "two pages side by side.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the neutral trace as JSON, in its linear form (trace format 2).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the timeline as one self-contained HTML page.")
def replay_command(target: str | None, example: str | None, driver_spec: str | None,
                   stdio_command: str | None, stdio_timeout: float, compare: bool,
                   as_json: bool, html_file: Path | None) -> None:
    """Run a scenario — a scenario file, a golden vector, a case ID or --example NAME — on a
    runtime and print what happened, request by request; exit 0 when the run is shown (a
    driver's run cut short too: that is what it did), 1 when the reference's run of the
    scenario stops short (its script runs out), 2 for a bad argument or scenario."""
    from ctxspec.conformance.harness import load_factory
    from ctxspec.conformance.replays import STDIO

    if html_file is not None:
        writable(folder_of(html_file, "--html"), "--html")
    if driver_spec and stdio_command is not None:
        raise click.UsageError("give --driver or --stdio, not both")
    chosen = _target(target, example)
    try:
        factory = load_factory(driver_spec)
    except (ValueError, ImportError) as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    label = driver_spec or (STDIO + stdio_command if stdio_command is not None else "")
    if chosen.case is None and not label:
        _check_scenario(chosen.document)  # the reference refuses a bad file as a bad argument
    if compare and not label:
        raise click.UsageError("--compare compares a --driver or --stdio runtime with the "
                               "reference: give one")
    runs = _run_both(chosen, factory, stdio_command, stdio_timeout, compare)
    if not label and chosen.case is None and runs[0].refused:  # found only at a step's call
        raise click.UsageError(f"malformed scenario: {runs[0].error}")
    _show(chosen, label, runs, as_json, html_file)
    expected = chosen.case is not None and chosen.case.refusal is not None and runs[0].refused
    if not label and runs[0].stopped and not expected:
        raise click.ClickException(f"the scenario stops short on the reference: "
                                   f"{runs[0].stopped}")


def _target(target: str | None, example: str | None) -> "Target":
    """The scenario to replay: a file (scenario or vector), a case ID or a shipped example."""
    from ctxspec.conformance.cases import by_id
    from ctxspec.conformance.replays import case_target, example_target, file_target
    from ctxspec.conformance.scenario import ScenarioError

    if (target is None) == (example is None):
        raise click.UsageError("give a SCENARIO, VECTOR or CASE, or --example NAME")
    try:
        if example is not None:
            return example_target(example)
        assert target is not None
        if _is_file(target):
            return file_target(Path(target))
        if "/" not in target and not target.endswith(".json"):
            return case_target(by_id([target])[0])
    except KeyError as error:
        raise click.UsageError(str(error).strip("'\"")) from error
    except ScenarioError as error:
        raise click.UsageError(f"malformed scenario: {error}") from error
    raise click.UsageError(f"{shown(target)}: no such file or conformance case")


def _is_file(target: str) -> bool:
    try:
        path = Path(target)
        if path.is_dir():
            raise click.UsageError(f"{shown(target)} is a folder, not a scenario file")
        return path.exists() or path.is_symlink()
    except (OSError, ValueError):  # a name the system cannot take (too long, a NUL)
        return False


def _check_scenario(document: "Mapping[str, Any]") -> None:
    from ctxspec.conformance.scenario import ScenarioError, parse_scenario

    try:
        _refuse_bad_budgets(parse_scenario(document))
    except ScenarioError as error:
        raise click.UsageError(f"malformed scenario: {error}") from error


def _run_both(chosen: "Target", factory: "DriverFactory", stdio_command: str | None,
              timeout: float, compare: bool) -> "list[Replayed]":
    """The run on the chosen runtime, then (``--compare``) the reference's."""
    from ctxspec.conformance.driver import ReferenceDriver
    from ctxspec.conformance.replays import run_document
    from ctxspec.conformance.stdio import ProtocolError, StdioDriver, Stop

    if stdio_command is None:
        runs = [run_document(factory(), chosen.document)]
    else:
        stop = Stop()
        stop.install()
        try:
            stdio = StdioDriver(stdio_command, timeout, 64 << 20, stop.check)
        except OSError as error:
            stop.restore()
            raise click.UsageError(f"--stdio {stdio_command!r}: {error.strerror}") from error
        except ProtocolError as error:
            stop.restore()
            raise click.ClickException(f"--stdio {stdio_command!r}: {error}") from error
        try:
            runs = [run_document(stdio, chosen.document)]
        finally:
            try:
                stdio.close()
            finally:
                stop.restore()
    if compare:
        runs.append(run_document(ReferenceDriver(), chosen.document))
    return runs


def _show(chosen: "Target", label: str, runs: "Sequence[Replayed]", as_json: bool,
          html_file: Path | None) -> None:
    """The run on the terminal (its timeline, or its trace as JSON; with --compare the
    differences first) and, with --html, its page or the compare page."""
    from ctxspec.conformance.replay_compare import differences
    from ctxspec.conformance.replays import shown
    from ctxspec.conformance.timeline import timeline

    runtime = runs[0]
    found = differences(runs[1].trace, runtime.trace) if len(runs) > 1 else None
    if html_file is not None:
        write_page(html_file, lambda: _write_html(html_file, chosen, label, runs, found))
    for run, who in zip(runs, (label or "the reference", "the reference"), strict=False):
        if run.stopped:
            click.echo(f"{who}: {run.stopped}", err=True)
    if as_json:  # the linear form: each message once (conformance/linear_trace.py)
        click.echo(json.dumps(runtime.linear, indent=1, ensure_ascii=False))
        return
    description = str(chosen.document.get("description") or "")
    name = chosen.document.get("name") or chosen.name
    click.echo(f"scenario {name}: {description}".rstrip(": ")
               + (f" (case {chosen.case.id}, on {label or 'the reference'})"
                  if chosen.case is not None else ""))
    if found is not None:
        click.echo(f"{len(found)} differences from the reference"
                   + "".join(f"\n  {line}" for line in found))
        click.echo(f"-- {label} --")
    for line in timeline(shown(runtime.trace)):
        click.echo(line)


def _page(chosen: "Target", run: "Replayed") -> str:
    """One run's replay page; a scenario the runtime refused (bad input) has no timeline to
    draw, so its page says the refusal."""
    from ctxspec.conformance.html_page import document, esc
    from ctxspec.conformance.replay_page import replay_html
    from ctxspec.conformance.replays import page_ready
    from ctxspec.conformance.scenario import ScenarioError, parse_scenario

    try:
        scenario = parse_scenario(chosen.document)
    except ScenarioError as error:
        return document(f"ctxspec replay: {chosen.name}", "",
                        f"<h1>Replay: {esc(chosen.name)}</h1><p>{esc(run.stopped)}</p>"
                        f"<p>The reference refuses the scenario: {esc(error)}</p>")
    # A run cut short is drawn as far as it got, and the page says where it stopped.
    return replay_html(scenario, page_ready(run.trace), partial=run.stopped)


def _write_html(path: Path, chosen: "Target", label: str, runs: "Sequence[Replayed]",
                found: "Sequence[str] | None") -> None:
    from ctxspec.conformance.html_page import write_whole
    from ctxspec.conformance.replay_compare import compare_html

    if found is None:
        write_whole(path, _page(chosen, runs[0]))
        return
    sides = [("the reference", runs[1].stopped, _page(chosen, runs[1])),
             (label, runs[0].stopped, _page(chosen, runs[0]))]
    write_whole(path, compare_html(chosen.name, label, found, sides))


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


# --- stdio-driver ------------------------------------------------------------------------


@click.command("stdio-driver")
@click.option("--max-line", type=Count(1024, 1 << 30), default=64 << 20,
              show_default=True, metavar="BYTES", help="The longest request line read.")
def stdio_driver_command(max_line: int) -> None:
    """Serve the reference runtime over the stdio protocol (docs/stdio-protocol.md)."""
    from ctxspec.conformance.stdio import main as serve_stdio

    serve_stdio(max_line)
