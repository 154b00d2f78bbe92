// The §7 budget of an Agent, which LangChain has no notion of (adapter-supplied): W, O, S, B and
// the trigger floor(B × r) in exact integers, r read from its decimal text.
"use strict";

class Refused extends Error {
  constructor(code, text) { super(`${code}: ${text}`); this.code = code; }
}

function budget(agent) {
  const W = agent.window;
  const O = agent.output_reserve ?? Math.min(agent.max_output ?? 4096, Math.floor(W / 4));
  const S = agent.safety_margin ?? Math.max(256, Math.ceil(W / 100));
  const B = W - O - S;
  if (B <= 0) {
    throw new Refused("BUDGET_CONFIGURATION_INVALID", `window ${W} leaves no input budget after output reserve ${O} and safety margin ${S}`);
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

module.exports = { budget, Refused };
