"""``ctxspec replay`` (a scenario on the reference runtime, request by request) and
``ctxspec stdio-driver`` (the reference runtime served over the stdio protocol)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ctxspec.commands.options import Count, folder_of, writable, write_page
from ctxspec.reference.budget import ConfigurationError, resolve_budget

if TYPE_CHECKING:  # the conformance package is imported by the command only
    from ctxspec.conformance.driver import ReferenceDriver
    from ctxspec.conformance.scenario import Scenario
# --- replay ------------------------------------------------------------------------------


@click.command("replay")
@click.argument("scenario_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True,
              help="Print the neutral trace as JSON, in its linear form (trace format 2).")
@click.option("--html", "html_file", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the timeline as one self-contained HTML page.")
def replay_command(scenario_file: Path, as_json: bool, html_file: Path | None) -> None:
    """Run a scenario on the reference runtime and print what happened, request by request."""
    if html_file is not None:
        writable(folder_of(html_file, "--html"), "--html")
    from ctxspec.conformance.driver import ReferenceDriver, run_scenario
    from ctxspec.conformance.scenario import ScenarioError, load_scenario
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
        # What happened until the script ran out is still the story: printed, and the page.
        if html_file is not None:
            _write_html(html_file, scenario, driver, partial=f"the script ran out: {error}")
        _print(scenario, driver, as_json)
        raise click.ClickException(f"the scenario's script ran out: {error}") from error
    except ScenarioError as error:  # a hook target with nothing behind it at its call
        raise click.UsageError(f"malformed scenario: {error}") from error
    if html_file is not None:
        _write_html(html_file, scenario, driver)
    _print(scenario, driver, as_json)


def _print(scenario: "Scenario", driver: "ReferenceDriver", as_json: bool) -> None:
    from ctxspec.conformance.timeline import timeline

    if as_json:  # the linear form: each message once (conformance/linear_trace.py)
        from ctxspec.conformance.linear_trace import linear
        click.echo(json.dumps(linear(driver.trace()), indent=1, ensure_ascii=False))
        return
    click.echo(f"scenario {scenario.name}: {scenario.description}".rstrip(": "))
    for line in timeline(driver.trace()):
        click.echo(line)


def _write_html(html_file: Path, scenario: "Scenario", driver: "ReferenceDriver",
                partial: str = "") -> None:
    from ctxspec.conformance.replay_page import write_replay_page

    write_page(html_file, lambda: write_replay_page(html_file, scenario, driver.trace(),
                                                    partial=partial))


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
    """Serve the reference runtime over the stdio protocol v1 (docs/stdio-protocol.md)."""
    from ctxspec.conformance.stdio import main as serve_stdio

    serve_stdio(max_line)
