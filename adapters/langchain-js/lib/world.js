// The world around the runtime, read from the scenario (docs/scenarios.md): the scripted model,
// tools and hooks, and the triggers that fire on the world's counts. Nothing here is
// LangChain's: it stands for the provider, the tools' backends and the hook handlers a user
// would have. The world counts, not the runtime, so a trigger fires once per scenario.
"use strict";

class Exhausted extends Error {}

class World {
  constructor(scenario) {
    this.scenario = scenario;
    const model = scenario.model;
    this.ordered = {};
    this.keyed = new Map();
    for (const purpose of ["business", "executor", "compaction"]) {
      const answers = model[purpose] ?? [];
      this.ordered[purpose] = answers.filter((a) => a.run === null || a.run === undefined);
      for (const a of answers) {
        if (a.run !== null && a.run !== undefined) {
          this.keyed.set(`${purpose}|${a.run}|${a.request}|${a.attempt ?? 1}`, a);
        }
      }
    }
    this.used = { business: 0, executor: 0, compaction: 0 };
    this.answered = new Map(); // `${purpose_key}|${attempt}` -> the answer given
    this.operations = new Map(); // `${purpose}|${run}` -> purpose keys in the order first asked
    this.requests = {}; // new requests per purpose, for the triggers
    this.toolCalls = {};
    this.hookCalls = {};
    this.act = null; // performs a trigger's step (set by the session)
  }

  // The answer to one attempt of a model Operation (docs/scenarios.md "model").
  answer(purpose, role, purposeKey, attempt, runNo) {
    const asked = `${purposeKey}|${attempt}`;
    if (this.answered.has(asked)) return this.answered.get(asked);
    const ordinal = this.requests[purpose] = (this.requests[purpose] ?? 0) + 1;
    this.fire({ purpose, ordinal });
    const key = purpose === "business" && role === "executor" ? "executor" : purpose;
    const seenKey = `${key}|${runNo}`;
    const seen = this.operations.get(seenKey) ?? [];
    this.operations.set(seenKey, seen);
    if (!seen.includes(purposeKey)) seen.push(purposeKey);
    const keyed = this.keyed.get(`${key}|${runNo}|${seen.indexOf(purposeKey) + 1}|${attempt}`);
    if (keyed) { this.answered.set(asked, keyed); return keyed; }
    const queue = this.ordered[key];
    if (this.used[key] >= queue.length) {
      throw new Exhausted(`the ${key} model script ran out at request #${this.used[key] + 1} (${purposeKey}, attempt ${attempt})`);
    }
    const found = queue[this.used[key]++];
    this.answered.set(asked, found);
    return found;
  }

  // The next scripted result of a tool, in call order.
  tool(name) {
    const ordinal = this.toolCalls[name] = (this.toolCalls[name] ?? 0) + 1;
    this.fire({ tool: name, ordinal });
    const results = this.scenario.tools?.[name] ?? [];
    if (ordinal > results.length) throw new Exhausted(`the script of tool '${name}' ran out at call #${ordinal}`);
    return results[ordinal - 1];
  }

  registered(point) { return (this.scenario.hooks ?? []).some((h) => h.point === point); }

  // The items of every hook scripted at this invocation of the point, in order.
  hookItems(point) {
    const ordinal = this.hookCalls[point] = (this.hookCalls[point] ?? 0) + 1;
    const items = [];
    for (const hook of this.scenario.hooks ?? []) {
      if (hook.point === point && (hook.ordinal === null || hook.ordinal === undefined || hook.ordinal === ordinal)) {
        items.push(...hook.items);
      }
    }
    return items;
  }

  fire({ purpose = null, tool = null, ordinal }) {
    for (const trigger of this.scenario.triggers ?? []) {
      const on = trigger.on;
      const matches = on.ordinal === ordinal && ((purpose !== null && on.purpose === purpose)
        || (tool !== null && on.tool === tool));
      if (matches && this.act) this.act(trigger.do);
    }
  }
}

module.exports = { World, Exhausted };
