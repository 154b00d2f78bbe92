// One scenario's Session(s) on LangChain.js: createAgent with its own middleware and a LangGraph
// checkpointer, configured as a careful user following the design would (the configuration
// names the settings in which "best" and "defaults" differ: profile.json). It records what
// LangChain sent and did as the neutral trace; the budget figures W, O, S, B, which LangChain has
// no notion of, are computed here (adapter-supplied, reported apart).
"use strict";
const crypto = require("node:crypto");
const { createAgent, summarizationMiddleware, modelRetryMiddleware, modelCallLimitMiddleware,
  toolCallLimitMiddleware, toolErrorMiddleware } = require("langchain");
const { AIMessage, HumanMessage, SystemMessage } = require("@langchain/core/messages");
const { ContextOverflowError } = require("@langchain/core/errors");
const { Command } = require("@langchain/langgraph");
const { estimate, scenarioTexts } = require("../../estimators-js/estimators.js");
const { Exhausted } = require("./world.js");
const { budget } = require("./budget.js");
const { Crash, Died, Refused, WatchedSaver } = require("./crash.js");
const { Chain, HookDenied, designHooks, reviewMiddleware, reviewAnswer, hookedSummariser } = require("./hooks.js");
const { Executors, withoutRead } = require("./executor.js");
const { ScriptedChatModel, makeTool, toolSchemaText, viewOf, textOf, viewHash, pythonJson } = require("./view.js");

const CONFIGURATIONS = {
  best: { trimTokensToSummarize: Number.MAX_SAFE_INTEGER, countWholeRequest: true, summaryRetries: true },
  defaults: { trimTokensToSummarize: undefined, countWholeRequest: false, summaryRetries: false },
};

class Session {
  constructor(scenario, world, configuration) {
    this.agent = scenario.agent;
    this.name = scenario.name ?? "scenario";
    this.world = world;
    this.configuration = configuration;
    this.limits = budget(this.agent);
    this.texts = this.agent.estimator === "content" ? scenarioTexts(scenario) : null;
    this.events = [];
    this.runs = [];
    this.inputs = {};
    this.inputRuns = {};
    this.waiting = [];
    this.deliveries = {};
    this.claimed = [];
    this.minted = 0;
    this.ordinal = 0;
    this.retry = null;
    this.lost = null;
    this.exhausted = null;
    this.stopRequested = false;
    this.aliases = new Map();
    this.proposed = {};
    this.shared = { rejected: new Set(), postDenied: new Set(), messages: [], denied: false };
    this.crash = new Crash(scenario.crash);
    this.checkpointer = new WatchedSaver(this.crash);
    this.chain = new Chain(world, (kind, fields) => this.event(kind, fields), this.crash);
    // result.read is the design's runtime's own tool (§6); LangChain has none, so it is not
    // offered: a model's call of it goes to the tools like any other call of a missing tool.
    const own = withoutRead(this.agent.tools);
    this.executors = this.agent.executor ? new Executors(this) : null;
    const docs = this.executors ? this.executors.plannerTools(own) : own;
    this.tools = docs.map((doc) => this.toolOf(doc));
    this.schemas = docs.map(toolSchemaText);
    this.toolDocs = docs;
    this.business = new ScriptedChatModel("business", (p, m, t) => this.answer(p, m, t));
    this.summariser = new ScriptedChatModel("compaction", (p, m, t) => this.answer(p, m, t));
    this.middleware = this.buildMiddleware();
    this.graph = this.build();
    this.sessions = 1;
    this.config = { configurable: { thread_id: "session-1" }, recursionLimit: 1000 };
    world.act = (step) => this.act(step);
  }

  // LangChain.js's own middleware for a role (the root, or an Executor: `role` its prompt, tool
  // names and schemas), configured from the scenario's figures and the configuration's settings.
  buildMiddleware(role = { prompt: this.agent.system_prompt, names: this.tools.map((t) => t.name), schemas: this.schemas, root: true }) {
    const agent = this.agent;
    const middleware = [];
    if (["model.pre_request", "model.post_response", "tool.post_call", "compaction.pre_request",
      "compaction.post_response"].some((p) => this.chain.registered(p))) {
      middleware.push(designHooks(this.chain, this.shared));
      // With a wrapToolCall middleware ToolNode no longer turns a tool's error into its result
      // (it rethrows errors "from middleware"): LangChain.js's own toolErrorMiddleware, inside
      // it, does so again, as the agent does without middleware.
      middleware.push(toolErrorMiddleware({ onError: (error) => `${error}` }));
    }
    let summariser = this.configuration.summaryRetries
      ? this.summariser.withRetry({ stopAfterAttempt: agent.model_attempts }) : this.summariser;
    if (this.chain.registered("compaction.pre_request") || this.chain.registered("compaction.post_response")) {
      summariser = hookedSummariser(summariser, this.chain, this.shared);
    }
    const count = (messages) => (this.configuration.countWholeRequest
      ? this.countRequest(messages, role.prompt, role.schemas) : this.count(messages, role.prompt));
    middleware.push(summarizationMiddleware({ model: summariser, trigger: { tokens: this.limits.trigger },
      keep: { messages: 1 }, tokenCounter: count,
      ...(this.configuration.trimTokensToSummarize === undefined ? {} : { trimTokensToSummarize: this.configuration.trimTokensToSummarize }) }));
    middleware.push(modelRetryMiddleware({ maxRetries: agent.model_attempts - 1, onFailure: "error",
      initialDelayMs: 0, backoffFactor: 0, jitter: false }));
    if (role.root) {
      middleware.push(modelCallLimitMiddleware({ runLimit: agent.loop_limit, exitBehavior: "error" }));
      if (agent.tool_quota) middleware.push(toolCallLimitMiddleware({ runLimit: agent.tool_quota }));
    }
    if (this.chain.registered("tool.pre_call") && role.names.length) middleware.push(reviewMiddleware(role.names));
    return middleware;
  }

  // A graph over the Session's checkpointer: a fresh one after a crash, as a restarted process
  // builds it (the checkpointer is the store that survives).
  build() {
    return createAgent({ model: this.business, tools: this.tools, systemPrompt: this.agent.system_prompt,
      middleware: this.middleware, checkpointer: this.checkpointer });
  }

  toolOf(doc) {
    if (this.executors && doc === this.executors.delegateDoc) {
      return makeTool(doc, (name, id, args) => this.executors.run(args));
    }
    return makeTool(doc, (name, id, args) => this.runTool(name, id, args));
  }

  // --- the stimuli ---------------------------------------------------------------------------
  ask(text) {
    const run = { no: this.runs.length + 1, runId: this.id(), inputs: [], sent: 0, status: "running", seq: 0 };
    this.runs.push(run);
    this.client(run, "run_started", `run ${run.no}`);
    this.stopRequested = false;
    run.inputs.push(...this.waiting);
    this.waiting = [];
    run.inputs.push(this.receive(text, run));
  }

  supplement(text) {
    const run = this.active();
    if (!run) { this.waiting.push(this.receive(text, null)); return; }
    run.inputs.push(this.receive(text, run));
    this.client(run, "input_received", "supplement");
  }

  // The user's stop: LangGraph.js's cancellation, the stream's AbortSignal aborted.
  stop() {
    this.stopRequested = true;
    this.controller?.abort();
  }

  newSession() {
    this.sessions += 1;
    this.config = { ...this.config, configurable: { thread_id: `session-${this.sessions}` } };
    this.event("session_opened", { session: this.sessions });
  }

  act(step) {
    if (step.supplement !== null && step.supplement !== undefined) this.supplement(step.supplement);
    else if (step.stop) this.stop();
  }

  async advance() {
    const run = this.active();
    if (!run) return;
    try {
      await this.drive(run);
    } catch (error) {
      if (this.exhausted) throw this.exhausted;
      if (error instanceof Exhausted) throw error;
      if (error instanceof HookDenied) this.end(run, "failed", error.code, error.message);
      else if (error?.name === "ModelCallLimitMiddlewareError") this.end(run, "loop_exhausted", null, error.message);
      else if (ContextOverflowError.isInstance?.(error) || error?.name === "ContextOverflowError") {
        this.end(run, "failed", "CONTEXT_LENGTH_EXCEEDED", error.message);
      } else if (this.stopRequested) this.end(run, "stopped", null, "stopped by the user");
      else {
        const last = [...this.events].reverse().find((e) => e.kind === "model_request");
        const code = last?.purpose === "compaction" ? "COMPACTION_FAILED" : "MODEL_FAILED";
        this.end(run, "failed", code, `${error?.name}: ${error?.message}`);
      }
    }
  }

  // --- the Run: one stream, resumed after each review and, after a crash, on a fresh graph ---
  // The graph pauses before each model call (interruptBefore): there the client reads the
  // user's stop and hands the thread what the user sent since, by streaming it in as new input
  // (LangChain cannot add to a running stream). A review pause is answered with Command(resume).
  async drive(run) {
    let payload = this.handOver(run);
    for (;;) {
      const ending = await this.stream(payload);
      if (ending === "stopped") { this.end(run, "stopped", null, "stopped by the user"); return; }
      if (ending === "crashed") {
        this.crash.dead = false;
        this.graph = this.build();
        payload = await this.unsaved(payload);
        // Resumed from a checkpoint before the model call, the graph does not pause there again:
        // the client reads the user's stop before it resumes.
        const next = (await this.graph.getState(this.config)).next ?? [];
        if (!payload && this.stopRequested && next.includes("model_request")) {
          this.end(run, "stopped", null, "stopped by the user");
          return;
        }
        if (!payload && next.includes("model_request") && this.received()) payload = this.handOver(run);
        continue;
      }
      const state = await this.graph.getState(this.config);
      const pending = state.tasks.flatMap((t) => t.interrupts ?? []);
      if (pending.length) {
        const answer = reviewAnswer(this.chain, pending[0].value);
        // The review names the calls of the last answer, the thread's or an Executor's (whose
        // subgraph paused with the thread): the answer the scripted model gave last.
        this.markRejected([this.lastAnswer].filter(Boolean), pending[0].value, answer);
        payload = new Command({ resume: answer });
        continue;
      }
      const next = state.next ?? [];
      if (!next.length) break;
      if (next.includes("model_request") && this.stopRequested) { this.end(run, "stopped", null, "stopped by the user"); return; }
      payload = next.includes("model_request") && this.received() ? this.handOver(run) : null;
    }
    if (this.stopRequested) { this.end(run, "stopped", null, "stopped by the user"); return; }
    if (this.shared.denied) {
      this.shared.denied = false;
      this.end(run, "failed", "HOOK_DENIED", "a hook denied the model response; it was not delivered");
      return;
    }
    const messages = (await this.graph.getState(this.config)).values.messages ?? [];
    const last = messages[messages.length - 1];
    this.end(run, "succeeded", null, null, last && AIMessage.isInstance(last) ? textOf(last) : null);
  }

  handOver(run) {
    const fresh = run.inputs.slice(run.sent);
    run.sent = run.inputs.length;
    this.crash.inputs += fresh.length;
    return { messages: fresh.map((id) => new HumanMessage({ content: this.inputs[id], id })) };
  }

  // What a restarted client sends again: the inputs the thread lacks, else nothing (the thread
  // resumes from its last checkpoint, a pending review asked again).
  async unsaved(payload) {
    if (!payload || payload instanceof Command || !payload.messages) return null;
    const stored = new Set(((await this.graph.getState(this.config)).values.messages ?? []).map((m) => m.id));
    const missing = payload.messages.filter((m) => !stored.has(m.id));
    if (!missing.length) return null;
    this.crash.inputs += missing.length;
    return { messages: missing };
  }

  async stream(payload) {
    this.controller = new AbortController();
    try {
      const stream = await this.graph.stream(payload, { ...this.config, streamMode: "updates",
        durability: "sync", interruptBefore: ["model_request"], signal: this.controller.signal });
      for await (const chunk of stream) if (this.exhausted) throw this.exhausted;
    } catch (error) {
      if (this.exhausted) throw this.exhausted;
      if (this.stopRequested && this.controller.signal.aborted && !this.crash.dead) return "stopped";
      if (error instanceof Died || this.crash.dead) {
        this.event("restarted", this.crash.restarted());
        return "crashed";
      }
      if (error instanceof Refused) {
        this.event("persistence_failed", { phase: this.crash.refused, occurrence: this.crash.plan.occurrence, error: error.message });
        this.event("restarted", this.crash.restarted());
        return "crashed";
      }
      throw error;
    }
    if (this.exhausted) throw this.exhausted;
    return "ended";
  }

  received() {
    const run = this.active();
    return Boolean(run && run.sent < run.inputs.length);
  }

  // The calls a review rejects: each action is the first call of the last answer with its name
  // and arguments not yet paired; their results are pre-call denials (Q210).
  markRejected(messages, request, answer) {
    const last = [...messages].reverse().find((m) => AIMessage.isInstance(m));
    const unpaired = [...(last?.tool_calls ?? [])];
    request.actionRequests.forEach((action, n) => {
      const at = unpaired.findIndex((c) => c.name === action.name && pythonJson(c.args) === pythonJson(action.args));
      if (at < 0) return;
      const [call] = unpaired.splice(at, 1);
      if (answer.decisions[n]?.type === "reject" && call.id) this.shared.rejected.add(String(call.id));
    });
  }

  // --- the scripted model ------------------------------------------------------------------------
  async answer(purpose, messages, tools) {
    this.crash.alive();
    const role = purpose === "executor" ? "executor" : "root";
    const prompt = role === "executor" ? this.agent.executor.system_prompt : this.agent.system_prompt;
    const view = purpose === "compaction" ? messages.map((m) => ({ role: "user", kind: "prompt", text: textOf(m), tool_calls: [] }))
      : this.viewOf(messages, prompt);
    for (const m of view) if (m.kind === "user_ref") m.source_run_id = this.inputRuns[m.input_id] ?? null;
    const schemas = purpose === "compaction" ? [] : this.schemasOf(tools, role);
    const tokens = this.estimate(view, schemas);
    const fingerprint = crypto.createHash("sha256").update(pythonJson([purpose, view])).digest("hex");
    let key, attempt;
    if (this.lost && this.lost[0] === fingerprint) [, key, attempt] = this.lost;
    else if (this.retry && this.retry[0] === fingerprint) { key = this.retry[1]; attempt = this.retry[2] + 1; }
    else { this.ordinal += 1; key = `${purpose}:${this.ordinal}`; attempt = 1; }
    this.retry = this.lost = null;
    if (purpose === "business") this.claim(view); // the inputs this request carries, as it is sent
    this.request(purpose === "executor" ? "business" : purpose, key, attempt, view, tokens, schemas, role);
    let outcome;
    try {
      outcome = this.world.answer(purpose === "executor" ? "business" : purpose, role, key, attempt, this.runs.length);
    } catch (error) {
      if (error instanceof Exhausted) this.exhausted = error;
      throw error;
    }
    if (outcome.context_length_exceeded) {
      this.retry = [fingerprint, key, attempt];
      throw new ContextOverflowError("the provider refused the request as over its window");
    }
    if (outcome.fail !== null && outcome.fail !== undefined) {
      this.retry = [fingerprint, key, attempt];
      const failure = new Error(outcome.fail);
      failure.name = "ProviderError";
      throw failure;
    }
    if (purpose !== "compaction" && this.crash.onAnswer()) {
      this.lost = [fingerprint, key, attempt];
      throw new Died("the answer arrived; the process dies before LangGraph saves it");
    }
    if (purpose === "business") this.deliver();
    return this.complete(purpose, key, attempt, tokens, outcome);
  }

  complete(purpose, key, attempt, tokens, outcome) {
    const usage = outcome.usage ?? null;
    const reported = usage && (usage.input_tokens !== null && usage.input_tokens !== undefined
      || usage.output_tokens !== null && usage.output_tokens !== undefined);
    if (reported) {
      this.event("model_usage", { purpose, purpose_key: key, attempt, estimated_input_tokens: tokens,
        input_tokens: usage.input_tokens ?? null, output_tokens: usage.output_tokens ?? null,
        input_deviation: usage.input_tokens === null || usage.input_tokens === undefined ? null : usage.input_tokens - tokens });
    }
    const text = outcome.text ?? "";
    const calls = [];
    const invalid = [];
    for (const call of outcome.tool_calls ?? []) {
      const id = call.id ?? `call_${this.id().slice(-12)}`;
      let args = call.arguments ?? {};
      if (call.arguments_text !== null && call.arguments_text !== undefined) {
        try { args = JSON.parse(call.arguments_text); } catch { args = undefined; }
        if (typeof args !== "object" || args === null || Array.isArray(args)) {
          invalid.push({ name: call.name, args: call.arguments_text, id, error: "the arguments are not JSON", type: "invalid_tool_call" });
          continue;
        }
      }
      this.proposed[id] = args;
      calls.push({ name: call.name, args, id, type: "tool_call" });
    }
    const fields = { content: text, id: this.id(), tool_calls: calls, invalid_tool_calls: invalid,
      response_metadata: { model_provider: "ctxspec-scripted" } };
    if (reported) {
      const i = usage.input_tokens ?? 0, o = usage.output_tokens ?? 0;
      fields.usage_metadata = { input_tokens: i, output_tokens: o, total_tokens: i + o };
    }
    this.lastAnswer = new AIMessage(fields);
    return this.lastAnswer;
  }

  request(purpose, key, attempt, view, tokens, schemas, role = "root") {
    const L = this.limits;
    let decision = null;
    if (purpose !== "compaction") {
      let at = this.events.length - 1;
      while (at >= 0 && !(this.events[at].kind === "model_request" && this.events[at].purpose === "business")) at -= 1;
      const compacted = this.events.slice(at + 1).some((e) => e.kind === "model_request" && e.purpose === "compaction");
      decision = compacted ? "compact" : tokens < L.trigger ? "below_trigger" : "no_compressible_material";
    }
    this.event("model_request", { purpose, role, purpose_key: key, attempt, view: { messages: view },
      estimated_input_tokens: tokens, max_output_tokens: L.O, window: L.W, output_reserve: L.O,
      safety_margin: L.S, input_budget: L.B, compaction: decision, trigger_threshold: L.trigger,
      snapshot_id: null, view_hash: viewHash(view),
      rendered: { messages: view.map((m) => ({ role: m.role, content: m.text,
        tool_calls: m.tool_calls.map((c) => ({ id: c.call_id, name: c.name, arguments: c.arguments })),
        tool_call_id: m.role === "tool" ? m.call_id ?? null : null, marks: [] })),
      tool_schemas: schemas, reasoning_sent: false } });
  }

  viewOf(messages, prompt = this.agent.system_prompt) {
    return viewOf(messages, { systemPrompt: prompt, rejected: this.shared.rejected, postDenied: this.shared.postDenied, alias: (id) => this.alias(id) });
  }

  schemasOf(tools, role) {
    const names = new Set(tools.map((t) => t.name ?? t.function?.name));
    const docs = role === "executor" ? withoutRead(this.agent.executor.tools) : this.toolDocs;
    return docs.filter((doc) => names.has(doc.name)).map(toolSchemaText);
  }

  estimate(view, schemas = []) {
    const messages = view.map((m) => ({ role: m.role === "system" || m.role === "assistant" || m.role === "tool" ? m.role : "user",
      text: m.text + m.tool_calls.map((c) => `\n${c.name}(${c.arguments})`).join("") }));
    return estimate(this.agent.estimator, { messages, tool_schemas: schemas }, this.texts);
  }

  // summarizationMiddleware's tokenCounter of the defaults: the messages it is handed (the
  // thread's: no system prompt, no tool schemas).
  count(messages, prompt) { return this.estimate(this.viewOf(messages, prompt)); }

  // The best configuration's tokenCounter: the request the model is sent — the system prompt and
  // the bound tools' schemas with the messages handed to it.
  countRequest(messages, prompt, schemas) {
    return this.estimate(this.viewOf([new SystemMessage({ content: prompt }), ...messages], prompt), schemas);
  }

  // --- the scripted tools ------------------------------------------------------------------
  async runTool(name, callId, args) {
    this.crash.alive();
    let result;
    try {
      result = this.world.tool(name);
    } catch (error) {
      if (error instanceof Exhausted) this.exhausted = error;
      throw error;
    }
    this.event("tool_executed", { call_id: String(callId), name, effective_arguments: args,
      proposed_arguments: this.proposed[callId] ?? args, outcome: result.error ? "error" : "ok", latency: result.latency ?? null });
    if (result.error) throw new Error(result.error);
    return result.text ?? "";
  }

  // --- bookkeeping -------------------------------------------------------------------------
  receive(text, run) {
    const inputId = this.id();
    this.inputs[inputId] = text;
    this.inputRuns[inputId] = run ? run.runId : null;
    this.delivery(inputId, this.id(), "pending", run ? run.runId : null);
    return inputId;
  }

  delivery(inputId, deliveryId, state, target) {
    this.deliveries[inputId] = [deliveryId, state, target];
    this.event("delivery", { input_id: inputId, delivery_id: deliveryId, state, target_run_id: target, previous_delivery_id: null });
  }

  claim(view) {
    const run = this.active();
    for (const m of view) {
      const known = this.deliveries[m.input_id];
      if (m.kind === "user_ref" && known && known[1] === "pending") {
        this.delivery(m.input_id, known[0], "claimed", known[2] ?? (run ? run.runId : null));
        this.claimed.push(m.input_id);
      }
    }
  }

  deliver() {
    for (const inputId of this.claimed) {
      const [deliveryId, , target] = this.deliveries[inputId];
      this.delivery(inputId, deliveryId, "delivered", target);
    }
    this.claimed = [];
  }

  end(run, status, code, message, final = null) {
    run.status = status;
    this.waiting.push(...run.inputs.slice(run.sent));
    run.sent = run.inputs.length;
    this.claimed = [];
    this.event("run_ended", { run_id: run.runId, run_no: run.no, status, error_code: code, message,
      final_answer: status === "succeeded" ? final : null });
    this.client(run, "run_ended", status);
  }

  active() {
    const last = this.runs[this.runs.length - 1];
    return last && last.status === "running" ? last : null;
  }

  client(run, event, detail) {
    run.seq += 1;
    this.event("client_event", { run_id: run.runId, run_seq: run.seq, event, detail });
  }

  alias(id) {
    if (!this.aliases.has(id)) this.aliases.set(id, this.id());
    return this.aliases.get(id);
  }

  // Identities from the scenario's name and a counter, so a report of the same run is the same.
  id() {
    this.minted += 1;
    const hex = crypto.createHash("sha256").update(`ctxspec:${this.name}:${this.minted}`).digest("hex");
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-5${hex.slice(13, 16)}-8${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
  }

  event(kind, fields) { this.events.push({ ...fields, kind }); }
}

module.exports = { Session, CONFIGURATIONS };
