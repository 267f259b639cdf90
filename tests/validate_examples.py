#!/usr/bin/env python3
"""Validates examples/ against schemas/ with an independent validator (python-jsonschema).

Every document under a valid folder must pass; every document under examples/invalid/<name>/
must fail. Then the schema corpus (tests/schema-corpus/index.json): the schema must reject
exactly the `schema_rejects` cases and accept the `admitted` and `admission_only` ones, and
every companion document a case names (crates/corral-admission/tests/schema_corpus.rs checks
admission's side). Exits non-zero on any surprise, and prints a closing count line.
"""
import json
import pathlib
import sys

from jsonschema import Draft202012Validator

ROOT = pathlib.Path(__file__).resolve().parent.parent
VALID = {
    "work-unit": "examples/work-units",
    "agent-preset": "examples/presets",
    "connections": "examples/connections",
    "result-manifest": "examples/manifests",
    "probe-report": "examples/reports/probe",
    "admission-report": "examples/reports/admission",
    "verify-report": "examples/reports/verify",
}

def validator_for(name):
    schema = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


passed = failed = 0
for name, folder in VALID.items():
    validator = validator_for(name)
    valid = sorted((ROOT / folder).glob("*.json"))
    invalid = sorted((ROOT / "examples" / "invalid" / name).glob("*.json"))
    if not valid or not invalid:
        print(f"FAIL {name}: needs at least one valid and one invalid example")
        failed += 1
    for path in valid:
        errors = list(validator.iter_errors(json.loads(path.read_text())))
        if errors:
            print(f"FAIL {path.relative_to(ROOT)} should be valid: {errors[0].message}")
            failed += 1
        else:
            passed += 1
    for path in invalid:
        if validator.is_valid(json.loads(path.read_text())):
            print(f"FAIL {path.relative_to(ROOT)} should be invalid but passes the schema")
            failed += 1
        else:
            passed += 1

CORPUS = ROOT / "tests" / "schema-corpus"
KINDS = ("work-unit", "agent-preset", "connections")
validators = {kind: validator_for(kind) for kind in KINDS}
index = json.loads((CORPUS / "index.json").read_text())
counts = {"admitted": 0, "schema_rejects": 0, "admission_only": 0}
listed = set()
for case in index["cases"]:
    rel, expect = case["file"], case["expect"]
    kind = rel.split("/")[0]
    listed.add(rel)
    if kind not in KINDS or expect not in counts or (expect != "admitted") != ("code" in case):
        print(f"FAIL corpus {rel}: malformed case {case}")
        failed += 1
        continue
    counts[expect] += 1
    errors = list(validators[kind].iter_errors(json.loads((CORPUS / rel).read_text())))
    if expect == "schema_rejects" and not errors:
        print(f"FAIL corpus {rel}: the schema accepts it, but it is labelled schema_rejects ({case['code']})")
        failed += 1
    elif expect != "schema_rejects" and errors:
        print(f"FAIL corpus {rel}: labelled {expect}, but the schema rejects it: {errors[0].message}")
        failed += 1
    else:
        passed += 1
    # Every companion is a document admission reads with this one: the schema accepts it.
    companions = dict(index["defaults"], **case.get("with", {}))
    for other, path in companions.items():
        if other != kind and path and not validators[other].is_valid(json.loads((CORPUS / path).read_text())):
            print(f"FAIL corpus {rel}: its companion {path} does not pass the {other} schema")
            failed += 1
unlisted = {str(p.relative_to(CORPUS)) for p in CORPUS.glob("*/*.json")} - listed
for rel in sorted(unlisted):
    print(f"FAIL corpus {rel}: not in index.json")
    failed += 1
print("schema corpus: " + ", ".join(f"{n} {k}" for k, n in counts.items()))

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
