// The LangChain side of the runtime: a chat model answering from the scenario's script, the
// Agent's tools as LangChain tools, and the messages LangChain sends converted into the neutral
// trace's view (docs/implementing-a-driver.md §3). Nothing here decides what LangChain does.
"use strict";
const crypto = require("node:crypto");
const { BaseChatModel } = require("@langchain/core/language_models/chat_models");
const { AIMessage, HumanMessage, SystemMessage, ToolMessage } = require("@langchain/core/messages");
const { tool } = require("langchain");

const PROVIDER = "ctxspec-scripted";
const SUMMARY_PREFIX = "Here is a summary of the conversation to date:\n\n"; // summarization.js DEFAULT_SUMMARY_PREFIX

// A chat model whose answers come from the driver (which asks the scenario's script).
class ScriptedChatModel extends BaseChatModel {
  constructor(purpose, answer) {
    super({});
    this.purpose = purpose;
    this.answer = answer;
  }
  _llmType() { return PROVIDER; }
  bindTools(tools) { return this.withConfig({ tools }); }
  async _generate(messages, options) {
    if (options?.signal?.aborted) { // as a provider's HTTP call with an aborted signal: nothing is sent
      const aborted = new Error("This operation was aborted");
      aborted.name = "AbortError";
      throw aborted;
    }
    const message = await this.answer(this.purpose, messages, options?.tools ?? []);
    return { generations: [{ message, text: typeof message.content === "string" ? message.content : "" }] };
  }
}

// JSON as the reference serialises a tool schema: sorted keys, ", " and ": ", non-ASCII escaped.
function pythonJson(value) {
  if (value === null || typeof value !== "object") {
    return JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
  }
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(", ")}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${pythonJson(k)}: ${pythonJson(value[k])}`).join(", ")}}`;
}

function schemaOf(doc) {
  const schema = doc.schema ? { ...doc.schema } : { type: "object", properties: {} };
  if (!schema.type) schema.type = "object";
  if (!schema.properties) schema.properties = {};
  return schema;
}

// The scenario's tool as a LangChain tool with the Agent's JSON schema; run(name, id, args).
function makeTool(doc, run) {
  const schema = schemaOf(doc);
  return tool(async (args, config) => run(doc.name, config?.toolCall?.id ?? config?.toolCallId, args, config),
    { name: doc.name, description: typeof schema.description === "string" ? schema.description : doc.name, schema });
}

function toolSchemaText(doc) { return pythonJson({ name: doc.name, parameters: schemaOf(doc) }); }

const textOf = (message) => (typeof message.content === "string" ? message.content
  : (message.content ?? []).map((part) => (typeof part === "string" ? part : part.text ?? "")).join(""));

// The request as LangChain sent it, in the trace's terms (Python's view_of, the same mapping).
function viewOf(messages, ctx) {
  return messages.map((message) => {
    const text = textOf(message);
    let entry;
    if (SystemMessage.isInstance(message)) {
      const kind = text === ctx.systemPrompt ? "system_prompt" : "annotation";
      entry = entryOf("system", kind, text);
      if (kind === "annotation") entry.body = text;
    } else if (HumanMessage.isInstance(message)) {
      if (message.additional_kwargs?.lc_source === "summarization") {
        entry = entryOf("user", "summary", text);
        // The summary as summarizationMiddleware put it: its text after the fixed prefix.
        entry.body = text.startsWith(SUMMARY_PREFIX) ? text.slice(SUMMARY_PREFIX.length) : text;
      } else {
        entry = entryOf("user", "user_ref", text);
        entry.input_id = message.id;
      }
    } else if (AIMessage.isInstance(message)) {
      entry = entryOf("assistant", "assistant", text);
      entry.tool_calls = (message.tool_calls ?? []).map((call, n) => ({ call_id: String(call.id),
        action_ordinal: n + 1, name: call.name, arguments: pythonJson(call.args ?? {}) }));
    } else if (ToolMessage.isInstance(message)) {
      const failed = message.status === "error";
      entry = entryOf("tool", "tool_result", failed ? pythonJson({ error: text, status: "error" }) : text);
      entry.call_id = message.tool_call_id;
      if (ctx.rejected.has(message.tool_call_id)) {
        entry.result_facts = { status: "denied", stage: "pre", executed: false, result_delivered: false };
      } else if (ctx.postDenied.has(message.tool_call_id)) {
        entry.result_facts = { status: "denied", stage: "post", executed: true, result_delivered: false };
      } else if (failed) {
        entry.result_facts = { status: "error" };
      }
    } else {
      entry = entryOf(message._getType?.() ?? "system", "annotation", text);
      entry.body = text;
    }
    entry.record_id = message.id ? ctx.alias(message.id) : null; // the system prompt has no id
    return entry;
  });
}

// A summary request: summarizationMiddleware sends one prompt holding the material.
function promptView(prompt) {
  return [entryOf("user", "prompt", typeof prompt === "string" ? prompt : textOf(prompt))];
}

function entryOf(role, kind, text) { return { role, kind, text, tool_calls: [] }; }

const viewHash = (view) => crypto.createHash("sha256").update(pythonJson(view)).digest("hex");

module.exports = { ScriptedChatModel, PROVIDER, makeTool, toolSchemaText, viewOf, promptView, pythonJson, textOf, viewHash };
