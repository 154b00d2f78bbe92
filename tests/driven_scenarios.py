"""Driving a scenario through the reference Driver for the requirement tests, optionally through
wrapped ports: the model port recorded, the hook port wrapped, the base agent and §12 row 4's
boundary scenario, and what the tests read off the trace and the audit history."""

from collections.abc import Callable, Mapping
from copy import deepcopy
from dataclasses import dataclass, field
from typing import Any

from ctxspec.conformance.cases import by_id
from ctxspec.conformance.driver import Ports, ReferenceDriver, perform
from ctxspec.conformance.estimator import estimator_for
from ctxspec.conformance.scenario import (
    AUDITOR,
    ScriptedHooks,
    ScriptedModel,
    ScriptedTools,
    Triggers,
    parse_scenario,
)
from ctxspec.reference.ports import Complete, ModelCall, ModelOutcome
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import HistoryCaller


@dataclass
class Recording:
    """A model port that passes every call to the scripted one and keeps what it was asked."""

    inner: ScriptedModel
    calls: list[ModelCall] = field(default_factory=list)
    usage: int | None = None
    """When set, every complete answer reports this many output tokens (actual usage)."""

    def call(self, request: ModelCall) -> ModelOutcome:
        self.calls.append(request)
        outcome = self.inner.call(request)
        if self.usage is not None and isinstance(outcome, Complete):
            return Complete(outcome.text, outcome.tool_calls, outcome.reasoning, self.usage)
        return outcome


def drive(document: Mapping[str, Any], *, usage: int | None = None,
          hooks: Callable[[ScriptedHooks], Any] | None = None
          ) -> tuple[ReferenceDriver, Recording]:
    """run_scenario with the model port recorded and, optionally, the hook port wrapped."""
    scenario = parse_scenario(dict(document))
    triggers = Triggers(scenario.triggers)
    model = Recording(ScriptedModel(scenario.model, triggers), usage=usage)
    scripted = ScriptedHooks(scenario.hooks)
    ports = Ports(model, ScriptedTools(scenario.tools, triggers),
                  hooks(scripted) if hooks else scripted, estimator_for(scenario, scenario.agent))
    driver = ReferenceDriver()
    driver.configure(scenario, ports)
    triggers.act = lambda step: perform(driver, step)
    for step in scenario.steps:
        perform(driver, step)
    return driver, model


def base(**agent: Any) -> dict[str, Any]:
    return {"scenario_version": 1, "name": "t", "steps": [],
            "agent": {"system_prompt": "sys", "window": 4000, "output_reserve": 400,
                      "safety_margin": 100, "estimator": "chars", **agent}}


def boundary() -> dict[str, Any]:
    """§12 row 4 at the trigger: W=5000, O=400, S=100 give B = 4500 and the trigger 3600; Run 2's
    request is "sys" (3) + Run 1's "a"*1000, "b"*1000 and its 24-character outcome + the
    1573-character question = 3600, so it compacts (one chunk, summary "SUMMARY")."""
    document = base(window=5000)
    document["steps"] = [{"ask": "a" * 1000}, {"advance": True}, {"ask": "Q" * 1573},
                         {"advance": True}]
    document["model"] = {"business": [{"text": "b" * 1000}, {"text": "done"}],
                         "compaction": [{"text": "SUMMARY"}]}
    return document


def texts(request: tr.ModelRequestSent) -> list[str]:
    return [m.text for m in request.view.messages]


def lines(request: tr.ModelRequestSent) -> list[tuple[str, str, str]]:
    return [(m.role.value, m.kind.value, m.text) for m in request.view.messages]


def ended(trace: tr.Trace) -> list[tuple[int, str, str | None]]:
    return [(e.run_no, e.status, e.error_code) for e in trace.of(tr.RunEnded)]


def audit(driver: ReferenceDriver) -> list[str]:
    """Every stored record's text as authorised audit reads it (§1, §11)."""
    runtime = driver.runtime
    assert runtime is not None
    return [str(raw.content.get("text", "")) for raw in
            runtime.read_history(HistoryCaller(runtime.session_id, "audit", AUDITOR,
                                               driver.audit.grant(AUDITOR)))]


def scenario_of(case_id: str) -> dict[str, Any]:
    """A copy of a conformance case's scenario (the case's own must stay as it is)."""
    document: dict[str, Any] = deepcopy(dict(by_id([case_id])[0].scenario))
    return document
