// The design's crash phases (§10, docs/implementing-a-driver.md "Crash points") mapped onto the
// checkpoints LangGraph.js writes. The graph streams with durability "sync",
// so each step's checkpoint is saved before the next step starts (a step's tool tasks start in
// call order). The Session's checkpointer is a WatchedSaver: LangGraph's MemorySaver, which reads from
// each checkpoint it is handed which phases it commits and dies just before or after storing it
// (or refuses it), as the scenario's crash says. The phases (root graph, namespace ""):
//   input_accepted              the stream's "input" checkpoint (one occurrence per input handed)
//   request_frozen              a checkpoint whose next node is model_request
//   raw_answer_saved            the checkpoint of the model_request step (before: the process dies
//                               inside the model call once the answer arrived)
//   effective_result_committed  the first checkpoint after an answer whose next node is no
//                               after_model middleware
//   hook_decided                the first checkpoint after a hook chain decided
//   tool_settled                a tools task's pending writes (putWrites): one call's ToolMessage,
//                               saved as its task ends while the step's other calls may have run
//   batch_fed_back              the checkpoint of the tools step
//   run_finalised               a checkpoint with no next node after a step ran
//   execution_started/_ended    an Executor subgraph's input checkpoint and its last (lib/executor.js)
// The store is in memory and outlives the dead runtime inside this process: the restart is a new
// graph on the same checkpointer (docs/stdio-protocol.md, Q361).
"use strict";
const { MemorySaver } = require("@langchain/langgraph");
const { ToolMessage } = require("@langchain/core/messages");

const PHASES = ["input_accepted", "request_frozen", "raw_answer_saved", "effective_result_committed",
  "hook_decided", "tool_settled", "batch_fed_back", "run_finalised", "execution_started", "execution_ended"];

class Died extends Error {}
class Refused extends Error {}

const BRANCH = "branch:to:";

function nextOf(checkpoint) {
  const values = checkpoint.channel_values ?? {};
  const nodes = new Set(Object.keys(values).filter((k) => k.startsWith(BRANCH)).map((k) => k.slice(BRANCH.length)));
  for (const send of values.__pregel_tasks ?? []) if (send?.node) nodes.add(send.node);
  return nodes;
}

class Crash {
  constructor(plan) {
    this.plan = plan ?? null;
    this.passed = 0;
    this.done = false;
    this.dead = false;
    this.inputs = 0; // inputs handed to the stream that no checkpoint holds yet
    this.decided = 0; // hook chains decided since the last checkpoint
    this.answered = new Set();
    this.following = new Map(); // namespace -> the next nodes of its last checkpoint
    this.refused = null;
  }

  alive() { if (this.dead) throw new Died("the process is dead"); }

  // `graph` names the graph a checkpoint is of: "" the root's, else an Executor's thread.
  phasesOf(graph, checkpoint, metadata) {
    const ran = this.following.get(graph) ?? new Set();
    const following = nextOf(checkpoint);
    this.following.set(graph, following);
    const phases = new Map();
    if (metadata?.source === "input") {
      if (graph) phases.set("execution_started", 1);
      else if (this.inputs) phases.set("input_accepted", this.inputs);
      this.inputs = graph ? this.inputs : 0;
      return phases;
    }
    if (following.has("model_request")) phases.set("request_frozen", 1);
    if (ran.has("model_request")) { phases.set("raw_answer_saved", 1); this.answered.add(graph); }
    if (this.answered.has(graph) && ![...following].some((n) => n.endsWith(".after_model"))) {
      phases.set("effective_result_committed", 1);
      this.answered.delete(graph);
    }
    if (this.decided) { phases.set("hook_decided", this.decided); this.decided = 0; }
    if (ran.has("tools")) phases.set("batch_fed_back", 1);
    if (ran.size && !ran.has("__start__") && following.size === 0) phases.set(graph ? "execution_ended" : "run_finalised", 1);
    return phases;
  }

  // A tools task's writes hold its call's result: one ToolMessage and nothing else of the thread.
  writesOf(writes) {
    const messages = writes.filter(([channel]) => channel === "messages").flatMap(([, value]) => [value].flat());
    const settled = messages.length > 0 && messages.every((m) => ToolMessage.isInstance(m));
    return new Map(settled ? [["tool_settled", 1]] : []);
  }

  // A business answer arrived inside the model node: a crash before it is saved.
  onAnswer() {
    return this.plan !== null && this.plan.phase === "raw_answer_saved"
      && this.due(new Map([["raw_answer_saved", 1]]), "before");
  }

  atCommit(phases, when) {
    if (this.plan === null || this.done || !phases.has(this.plan.phase)) return;
    if (this.plan.phase === "raw_answer_saved" && this.plan.when === "before") return;
    if (when === "before" && this.plan.when === "fails" && this.due(phases, "fails")) {
      this.refused = this.plan.phase;
      throw new Refused(`the checkpointer refused the checkpoint of ${this.plan.phase}`);
    }
    if (this.due(phases, when)) throw new Died(`died ${when} ${this.plan.phase}`);
  }

  due(phases, when) {
    if (this.plan === null || this.done || this.plan.when !== when) return false;
    const count = phases.get(this.plan.phase) ?? 0;
    if (count === 0) return false;
    this.passed += count;
    if (this.passed < this.plan.occurrence) return false;
    this.done = true;
    this.dead = when !== "fails";
    return true;
  }

  restarted() {
    const { phase, occurrence, when } = this.plan;
    return { commit: phase, phase, occurrence, when };
  }
}

// An Executor's graph is saved under its delegate task's namespace: its checkpoints count the
// same phases (§10 counts them over every role) and two more, execution_started its input
// checkpoint (the hand-over) and execution_ended its last.
class WatchedSaver extends MemorySaver {
  constructor(crash) { super(); this.crash = crash; }

  graphOf(config) { return String(config.configurable?.checkpoint_ns ?? ""); }

  async put(config, checkpoint, metadata, versions) {
    this.crash.alive();
    const phases = this.crash.phasesOf(this.graphOf(config), checkpoint, metadata);
    this.crash.atCommit(phases, "before");
    const stored = await super.put(config, checkpoint, metadata, versions);
    this.crash.atCommit(phases, "after");
    return stored;
  }

  async putWrites(config, writes, taskId) {
    this.crash.alive();
    const phases = this.crash.writesOf(writes);
    this.crash.atCommit(phases, "before");
    const stored = await super.putWrites(config, writes, taskId);
    this.crash.atCommit(phases, "after");
    return stored;
  }
}

module.exports = { PHASES, Crash, Died, Refused, WatchedSaver };
