"""Requirements that no other test pinned, about inputs, tool results and budget figures (§5, §6,
§7): configuration is not an input, a request is frozen after its hooks, compaction and the window
check, the first-output receipt is stored evidence, a supplement is announced as received, a large
result's unread body stays readable for audit, reported usage never changes a request.

Expected values are derived by hand from the design and the scenario; the character estimator (one
token per character, no overhead) keeps the numbers readable.
"""

import json
from collections.abc import Callable

import pytest

from ctxspec.conformance.case import example
from ctxspec.conformance.driver import ReferenceDriver
from ctxspec.conformance.scenario import AUDITOR
from ctxspec.reference.contracts import UserInputDelivery
from ctxspec.reference.runtime import trace as tr
from ctxspec.reference.runtime.runtime import HistoryCaller
from tests.driven_scenarios import base, boundary, drive, lines, scenario_of, texts

# --- inputs: configuration apart, materialised, frozen late, receipts ----------------------------


@pytest.mark.covers("CTX-5.4")
def test_the_system_prompt_and_tool_schemas_are_configuration_not_inputs() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    prompt = "You write reports."
    stored = [row["content"] for row in driver.store.query("SELECT content FROM records")]
    assert not any(prompt in content or '"properties"' in content for content in stored)
    assert driver.store.count("user_inputs") == 1
    assert json.loads(str(driver.store.query("SELECT config FROM agents")[0]["config"])
                      )["system_prompt"] == prompt
    for request in driver.raw_trace().model_requests("business"):
        assert lines(request)[0] == ("system", "system_prompt", prompt)


@pytest.mark.covers("CTX-5.11")
def test_a_request_is_frozen_after_its_hooks_compaction_and_the_window_check() -> None:
    # Run 2 of the boundary scenario with a pre-request hook: the hook decides, the episode
    # summarises, and only then is the question claimed (T_FREEZE) and the request sent.
    document = boundary()
    document["hooks"] = [{"point": "model.pre_request", "ordinal": 2, "items": [{}]}]
    driver, _ = drive(document)
    events = driver.raw_trace().events
    question = next(e.input_id for e in events if isinstance(e, tr.DeliveryChanged)
                    and e.state == "pending" and events.index(e) > 3)

    def at(match: Callable[[tr.TraceEvent], bool]) -> int:
        return next(i for i, e in enumerate(events) if match(e))

    hook = at(lambda e: isinstance(e, tr.HookDecided) and e.point == "model.pre_request")
    chunk = at(lambda e: isinstance(e, tr.ModelRequestSent) and e.purpose == "compaction")
    claim = at(lambda e: isinstance(e, tr.DeliveryChanged) and e.input_id == question
               and e.state == "claimed")
    sent = max(i for i, e in enumerate(events) if isinstance(e, tr.ModelRequestSent))
    assert hook < chunk < claim < sent
    # Still over the window after the summary: never frozen, so the question is never claimed.
    driver, _ = drive(example("compaction-three-chunks-window-exceeded"))
    deliveries = driver.raw_trace().of(tr.DeliveryChanged)
    last_question = deliveries[-1].input_id
    assert [d.state for d in deliveries if d.input_id == last_question] == ["pending"]


@pytest.mark.covers("CTX-5.21")
def test_the_first_output_receipt_is_stored_evidence_apart_from_client_events() -> None:
    driver, _ = drive(example("tool-batch-hook"))
    trace = driver.raw_trace()
    [row] = driver.store.query("SELECT doc FROM deliveries WHERE state = 'delivered'")
    delivery = UserInputDelivery.model_validate_json(str(row["doc"]))
    first = trace.model_requests("business")[0]
    assert delivery.operation_id == first.operation_id
    receipt = delivery.first_output_receipt_ref
    assert receipt is not None
    assert str(first.operation_id) in driver.store.text(receipt)  # evidence of that Operation
    event_ids = {str(e.run_seq) for e in trace.of(tr.ClientEvent)}
    assert receipt.digest not in event_ids


@pytest.mark.covers("CTX-5.22")
def test_receiving_a_supplement_is_announced_as_received_never_as_understood() -> None:
    # The receipt event comes when the input is stored, before any request carries it, so it
    # cannot mean the model read it; it says only what arrived.
    document = base()
    document["steps"] = [{"ask": "q"}, {"supplement": "also this"}, {"advance": True}]
    document["model"] = {"business": [{"text": "ok"}]}
    driver, _ = drive(document)
    events = driver.raw_trace().events
    [received] = [e for e in events if isinstance(e, tr.ClientEvent)
                  and e.event == "input_received"]
    first_request = next(e for e in events if isinstance(e, tr.ModelRequestSent))
    assert events.index(received) < events.index(first_request)
    assert "also this" in texts(first_request)
    assert received.detail == "supplement"


# --- tool results, budget figures ----------------------------------------------------------------


@pytest.mark.covers("CTX-6.19")
def test_the_unread_body_of_a_large_result_stays_readable_for_audit() -> None:
    # ROW-08: the model saw the first 4000 characters; audit reads the record with its
    # truncation, and the result_ref holds all 20000.
    driver, _ = drive(scenario_of("ROW-08"))
    runtime = driver.runtime
    assert runtime is not None
    auditor = HistoryCaller(runtime.session_id, "audit", AUDITOR, driver.audit.grant(AUDITOR))
    [dumped] = [raw for raw in runtime.read_history(auditor)
                if raw.record.message_kind == "tool_result"
                and isinstance(raw.content.get("truncation"), dict)]
    truncation = dumped.content["truncation"]
    assert isinstance(truncation, dict)
    ref = truncation["result_ref"]
    assert isinstance(ref, dict)
    body = "".join(f"row {n:05d}\n" for n in range(2000))
    assert runtime.blobs[str(ref["digest"])] == body
    assert len(str(dumped.content["text"])) == 4000


@pytest.mark.covers("CTX-7.21")
def test_reported_usage_never_changes_a_request() -> None:
    # The same Session with the model reporting a huge actual usage sends the same requests with
    # the same estimates.
    document = example("tool-batch-hook")
    plain, _ = drive(document)
    reported, _ = drive(document, usage=10**6)

    def sent(driver: ReferenceDriver) -> list[tuple[list[str], int, int]]:
        return [(texts(r), r.estimated_input_tokens, r.max_output_tokens)
                for r in driver.raw_trace().model_requests()]
    assert sent(reported) == sent(plain)
