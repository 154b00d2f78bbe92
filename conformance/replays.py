"""What ``ctxspec replay`` runs and what a failure tells its reader to run (issue #36): a
target — a scenario file, a golden vector (which wraps its scenario, docs/conformance.md
"Vectors"), a case ID or a shipped worked example — resolved to its scenario document; that
document run on any driver, keeping the trace as far as it got; and the one command that
replays a case on the runtime a report judged, beside the reference (every failure line of
``ctxspec conformance``, its HTML report and the compatibility pages prints it).

It reads the runtime only through the Driver and its JSON trace, as the harness does.
"""

import json
import shlex
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from ctxspec.conformance.case import EXAMPLES, Case, Trace
from ctxspec.conformance.documents import DocumentError, json_document, read_regular
from ctxspec.conformance.driver import Driver, ReferenceDriver, run_scenario
from ctxspec.conformance.linear_trace import expanded, linear
from ctxspec.conformance.scenario import ScenarioError, parse_scenario
from ctxspec.conformance.stdio import StdioDriver
from ctxspec.limits import MAX_DOCUMENT_BYTES
from ctxspec.reference.ports import ScriptExhausted

REFERENCE = "reference"
"""The driver label of a report on the reference runtime (no ``--driver``)."""
STDIO = "stdio: "
REFUSED = "the runtime refused the scenario: "
"""How a report labels a ``--stdio`` runtime: this prefix, then its command."""


@dataclass(frozen=True)
class Target:
    """What one replay runs: its name, its scenario document and, for a case ID, the case."""

    name: str
    document: Mapping[str, Any]
    case: Case | None = None


def examples() -> list[str]:
    """The names of the shipped worked examples (docs/examples, in the package as
    spec/examples), for ``--example NAME``."""
    return sorted(path.stem for path in EXAMPLES.glob("*.json"))


def example_target(name: str) -> Target:
    """A shipped worked example by its name (``supplements-across-runs``); an unknown name
    raises ``KeyError`` listing the known ones."""
    path = EXAMPLES / f"{name}.json"
    if name not in examples():
        raise KeyError(f"no example {name!r}; the examples are: {', '.join(examples())}")
    return file_target(path)


def file_target(path: Path) -> Target:
    """A scenario file, or a vector file (an object with ``manifest`` and ``scenario``):
    its scenario document. A file that cannot be read as JSON raises ``ScenarioError``."""
    try:
        document = json_document(read_regular(path, MAX_DOCUMENT_BYTES), "scenario")
    except OSError as error:
        raise ScenarioError(f"{path}: {error.strerror}") from None
    except DocumentError as error:
        raise ScenarioError(f"{path}: {error}") from None
    if isinstance(document, dict) and isinstance(document.get("manifest"), dict) \
            and "scenario" in document and "expected" in document:
        scenario = document["scenario"]
        if not isinstance(scenario, dict):
            raise ScenarioError(f"{path}: the vector's scenario is not an object")
        return Target(str(document["manifest"].get("case") or path.stem), scenario)
    if not isinstance(document, dict):
        raise ScenarioError(f"{path}: scenario: expected an object")
    return Target(path.stem, document)


def case_target(case: Case) -> Target:
    """A case's scenario (a relational case's crashed one, not its baseline)."""
    return Target(case.id, case.scenario, case)


@dataclass(frozen=True)
class Replayed:
    """A run of one document on one driver: its trace as plain JSON in its linear form (each
    message once, trace format 2), as far as it got, and why it stopped short (the script ran
    out, the runtime refused the scenario or broke); ``stopped`` is "" for a whole run."""

    linear: dict[str, Any]
    stopped: str = ""
    refused: bool = False
    """Whether the runtime refused the scenario (a ``ScenarioError``: bad input)."""

    @cached_property
    def trace(self) -> Trace:
        """The trace's events, each request with its whole view (the timeline, the page and
        ``--compare`` read them; ``--json`` writes :attr:`linear` without them)."""
        return expanded(self.linear)

    @property
    def error(self) -> str:
        """Why it stopped, without the words that say who stopped it."""
        return self.stopped.removeprefix(REFUSED)


def run_document(driver: Driver | StdioDriver, document: Mapping[str, Any]) -> Replayed:
    """Run ``document`` on ``driver``. A scenario the driver refuses, a script that runs out
    (the runtime asked for a call the scenario does not script) and a runtime that breaks mid
    run are results too: what it traced until then, and why it stopped."""
    from ctxspec.conformance.verdicts import passes_on

    try:
        return Replayed(_run(driver, document))
    except ScriptExhausted as error:
        stopped = f"the runtime made a call the scenario does not script: {error}"
        return Replayed(_partial(driver), stopped)
    except ScenarioError as error:  # the reference refuses a scenario before any step
        return Replayed(_partial(driver), f"{REFUSED}{error}", True)
    except BaseException as error:
        passes_on(error)
        return Replayed(_partial(driver), f"the runtime broke: {error!r}")


def _run(driver: Driver | StdioDriver, document: Mapping[str, Any]) -> dict[str, Any]:
    from ctxspec.conformance.harness import scenario_trace

    if isinstance(driver, StdioDriver):  # its trace arrives as JSON already
        return linear(scenario_trace(driver, document))
    run_scenario(parse_scenario(document), lambda: driver)
    return linear_trace(driver)


def linear_trace(driver: Driver) -> dict[str, Any]:
    """A driver's trace in its linear form, read back as plain JSON (what a driver in another
    language would send), made one event at a time from the reference driver: the expanded
    trace, every request with its whole view, is never held (issue #35)."""
    events: Iterable[dict[str, Any]] = driver.trace()  # a trace said its own way is read so
    if isinstance(driver, ReferenceDriver) and type(driver).trace is ReferenceDriver.trace:
        events = driver.trace_events()
    form: dict[str, Any] = json.loads(json.dumps(linear(events), default=str))
    return form


def _partial(driver: Driver | StdioDriver) -> dict[str, Any]:
    if isinstance(driver, StdioDriver):
        return linear([])
    try:
        return linear_trace(driver)
    except Exception:  # nothing was traced, or the trace broke with the run
        return linear([])


def shown(trace: Trace) -> Trace:
    """A runtime's trace as the timeline and the replay page read it: they name a takeover's
    ``commit``, a field of the reference's own that the trace contract leaves out (it asks the
    crash's ``phase``): a ``restarted`` event without one is shown by its phase."""
    return [{**event, "commit": f"phase {event.get('phase')}"}
            if event.get("kind") == "restarted" and "commit" not in event else event
            for event in trace]


def page_ready(trace: Trace) -> Trace:
    """A runtime's trace as the replay page reads it: ids are the runtime's own choice (the
    trace contract asks a string), while the page builds the reference's view models, which
    take UUIDs; each id that is no UUID is replaced by the same name-based UUID wherever it
    occurs, so every identity the page draws still holds."""
    def fixed(key: str, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fixed(k, v) for k, v in value.items()}
        if isinstance(value, list):
            return [fixed(key, v) for v in value]
        if isinstance(value, str) and (key.endswith("_id") or key.endswith("_ids")):
            try:
                uuid.UUID(value)
            except ValueError:
                return str(uuid.uuid5(uuid.NAMESPACE_URL, value))
        return value
    return [fixed("", event) for event in shown(trace)]


def replay_command(case_id: str, driver: str) -> str:
    """The command that replays a case on the runtime a report judged (``driver``: the
    report's label — ``reference``, ``stdio: COMMAND`` or ``MODULE:FACTORY``) and writes its
    page; beside the reference's run (``--compare``) for any runtime but the reference."""
    page = f"--html {shlex.quote(case_id + '.html')}"
    if driver in (REFERENCE, ""):
        return f"ctxspec replay {shlex.quote(case_id)} {page}"
    if driver.startswith(STDIO):
        runtime = f"--stdio {shlex.quote(driver[len(STDIO):])}"
    else:
        runtime = f"--driver {shlex.quote(driver)}"
    return f"ctxspec replay {shlex.quote(case_id)} {runtime} --compare {page}"


__all__ = ["REFERENCE", "STDIO", "Replayed", "Target", "case_target", "example_target",
           "examples", "file_target", "page_ready", "replay_command", "run_document", "shown"]
