// Compiles every schema with ajv in strict draft 2020-12 mode (an independent validator with
// the strictest keyword and type checks), then checks examples as python-jsonschema does.
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
for (const [name, folder] of Object.entries(folders)) {
  const ajv = new Ajv2020({ strict: true, allErrors: true });
  const schema = JSON.parse(fs.readFileSync(path.join(root, "schemas", `${name}.schema.json`)));
  let validate;
  try {
    validate = ajv.compile(schema);
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
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
