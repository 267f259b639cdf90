#!/usr/bin/env python3
"""Validates OCI runtime bundle config.json files against the runtime-spec JSON Schema.

Usage: validate_oci_config.py SCHEMA_DIR FILE...
SCHEMA_DIR holds config-schema.json and the defs*.json it references (Debian package
golang-github-opencontainers-specs-dev, installed by scripts/setup.sh). Exit 0 when every
file is valid; otherwise one line per problem and exit 1.
"""
import json
import pathlib
import sys

from jsonschema import Draft4Validator


def main() -> int:
    schema_dir = pathlib.Path(sys.argv[1]).resolve()
    base = schema_dir.as_uri() + "/"
    docs = {base + f.name: json.loads(f.read_text()) for f in schema_dir.glob("*.json")}
    schema = docs[base + "config-schema.json"]
    schema["id"] = base + "config-schema.json"  # relative $refs resolve beside it
    try:  # jsonschema >= 4.18
        from referencing import Registry, Resource
        from referencing.jsonschema import DRAFT4

        registry = Registry().with_resources(
            (uri, Resource(doc, specification=DRAFT4)) for uri, doc in docs.items()
        )
        validator = Draft4Validator(schema, registry=registry)
    except ImportError:  # older jsonschema (Debian's python3-jsonschema)
        from jsonschema import RefResolver

        validator = Draft4Validator(schema, resolver=RefResolver(base, schema, store=docs))
    failed = 0
    for name in sys.argv[2:]:
        errors = sorted(
            validator.iter_errors(json.loads(pathlib.Path(name).read_text())),
            key=lambda e: list(map(str, e.path)),
        )
        for e in errors:
            print(f"{name}: {'/'.join(map(str, e.path))}: {e.message}")
        print(f"{name}: {'invalid' if errors else 'valid'}")
        failed += bool(errors)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
