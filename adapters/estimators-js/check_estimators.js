#!/usr/bin/env node
// Checks estimators.js against every vector of spec/estimators.json; prints one JSON line per
// vector ({ id, expected, counted, texts_match }) and exits 1 if any differs.
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const { estimate, scenarioTexts } = require("./estimators.js");

const file = path.join(__dirname, "..", "..", "spec", "estimators.json");
let wrong = 0;
for (const vector of JSON.parse(fs.readFileSync(file, "utf8")).vectors) {
  const texts = vector.estimator === "content" ? scenarioTexts(vector.scenario) : null;
  const counted = estimate(vector.estimator, vector.request, texts);
  const textsMatch = texts === null || JSON.stringify(texts) === JSON.stringify(vector.texts);
  if (counted !== vector.tokens || !textsMatch) wrong += 1;
  process.stdout.write(JSON.stringify({ id: vector.id, expected: vector.tokens, counted, texts_match: textsMatch }) + "\n");
}
process.exit(wrong ? 1 : 0);
