#!/usr/bin/env node
// A small agent runtime in JavaScript (Node 20, no packages) that speaks the ctxspec stdio
// protocol version 2. Written from docs/stdio-protocol.md, docs/scenarios.md,
// docs/implementing-a-driver.md and the spec/ data alone: no Python of the project runs here.
// What it implements and what it leaves out: README.md beside it; its estimators:
// adapters/estimators-js/estimators.js (shared with the LangChain.js runtime).
"use strict";
const crypto = require("node:crypto");
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

const { estimate, scenarioTexts } = require("../../adapters/estimators-js/estimators.js");

const CAPABILITIES = ["root_loop", "estimator_injection", "crash:batch_fed_back"];
const PREVIEW_CHARS = 4000; // docs/scenarios.md "tools": a longer result is a bounded preview
const SCHEMA = JSON.parse(fs.readFileSync(
  path.join(__dirname, "..", "..", "spec", "schemas", "Scenario.json"), "utf8"));

class Refused extends Error { constructor(code, text) { super(`${code}: ${text}`); this.code = code; } }
class Exhausted extends Error {}
class Died extends Error {}

const chars = (text) => Array.from(text);
const id = () => crypto.randomUUID();
const sha256 = (text) => "sha256:" + crypto.createHash("sha256").update(text, "utf8").digest("hex");
const log = (line) => process.stderr.write(`${line}\n`);

// --- the budget (§7), exact: r is decimal text, the trigger floor(B * r) in integers ---------
function budget(agent) {
  const W = agent.window;
  const O = agent.output_reserve ?? Math.min(agent.max_output ?? 4096, Math.floor(W / 4));
  const S = agent.safety_margin ?? Math.max(256, Math.ceil(W / 100));
  const B = W - O - S;
  if (B <= 0) {
    throw new Refused("BUDGET_CONFIGURATION_INVALID",
      `window ${W} leaves no input budget after output reserve ${O} and safety margin ${S}`);
  }
  const match = /^(\d+)(?:\.(\d+))?$/.exec(agent.trigger_ratio);
  if (!match) throw new Refused("BUDGET_CONFIGURATION_INVALID", `trigger ratio ${agent.trigger_ratio}`);
  const den = 10n ** BigInt((match[2] ?? "").length);
  const num = BigInt(match[1] + (match[2] ?? ""));
  if (num <= 0n || num >= den) {
    throw new Refused("BUDGET_CONFIGURATION_INVALID", `trigger ratio ${agent.trigger_ratio} is not between 0 and 1`);
  }
  return { W, O, S, B, trigger: Number((BigInt(B) * num) / den) };
}

// --- the scenario: its top level checked against spec/schemas/Scenario.json ------------------
function checkScenario(scenario) {
  if (typeof scenario !== "object" || scenario === null) throw new Refused("SCENARIO_INVALID", "scenario: not an object");
  for (const key of Object.keys(scenario)) {
    if (!(key in SCHEMA.properties)) throw new Refused("SCENARIO_INVALID", `scenario.${key}: not a field of Scenario.json`);
  }
  for (const key of SCHEMA.required ?? []) {
    if (!(key in scenario)) throw new Refused("SCENARIO_INVALID", `scenario.${key}: required`);
  }
  if (scenario.scenario_version !== 1) {
    throw new Refused("SCENARIO_INVALID", `scenario.scenario_version: ${JSON.stringify(scenario.scenario_version)} is not 1`);
  }
  if (scenario.workflow) throw new Refused("SCENARIO_INVALID", "this runtime has no workflows");
}

// --- the world: the scripted ports, and where the harness's steps stand ----------------------
class World {
  constructor(scenario, saved) {
    this.scenario = scenario;
    const w = saved ?? { step: 0, inputsBefore: 0, ordered: 0, keyed: [], tools: {}, counted: {}, died: false };
    Object.assign(this, w);
  }
  save() {
    const { step, inputsBefore, ordered, keyed, tools, counted, died } = this;
    return { step, inputsBefore, ordered, keyed, tools, counted, died };
  }
  answer(runNo, request, attempt) {
    const script = this.scenario.model.business;
    const keyed = script.findIndex((a) => a.run === runNo && a.request === request && (a.attempt ?? 1) === attempt);
    if (keyed >= 0) { this.keyed.push(keyed); return script[keyed]; }
    const ordered = script.filter((a) => a.run === null || a.run === undefined);
    if (this.ordered >= ordered.length) {
      throw new Exhausted(`model: business request ${request} of Run ${runNo} (attempt ${attempt}) is not scripted`);
    }
    return ordered[this.ordered++];
  }
  tool(name) {
    const script = this.scenario.tools[name] ?? [];
    const at = this.tools[name] ?? 0;
    if (at >= script.length) throw new Exhausted(`tool ${name}: call ${at + 1} is not scripted`);
    this.tools[name] = at + 1;
    return script[at];
  }
}

// --- the Session: all its state is one JSON document, committed to the store ---------------
class Session {
  constructor(scenario, store, world, trace) {
    this.agent = scenario.agent;
    this.crash = scenario.crash;
    this.texts = this.agent.estimator === "content" ? scenarioTexts(scenario) : null;
    this.store = store;
    this.world = world;
    this.trace = trace;
    this.limits = budget(this.agent);
    this.file = path.join(store, "session.json");
    this.state = fs.existsSync(this.file) ? JSON.parse(fs.readFileSync(this.file, "utf8"))
      : { runs: [], texts: {}, waiting: [], ordinal: 0, inputs: 0, blobs: {}, shown: [] };
  }

  commit(phase) {
    const counted = (this.world.counted[phase] ?? 0) + 1;
    this.world.counted[phase] = counted;
    const dies = !this.world.died && this.crash && this.crash.phase === phase && counted === this.crash.occurrence;
    if (dies && this.crash.when === "before") { this.world.died = true; throw new Died(); }
    const partial = this.file + ".partial";
    fs.writeFileSync(partial, JSON.stringify(this.state));
    fs.renameSync(partial, this.file);
    if (dies) { this.world.died = true; throw new Died(); }
  }

  event(kind, fields) { this.trace.push({ ...fields, kind }); }

  // --- stimuli ------------------------------------------------------------------------------
  ask(text) {
    const run = { no: this.state.runs.length + 1, run_id: id(), records: [], inputs: [], question: null,
      loops: 0, seq: 0, status: "running", final: null, ticks: 0, requests: 0, batch: null };
    this.state.runs.push(run);
    this.client(run, "run_started", `run ${run.no}`);
    for (const carried of this.state.waiting) { carried.run_no = run.no; run.inputs.push(carried); this.delivery(carried); }
    this.state.waiting = [];
    const question = this.receive(text, run);
    run.question = question.input_id;
    run.inputs.push(question);
    this.takeInputs(run);
    this.commit("input_accepted");
  }

  supplement(text) {
    const run = this.active();
    if (run) {
      run.inputs.push(this.receive(text, run));
      this.client(run, "input_received", "supplement");
    } else {
      this.state.waiting.push(this.receive(text, null));
    }
    this.commit("input_accepted");
  }

  advance() {
    const run = this.active();
    while (run && run.status === "running") this.loop(run);
  }

  // --- the loop -----------------------------------------------------------------------------
  loop(run) {
    if (run.batch) { this.settle(run); return; } // a batch a takeover found half done
    if (this.agent.run_deadline !== null && run.ticks >= this.agent.run_deadline) { this.end(run, "timed_out"); return; }
    if (run.loops === this.agent.loop_limit) { this.end(run, "loop_exhausted"); return; }
    run.loops += 1;
    run.requests += 1;
    this.takeInputs(run);
    const view = this.view(run);
    const claimed = run.inputs.filter((d) => d.state === "pending");
    for (const d of claimed) { d.state = "claimed"; this.delivery(d); }
    const rendered = this.rendered(view);
    const tokens = this.estimate(rendered);
    const { W, O, S, B, trigger } = this.limits;
    const operation = id();
    let decision = "below_trigger";
    if (tokens >= trigger) {
      decision = "no_compressible_material";
      if (tokens > B) {
        this.event("budget_decision", { operation_id: operation, decision: "error", input_tokens: tokens, summary_target: null });
        this.end(run, "failed", "CONTEXT_PROTECTED_INPUT_TOO_LARGE", `the request needs ${tokens} input tokens; B is ${B}`);
        return;
      }
    }
    this.event("budget_decision", { operation_id: operation, decision, input_tokens: tokens, summary_target: null });
    this.commit("request_frozen");
    const key = `model:${run.no}:${++this.state.ordinal}`;
    let delivered = false;
    const fragments = [];
    for (let attempt = 1; attempt <= this.agent.model_attempts; attempt++) {
      if (attempt > 1 && this.agent.run_deadline !== null && run.ticks >= this.agent.run_deadline) {
        this.end(run, "timed_out");
        return;
      }
      run.ticks += 1;
      this.event("model_request", { purpose: "business", role: "root", purpose_key: key, attempt,
        operation_id: operation, view: { messages: view }, rendered, estimated_input_tokens: tokens,
        max_output_tokens: O, window: W, output_reserve: O, safety_margin: S, input_budget: B,
        trigger_threshold: trigger, compaction: decision, snapshot_id: null,
        view_hash: crypto.createHash("sha256").update(JSON.stringify(view)).digest("hex") });
      const answer = this.world.answer(run.no, run.requests, attempt);
      if (answer.context_length_exceeded) {
        this.end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", `the provider refused ${tokens} estimated input tokens; W is ${W}`);
        return;
      }
      const output = answer.fail === null || answer.fail === undefined || answer.partial !== null;
      if (output && !delivered) {
        delivered = true;
        for (const d of claimed) { d.state = "delivered"; this.delivery(d); }
      }
      if (answer.fail === null || answer.fail === undefined) { this.decide(run, answer); return; }
      if (answer.partial !== null && answer.partial !== undefined) fragments.push(answer.partial);
    }
    for (const fragment of fragments) {
      run.records.push({ ...message("system", "fragment", `(cut off, not a decision) ${fragment}`), body: fragment });
    }
    this.end(run, "failed", "MODEL_FAILED", "every attempt of the model failed");
  }

  decide(run, answer) {
    const calls = answer.tool_calls.map((c, n) => ({ call_id: id(), action_ordinal: n + 1, name: c.name,
      arguments: c.arguments_text ?? JSON.stringify(c.arguments ?? {}) }));
    run.records.push({ ...message("assistant", "assistant", answer.text ?? ""), tool_calls: calls });
    if (calls.length === 0) {
      run.final = answer.text ?? "";
      this.commit("effective_result_committed");
      this.end(run, "succeeded");
      return;
    }
    run.batch = { calls, results: [] };
    this.commit("effective_result_committed");
    this.settle(run);
  }

  settle(run) {
    const batch = run.batch;
    while (batch.results.length < batch.calls.length) {
      batch.results.push(this.call(run, batch.calls[batch.results.length]));
      this.commit("tool_settled");
    }
    run.records.push(...batch.results);
    run.batch = null;
    this.commit("batch_fed_back");
  }

  call(run, call) {
    const tool = (this.agent.tools ?? []).find((t) => t.name === call.name);
    if (!tool) return errorResult("TOOL_NOT_AVAILABLE", `${call.name} is not a tool of this role`, call.call_id);
    let args;
    try { args = JSON.parse(call.arguments); } catch { args = undefined; }
    if (typeof args !== "object" || args === null || Array.isArray(args)) {
      return errorResult("INVALID_ARGUMENTS", "the arguments are not a JSON object", call.call_id);
    }
    const wrong = argumentErrors(tool.schema ?? {}, args);
    if (wrong.length) return errorResult("INVALID_ARGUMENTS", wrong.join("; "), call.call_id);
    run.ticks += 1;
    if (call.name === "result.read") return this.read(call, args);
    const result = this.world.tool(call.name);
    this.event("tool_executed", { call_id: call.call_id, name: call.name, effective_arguments: args,
      proposed_arguments: args, outcome: result.error ? "error" : "ok", latency: null });
    if (result.error) return errorResult("TOOL_ERROR", result.error, call.call_id);
    return this.result(result.text ?? "", call.call_id);
  }

  read(call, args) {
    // result.read is the runtime's own (docs/scenarios.md): the stored body behind a ref shown.
    const body = this.state.shown.includes(args.result_ref) ? this.state.blobs[args.result_ref] : undefined;
    this.event("tool_executed", { call_id: call.call_id, name: call.name, effective_arguments: args,
      proposed_arguments: args, outcome: body === undefined ? "error" : "ok", latency: null });
    if (body === undefined) return errorResult("RESULT_REF_UNKNOWN", "this role was never shown that result_ref", call.call_id);
    return this.result(chars(body).slice(args.from ?? 0, args.to).join(""), call.call_id);
  }

  result(text, callId) {
    const all = chars(text);
    const record = { ...message("tool", "tool_result", text), call_id: callId, truncation: null };
    if (all.length > PREVIEW_CHARS) {
      const ref = sha256(text);
      this.state.blobs[ref] = text;
      this.state.shown.push(ref);
      record.text = all.slice(0, PREVIEW_CHARS).join("");
      record.truncation = { from_char: 0, through_char: PREVIEW_CHARS, total_chars: all.length,
        result_ref: { digest: ref, size_bytes: Buffer.byteLength(text, "utf8") } };
    }
    return record;
  }

  end(run, status, code = null, text = null) {
    run.status = status;
    for (const d of run.inputs) { // §5: an undelivered supplement waits for the next question
      if ((d.state === "pending" || d.state === "claimed") && d.input_id !== run.question) {
        const successor = { input_id: d.input_id, delivery_id: id(), run_no: null, state: "pending", previous: d.delivery_id };
        d.state = "carried";
        this.delivery(d);
        this.delivery(successor);
        this.state.waiting.push(successor);
      }
    }
    this.event("run_ended", { run_id: run.run_id, run_no: run.no, status, error_code: code, message: text,
      final_answer: status === "succeeded" ? run.final : null });
    this.client(run, "run_ended", status, code);
    this.commit("run_finalised");
  }

  // --- the view: §4 history projection, then the current Run ---------------------------------
  view(run) {
    const view = [message("system", "system_prompt", this.agent.system_prompt)];
    const ended = this.state.runs.filter((r) => r.no < run.no);
    const n = this.agent.recent_runs;
    const recent = n ? ended.slice(-n) : [];
    const current = new Set(run.inputs.map((d) => d.input_id));
    for (const old of ended.slice(0, ended.length - recent.length)) {
      for (const d of old.inputs) view.push(this.input(d.input_id, current));
      if (old.final !== null) view.push(message("assistant", "assistant", old.final));
      view.push(outcome(old));
    }
    for (const past of recent) {
      for (const m of past.records) view.push(m.kind === "user_ref" ? this.input(m.input_id, current) : m);
      view.push(outcome(past));
    }
    return [...view, ...run.records];
  }

  input(inputId, current) {
    if (current.has(inputId)) return { ...message("system", "marker", "(this input is quoted further down)"), input_id: inputId };
    return { ...message("user", "user_ref", this.state.texts[inputId]), input_id: inputId };
  }

  rendered(view) {
    const messages = view.map((m) => {
      const out = { role: m.role, content: m.text, tool_calls: m.tool_calls.map((c) => ({ id: c.call_id, name: c.name, arguments: c.arguments })),
        tool_call_id: m.role === "tool" ? m.call_id : null, marks: [] };
      if (m.truncation) {
        const t = m.truncation;
        const words = `\n[a preview: characters ${t.from_char} to ${t.through_char} of ${t.total_chars}; read more with result.read, result_ref ${t.result_ref.digest}]`;
        out.content += words;
        out.marks.push({ kind: "truncated", call_id: m.call_id, from_char: t.from_char, through_char: t.through_char,
          total_chars: t.total_chars, result_ref: t.result_ref.digest, text: words });
      }
      return out;
    });
    const tool_schemas = (this.agent.tools ?? []).map((t) => JSON.stringify({ name: t.name, parameters: t.schema ?? {} }));
    return { messages, tool_schemas, reasoning_sent: false };
  }

  estimate(rendered) {
    // The estimator the scenario names, over every message's text as sent and every tool
    // schema offered (docs/implementing-a-driver.md "Exact token arithmetic").
    const request = { messages: rendered.messages.map((m) => ({ role: m.role, text: m.content })),
      tool_schemas: rendered.tool_schemas };
    return estimate(this.agent.estimator, request, this.texts);
  }

  // --- inputs and deliveries ---------------------------------------------------------------
  receive(text, run) {
    const d = { input_id: id(), delivery_id: id(), run_no: run ? run.no : null, state: "pending", previous: null };
    this.state.texts[d.input_id] = text;
    this.state.inputs += 1;
    this.delivery(d);
    return d;
  }

  takeInputs(run) {
    const present = new Set(run.records.map((m) => m.input_id));
    for (const d of run.inputs) {
      if (!present.has(d.input_id)) run.records.push({ ...message("user", "user_ref", this.state.texts[d.input_id]), input_id: d.input_id });
    }
  }

  delivery(d) {
    const run = d.run_no === null ? null : this.state.runs[d.run_no - 1];
    this.event("delivery", { input_id: d.input_id, delivery_id: d.delivery_id, state: d.state,
      target_run_id: run ? run.run_id : null, previous_delivery_id: d.previous });
  }

  active() {
    const last = this.state.runs[this.state.runs.length - 1];
    return last && last.status === "running" ? last : null;
  }

  client(run, event, detail, code = null) {
    run.seq += 1;
    this.event("client_event", { run_id: run.run_id, run_seq: run.seq, event, detail,
      ...(event === "run_ended" ? { error_code: code } : {}) });
  }
}

function message(role, kind, text) { return { role, kind, text, tool_calls: [] }; }

function outcome(run) {
  const ending = run.final !== null ? "" : ", without a final answer";
  return { ...message("system", "outcome", `Run ${run.no} finished: ${run.status}${ending}.`),
    run_no: run.no, status: run.status, final_result: run.final !== null };
}

function errorResult(code, detail, callId) {
  return { ...message("tool", "tool_result", JSON.stringify({ status: "error", error: { code, detail } })),
    call_id: callId, truncation: null, result_facts: { status: "error", code } };
}

const KINDS = { string: (v) => typeof v === "string", integer: Number.isInteger, number: (v) => typeof v === "number",
  boolean: (v) => typeof v === "boolean", array: Array.isArray,
  object: (v) => typeof v === "object" && v !== null && !Array.isArray(v) };

function argumentErrors(schema, args) {
  const errors = (schema.required ?? []).filter((name) => !(name in args)).map((name) => `${name} is required`);
  for (const [name, value] of Object.entries(args)) {
    const kind = schema.properties?.[name]?.type;
    if (typeof kind === "string" && KINDS[kind] && !KINDS[kind](value)) errors.push(`${name} must be ${kind}`);
  }
  return errors;
}

// --- one run (or its restart) ----------------------------------------------------------------
function perform(request) {
  const scenario = request.scenario;
  checkScenario(scenario);
  if (scenario.crash && !CAPABILITIES.includes(`crash:${scenario.crash.phase}`)) {
    throw new Refused("SCENARIO_INVALID", `scenario.crash: this runtime cannot die at ${scenario.crash.phase}`);
  }
  const world = new World(scenario, request.op === "restart" ? request.world : null);
  const trace = [];
  if (request.op === "restart") {
    const { phase, occurrence, when } = scenario.crash;
    trace.push({ kind: "restarted", commit: phase, phase, occurrence, when });
    log(`${request.case}: restarted on ${request.store} at step ${world.step}`);
  }
  const session = new Session(scenario, request.store, world, trace);
  try {
    for (; world.step < scenario.steps.length; world.step++) {
      const step = scenario.steps[world.step];
      const again = request.op === "restart" && world.died && world.resumed !== true;
      world.resumed = true;
      if (!again) world.inputsBefore = session.state.inputs;
      const lost = session.state.inputs === world.inputsBefore; // the dead one never committed it
      if (step.ask !== null) { if (lost) session.ask(step.ask); }
      else if (step.supplement !== null) { if (lost) session.supplement(step.supplement); }
      else if (step.advance) session.advance();
      else throw new Refused("SCENARIO_INVALID", `scenario.steps[${world.step}]: this runtime only asks, supplements and advances`);
    }
  } catch (error) {
    if (error instanceof Died) return { ok: true, died: true, world: world.save(), trace };
    throw error;
  }
  return { ok: true, trace };
}

function answer(request) {
  if (request.protocol !== "ctxspec-stdio" || request.version !== 2) {
    return { ok: false, code: "STDIO_REQUEST_INVALID", error: "expected protocol ctxspec-stdio version 2" };
  }
  if (request.op === "hello") return { ok: true, version: 2, capabilities: CAPABILITIES };
  if (request.op === "bye") return { ok: true };
  if (request.op !== "run" && request.op !== "restart") {
    return { ok: false, code: "STDIO_REQUEST_INVALID", error: `request.op: ${request.op} is not an op` };
  }
  try {
    return perform(request);
  } catch (error) {
    if (error instanceof Exhausted) return { ok: false, exhausted: true, error: error.message };
    if (error instanceof Refused) return { ok: false, code: error.code, error: error.message };
    log(error.stack);
    return { ok: false, error: `${error.name}: ${error.message}` };
  }
}

// ASCII JSON: every non-ASCII character as a \u escape (docs/stdio-protocol.md).
const ascii = (value) => JSON.stringify(value).replace(/[\u007f-\uffff]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  let request;
  try { request = JSON.parse(line); } catch {
    process.stdout.write(ascii({ ok: false, code: "STDIO_REQUEST_INVALID", error: "not JSON" }) + "\n");
    return;
  }
  const reply = answer(request);
  if (request.op === "bye" || reply.died) {
    // Dying for real: the answer out, then the process ends (the harness starts it again).
    lines.close();
    process.stdout.write(ascii(reply) + "\n", () => process.exit(0));
    return;
  }
  process.stdout.write(ascii(reply) + "\n");
});
