"""Checks of a bench JSON document, shared by the regression test and machines without pytest:
``python -m magi_compiler.bench.check bench.json [--stability]`` prints each problem and exits 1
if there is any.

Contract (any device): schema-valid; every contender of every timing section present, with
one sample per round, outputs matching eager; every compiled entry compiled exactly one graph
and none while timed; with the bytecode swap on (the default), every timed call of a Magi entry
ran the swapped-in bytecode. Stability (meaningful on GPU only): every contender's max/min < bound.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from magi_compiler.bench.contenders import CONTENDER_NAMES
from magi_compiler.bench.report import validate_document

STABILITY_BOUND = 1.2


def contract_problems(doc: dict[str, Any]) -> list[str]:
    """Everything that breaks the harness contract; empty when it holds."""
    try:
        validate_document(doc)
    except ValueError as err:
        return [str(err)]
    problems = []
    swap_on = doc["settings"].get("magi_bytecode_swap", True)
    for section_name in ("latency", "dispatch"):
        section = doc[section_name]
        if section is None:
            continue
        names = [c["name"] for c in section["contenders"]]
        if names != list(CONTENDER_NAMES):
            problems.append(f"{section_name}: contenders {names}, expected {list(CONTENDER_NAMES)}")
        for c in section["contenders"]:
            where = f"{section_name}.{c['name']}"
            if not c["outputs_match"]:
                problems.append(
                    f"{where}: output differs from eager (relative error {c['rel_error']:.3g}, max abs diff {c['max_abs_diff']:.3g})"
                )
            expected = 0 if c["name"] == "eager" else 1
            if c["graphs_compiled"] != expected:
                problems.append(f"{where}: compiled {c['graphs_compiled']} graph(s), expected {expected}")
            if c["graphs_compiled_while_timed"]:
                problems.append(f"{where}: compiled {c['graphs_compiled_while_timed']} graph(s) while timed")
            timed_calls = section["iterations"] * section["calls_per_sample"]
            swapped = c["swapped_calls_while_timed"]
            if swap_on and c["name"].startswith("magi_") and swapped != timed_calls:
                problems.append(f"{where}: {swapped} of {timed_calls} timed calls ran the swapped-in bytecode")
    return problems


def stability_problems(doc: dict[str, Any], bound: float = STABILITY_BOUND) -> list[str]:
    """Every contender of the latency section whose max/min reaches ``bound``."""
    section = doc["latency"]
    if section is None:
        return ["no latency section"]
    return [
        f"latency.{c['name']}: max/min {c['summary']['max_over_min']:.3f} >= {bound}"
        for c in section["contenders"]
        if c["summary"]["max_over_min"] >= bound
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magi_compiler.bench.check", description=__doc__)
    parser.add_argument("json_path")
    parser.add_argument("--stability", action="store_true", help=f"also check max/min < {STABILITY_BOUND}")
    args = parser.parse_args(argv)
    with open(args.json_path, encoding="utf-8") as handle:
        doc = json.load(handle)
    problems = contract_problems(doc) + (stability_problems(doc) if args.stability else [])
    for problem in problems:
        print(f"FAIL {problem}")
    print("contract: " + ("ok" if not contract_problems(doc) else "FAILED"))
    if args.stability:
        print("stability: " + ("ok" if not stability_problems(doc) else "FAILED"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
