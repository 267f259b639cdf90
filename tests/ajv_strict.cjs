// Compiles every schema with ajv in strict draft 2020-12 mode (an independent validator with
// the strictest keyword and type checks), then checks examples and the schema corpus
// (tests/schema-corpus/index.json) as python-jsonschema does: ECMA-262 regular expressions are
// the JSON Schema dialect, Python's `re` another, and the schemas' patterns must mean the same
// in both.
const path = require("path");
const fs = require("fs");
const Ajv2020 = require(path.join(__dirname, ".node", "node_modules", "ajv", "dist", "2020"));

const root = path.resolve(__dirname, "..");
const folders = {
  "work-unit": "examples/work-units",
  "agent-preset": "examples/presets",
  "connections": "examples/connections",
  "result-manifest": "examples/manifests",
  "probe-report": "examples/reports/probe",
  "admission-report": "examples/reports/admission",
  "verify-report": "examples/reports/verify",
};
let passed = 0, failed = 0;
const validators = {};
for (const [name, folder] of Object.entries(folders)) {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const schema = JSON.parse(fs.readFileSync(path.join(root, "schemas", `${name}.schema.json`)));
  let validate;
  try {
    validate = ajv.compile(schema);
    validators[name] = validate;
    passed++;
  } catch (e) {
    console.log(`FAIL ${name}: ajv strict refuses the schema: ${e.message}`);
    failed++;
    continue;
  }
  const check = (dir, expectValid) => {
    for (const f of fs.readdirSync(path.join(root, dir)).filter((f) => f.endsWith(".json"))) {
      const ok = validate(JSON.parse(fs.readFileSync(path.join(root, dir, f))));
      if (ok === expectValid) passed++;
      else { console.log(`FAIL ${dir}/${f}: expected ${expectValid ? "valid" : "invalid"}`); failed++; }
    }
  };
  check(folder, true);
  check(`examples/invalid/${name}`, false);
}
const corpus = path.join(root, "tests", "schema-corpus");
const index = JSON.parse(fs.readFileSync(path.join(corpus, "index.json")));
for (const c of index.cases) {
  const kind = c.file.split("/")[0];
  const validate = validators[kind];
  if (!validate) { console.log(`FAIL corpus ${c.file}: no schema ${kind}`); failed++; continue; }
  const ok = validate(JSON.parse(fs.readFileSync(path.join(corpus, c.file))));
  if (ok === (c.expect !== "schema_rejects")) passed++;
  else { console.log(`FAIL corpus ${c.file}: labelled ${c.expect}, ajv says ${ok ? "valid" : "invalid"}`); failed++; }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
