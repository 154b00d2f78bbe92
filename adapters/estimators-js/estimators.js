// The estimators of docs/implementing-a-driver.md "Exact token arithmetic" (chars, bytes,
// content), written from that page alone; check_estimators.js checks them against every vector
// of spec/estimators.json. A request is { messages: [{ role, text }], tool_schemas: [text] }.
"use strict";

const WORD = /[\p{L}\p{Nd}\p{Nl}\p{No}_]/u;
const OPAQUE = new Set(["name", "point", "target", "field", "operation", "scope", "decision",
  "estimator", "commit", "when", "purpose", "tool", "media_type", "path", "trigger_ratio",
  "on_error", "question_key", "output_key", "stop_after", "session", "role", "consumers", "fail",
  "scenario_version", "description", "kind", "error", "audit_readers", "phase"]);
const FREE = new Set(["arguments", "input", "value", "workspace_writes"]);

const points = (text) => Array.from(text);
const isWord = (c) => c !== undefined && WORD.test(c);

function chars(request) {
  return request.messages.reduce((n, m) => n + points(m.text).length, 0)
    + (request.tool_schemas ?? []).reduce((n, s) => n + points(s).length, 0);
}

function utf8(text) {
  // A lone surrogate counts as its 3-byte encoded form, as Buffer.byteLength does (U+FFFD).
  return Buffer.byteLength(text, "utf8");
}

function bytes(request) {
  return 8 + request.messages.reduce((n, m) => n + utf8(m.role) + utf8(m.text) + 8, 0)
    + (request.tool_schemas ?? []).reduce((n, s) => n + utf8(s) + 16, 0);
}

// --- content: the scenario's own texts ---------------------------------------------------
function scenarioTexts(scenario) {
  const found = new Set();
  const take = (value) => { if (typeof value === "string" && points(value).some(isWord)) found.add(value); };
  const all = (value) => {
    if (typeof value === "string") take(value);
    else if (Array.isArray(value)) value.forEach(all);
    else if (value && typeof value === "object") Object.values(value).forEach(all);
  };
  const descriptions = (value) => {
    if (Array.isArray(value)) value.forEach(descriptions);
    else if (value && typeof value === "object") {
      for (const [key, inner] of Object.entries(value)) {
        if (key === "description") take(inner); else descriptions(inner);
      }
    }
  };
  const walk = (value) => {
    if (typeof value === "string") take(value);
    else if (Array.isArray(value)) value.forEach(walk);
    else if (value && typeof value === "object") {
      for (const [key, inner] of Object.entries(value)) {
        if (FREE.has(key)) all(inner);
        else if (key === "schema") descriptions(inner);
        else if (!OPAQUE.has(key)) walk(inner);
      }
    }
  };
  walk(scenario);
  return [...found].sort((a, b) => points(b).length - points(a).length || codePointOrder(a, b));
}

function codePointOrder(a, b) {
  const x = points(a), y = points(b);
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d !== 0) return d;
  }
  return x.length - y.length;
}

function contentCount(text, texts) {
  const cps = points(text);
  const whole = texts.map(points);
  let count = 0;
  let stretch = [];
  const flush = () => { count += runs(stretch, texts); stretch = []; };
  for (let i = 0; i < cps.length;) {
    const hit = whole.find((t) => t.length > 0 && !isWord(cps[i - 1]) && !isWord(cps[i + t.length])
      && t.every((c, k) => cps[i + k] === c));
    if (hit) { flush(); count += hit.length; i += hit.length; } else { stretch.push(cps[i]); i += 1; }
  }
  flush();
  return count;
}

function runs(stretch, texts) {
  // From the left: the longest run of at least 8 characters found inside one scenario text.
  let count = 0;
  for (let i = 0; i < stretch.length;) {
    const inside = (length) => { const piece = stretch.slice(i, i + length).join(""); return texts.some((t) => t.includes(piece)); };
    if (stretch.length - i < 8 || !inside(8)) { i += 1; continue; }
    let low = 8, high = stretch.length - i;
    while (low < high) { const mid = Math.ceil((low + high) / 2); if (inside(mid)) low = mid; else high = mid - 1; }
    count += low;
    i += low;
  }
  return count;
}

function content(request, texts) {
  return request.messages.reduce((n, m) => n + contentCount(m.text, texts), 0)
    + (request.tool_schemas ?? []).reduce((n, s) => n + contentCount(s, texts), 0);
}

function estimate(name, request, texts) {
  if (name === "chars") return chars(request);
  if (name === "bytes") return bytes(request);
  if (name === "content") return content(request, texts);
  throw new Error(`no estimator ${name}`);
}

module.exports = { estimate, scenarioTexts };
