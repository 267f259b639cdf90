#!/usr/bin/env python3
"""Validates examples/ against schemas/ with an independent validator (python-jsonschema).

Every document under a valid folder must pass; every document under examples/invalid/<name>/
must fail. Exits non-zero on any surprise, and prints a closing count line.
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

passed = failed = 0
for name, folder in VALID.items():
    schema = json.loads((ROOT / "schemas" / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
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

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
