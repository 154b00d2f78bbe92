// The design's hook points (§3, spec/hooks.json) where LangChain.js's own API hands a user the
// request, the answer, the call or the result: a middleware written with createMiddleware as a
// user following the design writes one, and humanInTheLoopMiddleware for tool.pre_call.
//   model.pre_request       beforeModel (a context patch of a message's text is a state update of
//                           the thread; params.<name> goes into that request's modelSettings
//                           through wrapModelCall); a deny sends no request (HOOK_DENIED)
//   model.post_response     afterModel (an edit replaces the answer by id; a deny removes it and
//                           jumps to the end)
//   tool.pre_call           humanInTheLoopMiddleware: the chain of a call is its reviewer
//                           (deny -> reject, argument writes -> edit, else approve)
//   tool.post_call          wrapToolCall once the tool ran (an edit or a deny replaces the
//                           ToolMessage's content)
//   compaction.pre_request / compaction.post_response   a Runnable around the summary model,
//                           which summarizationMiddleware accepts as its model
// A failed item is dropped (fail-open, Q290). What a middleware cannot carry (a base revision, a
// field registry, context patches elsewhere) is not applied: hook_decided lists in `changes` only
// what was applied, so a case needing the design's patch rules fails on LangChain's lack of them.
"use strict";
const { createMiddleware, humanInTheLoopMiddleware } = require("langchain");
const { AIMessage, HumanMessage, SystemMessage, ToolMessage, RemoveMessage } = require("@langchain/core/messages");
const { RunnableLambda } = require("@langchain/core/runnables");
const { textOf } = require("./view.js");

const POINTS = ["model.pre_request", "model.post_response", "tool.pre_call", "tool.post_call",
  "compaction.pre_request", "compaction.post_response"];
const DENIED_RESULT = "denied by a post-call hook";

class HookDenied extends Error {
  constructor(message, code = "HOOK_DENIED") { super(message); this.code = code; }
}

// Asks the scenario's chain at one point and traces its decisions.
class Chain {
  constructor(world, event, crash) { this.world = world; this.event = event; this.crash = crash; }

  registered(point) { return this.world.registered(point); }

  // apply(path, value) carries one payload write, patch(contextPatch) one context operation;
  // each returns whether it had a place. True when an item denied.
  ask(point, stage, apply, patch = () => false) {
    this.event("hook_called", { point, stage });
    let denied = false;
    this.world.hookItems(point).forEach((item, position) => {
      const failed = item.fails === true;
      const changes = [];
      if (!failed) {
        for (const op of item.payload_patch ?? []) if (apply(op.path, op.delete ? undefined : op.value, op)) changes.push(op.path);
        for (const op of item.context_patch ?? []) if (patch(op)) changes.push(op.field);
      }
      const decision = failed ? "failed" : (item.decision ?? "allow");
      this.event("hook_decided", { point, chain_position: position, decision, patch_valid: !failed, diagnostics: [], changes });
      denied = denied || (!failed && decision === "deny");
    });
    this.crash.decided += 1;
    return denied;
  }
}

// The records a scenario's context patch may name: the current question, the last message, the
// first answer.
function named(messages, target) {
  if (target === "question") return [...messages].reverse().find((m) => HumanMessage.isInstance(m));
  if (target === "last") return messages[messages.length - 1];
  if (target === "first_assistant") return messages.find((m) => AIMessage.isInstance(m));
  return undefined;
}

function withContent(message, content) {
  const Kind = message.constructor;
  return new Kind({ ...message, content, id: message.id, tool_calls: message.tool_calls, additional_kwargs: message.additional_kwargs });
}

// The middleware a user following the design writes for model.pre_request, model.post_response
// and tool.post_call; `seen` keeps the last state's messages for the compaction hooks.
function designHooks(chain, state) {
  let settings = {};
  const spec = { name: "DesignHooks" };
  spec.beforeModel = async (graphState) => {
    state.messages = graphState.messages;
    if (!chain.registered("model.pre_request")) return undefined;
    const messages = graphState.messages;
    settings = {};
    const changed = [];
    const setting = (path, value) => {
      const [head, ...rest] = path.split(".");
      if (head !== "params" || !rest.length) return false;
      settings[rest.join(".")] = value;
      return true;
    };
    const patch = (op) => {
      const target = named(messages, op.target);
      if (!target || op.field !== "text" || typeof op.value !== "string") return false;
      changed.push(op.operation === "append_annotation" ? new SystemMessage({ content: op.value }) : withContent(target, op.value));
      return true;
    };
    if (chain.ask("model.pre_request", "pre", setting, patch)) throw new HookDenied("a hook denied the model request; it was not sent");
    return changed.length ? { messages: changed } : undefined;
  };
  spec.wrapModelCall = async (request, handler) => (Object.keys(settings).length
    ? handler({ ...request, modelSettings: { ...request.modelSettings, ...settings } }) : handler(request));
  spec.afterModel = { canJumpTo: ["end"], hook: async (graphState) => {
    if (!chain.registered("model.post_response")) return undefined;
    const answer = [...graphState.messages].reverse().find((m) => AIMessage.isInstance(m));
    if (!answer) return undefined;
    const edited = { text: textOf(answer) };
    const write = (path, value) => {
      if (path !== "text" || typeof value !== "string") return false;
      edited.text = value;
      return true;
    };
    const patch = (op) => {
      if (named(graphState.messages, op.target) !== answer || op.field !== "text" || typeof op.value !== "string"
        || op.operation === "append_annotation") return false;
      edited.text = op.value;
      return true;
    };
    if (chain.ask("model.post_response", "post", write, patch)) {
      state.denied = true;
      return { messages: [new RemoveMessage({ id: answer.id })], jumpTo: "end" };
    }
    return edited.text === textOf(answer) ? undefined : { messages: [withContent(answer, edited.text)] };
  } };
  spec.wrapToolCall = async (request, handler) => {
    const result = await handler(request);
    if (!chain.registered("tool.post_call") || !ToolMessage.isInstance(result)) return result;
    const edited = { result: textOf(result) };
    const write = (path, value) => {
      if (path !== "result" || typeof value !== "string") return false;
      edited.result = value;
      return true;
    };
    if (chain.ask("tool.post_call", "post", write)) {
      state.postDenied.add(result.tool_call_id);
      return new ToolMessage({ content: DENIED_RESULT, tool_call_id: result.tool_call_id, name: result.name, status: "error" });
    }
    return edited.result === textOf(result) ? result
      : new ToolMessage({ content: edited.result, tool_call_id: result.tool_call_id, name: result.name, status: result.status });
  };
  return createMiddleware(spec);
}

// humanInTheLoopMiddleware over every tool of the role, in its default (batched) mode.
function reviewMiddleware(toolNames) {
  const interruptOn = {};
  for (const name of toolNames) interruptOn[name] = { allowedDecisions: ["approve", "edit", "reject"] };
  return humanInTheLoopMiddleware({ interruptOn });
}

// The Command(resume) value for one review request: each call's tool.pre_call chain decides.
function reviewAnswer(chain, request) {
  return { decisions: request.actionRequests.map((action) => {
    const edited = { name: action.name, args: { ...action.args } };
    const write = (path, value, op) => {
      const [head, ...rest] = path.split(".");
      if (head === "name" && !rest.length && typeof value === "string") edited.name = value;
      else if (head === "arguments" && !rest.length) edited.args = value && typeof value === "object" ? { ...value } : {};
      else if (head === "arguments" && rest.length === 1) {
        if (op.delete) delete edited.args[rest[0]]; else edited.args[rest[0]] = value;
      } else return false;
      return true;
    };
    if (chain.ask("tool.pre_call", "pre", write)) return { type: "reject" };
    if (JSON.stringify(edited) === JSON.stringify({ name: action.name, args: action.args })) return { type: "approve" };
    return { type: "edit", editedAction: edited };
  }) };
}

// The summary model between the compaction chains: summarizationMiddleware accepts any Runnable
// whose answer has a `content` and hands it the formatted prompt.
function hookedSummariser(model, chain, state) {
  return RunnableLambda.from(async (prompt, config) => {
    let text = typeof prompt === "string" ? prompt : textOf(prompt);
    if (chain.registered("compaction.pre_request")) {
      const patch = (op) => {
        const target = named(state.messages ?? [], op.target);
        if (!target || op.field !== "text" || typeof op.value !== "string") return false;
        if (op.operation !== "append_annotation" && !text.includes(textOf(target))) return false; // not in the material
        text = op.operation === "append_annotation" ? `${text}\n${op.value}` : text.split(textOf(target)).join(op.value);
        return true;
      };
      if (chain.ask("compaction.pre_request", "pre", () => false, patch)) {
        throw new HookDenied("a compaction hook denied the summary request; it was not sent", "COMPACTION_FAILED");
      }
    }
    const answer = await model.invoke(text, config);
    let summary = textOf(answer);
    if (chain.registered("compaction.post_response")) {
      const write = (path, value) => {
        if (path !== "summary" || typeof value !== "string") return false;
        summary = value;
        return true;
      };
      if (chain.ask("compaction.post_response", "post", write)) {
        throw new HookDenied("a compaction hook denied the summary; none is published", "COMPACTION_FAILED");
      }
    }
    return new AIMessage({ content: summary });
  });
}

module.exports = { POINTS, Chain, HookDenied, designHooks, reviewMiddleware, reviewAnswer, hookedSummariser };
