// The design's Planner and Executor (§2, §3, §10) with LangChain.js's own parts: the Planner is
// the root createAgent; its `delegate` tool runs an Executor, a second createAgent with the
// Executor's system prompt, tools, summary, hooks and retries — LangChain's "sub-agent behind a
// tool" — invoked on a fresh state holding only the hand-over, so it sees none of the Planner's
// messages; its last answer is the delegate call's result, which the Planner's ToolNode feeds
// back like any tool result. The hand-over is one HumanMessage in our own words: the task, then
// each constraint and each material reference on a line of its own.
"use strict";
const { createAgent } = require("langchain");
const { isGraphInterrupt } = require("@langchain/langgraph");
const { AIMessage, HumanMessage } = require("@langchain/core/messages");
const { ScriptedChatModel, makeTool, toolSchemaText, textOf } = require("./view.js");

const DELEGATE_DOC = { name: "delegate", schema: { type: "object", description: "Hand one task to an Executor.",
  properties: { task: { type: "string" }, constraints: { type: "array" }, materials: { type: "array" } } } };

// result.read is the design's runtime's own tool (§6): LangChain.js has none, so it is not offered.
const withoutRead = (docs) => (docs ?? []).filter((doc) => doc.name !== "result.read");

function handover(args) {
  return [`Task: ${args.task ?? ""}`, ...(args.constraints ?? []).map((c) => `- must: ${c}`),
    ...(args.materials ?? []).map((m) => `- see: ${m}`)].join("\n");
}

class Executors {
  constructor(session) {
    this.session = session;
    this.doc = session.agent.executor;
    this.delegateDoc = DELEGATE_DOC;
    this.model = new ScriptedChatModel("executor", (p, m, t) => session.answer(p, m, t));
    this.queue = Promise.resolve();
  }

  // The Planner's tools: its own and delegate.
  plannerTools(own) { return own.some((doc) => doc.name === "delegate") ? own : [...own, DELEGATE_DOC]; }

  // Executions run one after another, in call order (LangGraph.js starts a step's delegate
  // calls together): the tool queues them, as the Executors of a batch share the model.
  run(args) {
    const done = this.queue.then(() => this.execute(args));
    this.queue = done.catch(() => undefined);
    return done;
  }

  // One execution: the hand-over in, the Executor's last answer out. Invoked inside the
  // delegate call, the Executor's graph is a subgraph of the thread (LangGraph.js hands it the
  // parent's config): it is saved under the tool task's namespace on the Session's checkpointer,
  // its review pauses the whole thread, and a delegate call run again resumes it where it stood.
  async execute(args) {
    const session = this.session;
    const docs = withoutRead(this.doc.tools);
    const tools = docs.map((doc) => makeTool(doc, (name, id, a) => session.runTool(name, id, a)));
    const middleware = session.buildMiddleware({ prompt: this.doc.system_prompt, names: tools.map((t) => t.name),
      schemas: docs.map(toolSchemaText), root: false });
    const graph = createAgent({ model: this.model, tools, systemPrompt: this.doc.system_prompt, middleware });
    let state;
    try {
      state = await graph.invoke({ messages: [new HumanMessage({ content: handover(args), id: session.id() })] },
        { durability: "sync" }); // as the thread streams: each step saved before the next runs
    } catch (failure) {
      // A review's pause and the process's death go up to the thread; any other failure of the
      // Executor is the delegate call's error, which the Planner reads as its result.
      if (isGraphInterrupt(failure) || session.crash.dead || session.exhausted) throw failure;
      throw new Error(`the Executor failed: ${failure?.message}`);
    }
    if (session.shared.denied) {
      session.shared.denied = false;
      throw new Error("the Executor failed: a hook denied its answer");
    }
    const last = [...(state.messages ?? [])].reverse().find((m) => AIMessage.isInstance(m));
    return last ? textOf(last) : "";
  }
}

module.exports = { Executors, withoutRead, DELEGATE_DOC };
