#!/usr/bin/env node
// LangChain.js (createAgent) under the ctxspec conformance suite, over the stdio protocol
// version 2 (docs/stdio-protocol.md): one process serves every case — hello, run, restart, bye.
// `node runtime.js` is LangChain configured as a careful user following the design would (the
// best configuration); `node runtime.js --defaults` keeps LangChain's defaults wherever the
// design names no figure. What each maps and why: README.md and profile.json beside this file.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const readline = require("node:readline");

const { World, Exhausted } = require("./lib/world.js");
const { Session, CONFIGURATIONS } = require("./lib/session.js");
const { Refused } = require("./lib/budget.js");
const { PHASES } = require("./lib/crash.js");
const { POINTS } = require("./lib/hooks.js");

const CAPABILITIES = ["root_loop", "estimator_injection", "compaction_summary", "stop", "usage_reports", "planner_executor",
  "final_answers", "triggers", "sessions", "commit_failures", "stop_mid_batch",
  ...POINTS.map((p) => `hooks:${p}`), ...PHASES.map((p) => `crash:${p}`)].sort();
const SCHEMA = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "spec", "schemas", "Scenario.json"), "utf8"));
const configuration = CONFIGURATIONS[process.argv.includes("--defaults") ? "defaults" : "best"];
const log = (line) => process.stderr.write(`${line}\n`);

// The scenario's top level and version, against spec/schemas/Scenario.json: a document the
// harness's own reading refuses reaches the runtime as written, for it to refuse.
function checkScenario(scenario) {
  if (typeof scenario !== "object" || scenario === null) throw new Refused("SCENARIO_INVALID", "scenario: not an object");
  for (const key of Object.keys(scenario)) {
    if (!(key in SCHEMA.properties)) throw new Refused("SCENARIO_INVALID", `scenario.${key}: not a field of Scenario.json`);
  }
  for (const key of SCHEMA.required ?? []) {
    if (!(key in scenario)) throw new Refused("SCENARIO_INVALID", `scenario.${key}: required`);
  }
  if (scenario.scenario_version !== 1) throw new Refused("SCENARIO_INVALID", "scenario.scenario_version: not 1");
  if (scenario.workflow) throw new Refused("SCENARIO_INVALID", "this runtime has no workflows");
  const agent = SCHEMA.$defs?.AgentDoc?.properties;
  for (const key of Object.keys(scenario.agent ?? {})) {
    if (agent && !(key in agent)) throw new Refused("SCENARIO_INVALID", `scenario.agent.${key}: not a field of the Agent`);
  }
  if (scenario.crash && scenario.crash.phase && !CAPABILITIES.includes(`crash:${scenario.crash.phase}`)) {
    throw new Refused("SCENARIO_INVALID", `scenario.crash: this runtime cannot die at ${scenario.crash.phase}`);
  }
}

async function perform(request) {
  const scenario = request.scenario;
  checkScenario(scenario);
  const world = new World(scenario);
  const session = new Session(scenario, world, configuration);
  for (const [n, step] of scenario.steps.entries()) {
    if (step.ask !== null && step.ask !== undefined) session.ask(step.ask);
    else if (step.supplement !== null && step.supplement !== undefined) session.supplement(step.supplement);
    else if (step.advance) await session.advance();
    else if (step.stop) session.stop();
    else if (step.new_session) session.newSession();
    else throw new Refused("SCENARIO_INVALID", `scenario.steps[${n}]: this runtime only asks, supplements, advances, stops and opens Sessions`);
  }
  return { ok: true, trace: session.events };
}

async function answer(request) {
  if (request.protocol !== "ctxspec-stdio" || request.version !== 2) {
    return { ok: false, code: "STDIO_REQUEST_INVALID", error: "expected protocol ctxspec-stdio version 2" };
  }
  if (request.op === "hello") return { ok: true, version: 2, capabilities: CAPABILITIES };
  if (request.op === "bye") return { ok: true };
  if (request.op !== "run") return { ok: false, code: "STDIO_REQUEST_INVALID", error: `request.op: ${request.op} is not an op this runtime serves` };
  try {
    return await perform(request);
  } catch (error) {
    if (error instanceof Exhausted) return { ok: false, exhausted: true, error: error.message };
    if (error instanceof Refused) return { ok: false, code: error.code, error: error.message };
    log(error?.stack ?? String(error));
    return { ok: false, error: `${error?.name}: ${error?.message}` };
  }
}

// ASCII JSON: every non-ASCII character as a \u escape (docs/stdio-protocol.md).
const ascii = (value) => JSON.stringify(value).replace(/[\u007f-\uffff]/g,
  (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));

async function serve() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    let request;
    try { request = JSON.parse(line); } catch {
      process.stdout.write(ascii({ ok: false, code: "STDIO_REQUEST_INVALID", error: "not JSON" }) + "\n");
      continue;
    }
    const reply = await answer(request);
    process.stdout.write(ascii(reply) + "\n");
    if (request.op === "bye") break;
  }
  process.exitCode = 0;
}

serve();
