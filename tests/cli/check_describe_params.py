"""Validates `bmoe-cli --describe-params` against its JSON schema.

usage: check_describe_params.py SCHEMA.json BMOE-CLI
Exits 0 when the document is valid, 1 with the first error otherwise.
"""
import json
import subprocess
import sys

import jsonschema  # Debian: python3-jsonschema (scripts/setup.sh installs it)


def main() -> int:
    schema_path, cli = sys.argv[1], sys.argv[2]
    with open(schema_path, encoding="utf-8") as f:
        schema = json.load(f)
    jsonschema.Draft202012Validator.check_schema(schema)
    run = subprocess.run([cli, "--describe-params"], capture_output=True, check=False)
    if run.returncode != 0 or run.stderr:
        print(f"--describe-params: exit {run.returncode}, stderr {run.stderr!r}")
        return 1
    document = json.loads(run.stdout)
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(document), key=lambda e: list(e.path))
    for error in errors[:5]:
        print(f"{list(error.path)}: {error.message}")
    keys = [p["key"] for p in document["params"] if p["available"]]
    if len(keys) != len(set(keys)):
        print("duplicate keys")
        return 1
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
