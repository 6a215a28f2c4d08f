"""Checks of a bench JSON document, shared by the regression test and machines without pytest:
``python -m magi_compiler.bench.check bench.json [--stability]`` prints each problem and exits 1
if there is any.

Contract (any device): schema-valid; every contender of every timing section present, with
one sample per round, outputs matching eager, or skipped with a reason (only contenders that
need what is missing here may be skipped: never eager, torch.compile or the three Magi entry
points, and never reduce-overhead on CUDA); every compiled entry compiled exactly one graph
and none while timed; with the bytecode swap on (the default), every timed call of a Magi
entry ran the swapped-in bytecode. Dynamic section: outputs match eager and nothing compiles
after the first pass.

Stability: for every contender of the latency and attention sections, a spread over the
blocks of consecutive calls (:mod:`magi_compiler.bench.stats`) stays below a bound: on CUDA the
block medians' spread below 1.2; on CPU the block lower quartiles' spread below 1.5 (bursts of
load on a shared CPU runner slow part of a block's calls, which moves medians; a program whose
calls drift, recompile or re-record still moves the lower quartiles).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from magi_compiler.bench.contenders import CONTENDER_NAMES, MAGI_CONTENDERS
from magi_compiler.bench.report import TIMING_SECTIONS, validate_document

# device type -> (summary statistic, bound)
STABILITY = {"cuda": ("block_median_spread", 1.2), "cpu": ("block_p25_spread", 1.5)}
NEVER_SKIPPED = ("eager", "torch_compile", "magi_class", "magi_function", "magi_method")


def stability_rule(doc: dict[str, Any]) -> tuple[str, float]:
    """The statistic and bound of the stability check for the document's device."""
    return STABILITY["cuda" if doc["environment"]["device"] == "cuda" else "cpu"]


def _skip_problem(where: str, contender: dict[str, Any], device: str) -> str | None:
    name, reason = contender["name"], contender["skipped"]
    if not reason.strip():
        return f"{where}: skipped without a reason"
    if name in NEVER_SKIPPED or (name == "torch_compile_reduce_overhead" and device == "cuda"):
        return f"{where}: skipped ({reason}), but it must run on {device}"
    return None


def contract_problems(doc: dict[str, Any]) -> list[str]:
    """Everything that breaks the harness contract; empty when it holds."""
    try:
        validate_document(doc)
    except ValueError as err:
        return [str(err)]
    problems = []
    swap_on = doc["settings"].get("magi_bytecode_swap", True)
    device = doc["environment"]["device"]
    for section_name in (*TIMING_SECTIONS, "dynamic"):
        section = doc[section_name]
        if section is None:
            continue
        names = [c["name"] for c in section["contenders"]]
        if names != list(CONTENDER_NAMES):
            problems.append(f"{section_name}: contenders {names}, expected {list(CONTENDER_NAMES)}")
        for c in section["contenders"]:
            where = f"{section_name}.{c['name']}"
            if c["skipped"] is not None:
                problem = _skip_problem(where, c, device)
                if problem:
                    problems.append(problem)
                continue
            if not c["outputs_match"]:
                problems.append(f"{where}: output differs from eager (relative error {c['rel_error']:.3g})")
            if section_name == "dynamic":
                if c["graphs_compiled_later"]:
                    problems.append(f"{where}: compiled {c['graphs_compiled_later']} graph(s) after the first pass")
                continue
            expected = 0 if c["name"] == "eager" else 1
            if c["graphs_compiled"] != expected:
                problems.append(f"{where}: compiled {c['graphs_compiled']} graph(s), expected {expected}")
            if c["graphs_compiled_while_timed"]:
                problems.append(f"{where}: compiled {c['graphs_compiled_while_timed']} graph(s) while timed")
            timed_calls = section["iterations"] * section["calls_per_sample"]
            swapped = c["swapped_calls_while_timed"]
            if swap_on and c["name"] in MAGI_CONTENDERS and swapped != timed_calls:
                problems.append(f"{where}: {swapped} of {timed_calls} timed calls ran the swapped-in bytecode")
    return problems


def stability_problems(doc: dict[str, Any], bound: float | None = None) -> list[str]:
    """Every contender of the latency and attention sections whose block spread (the
    statistic of :func:`stability_rule`) reaches ``bound`` (default: the device's bound)."""
    statistic, default_bound = stability_rule(doc)
    bound = default_bound if bound is None else bound
    sections = [name for name in ("latency", "attention") if doc[name] is not None]
    if not sections:
        return ["no latency or attention section"]
    return [
        f"{name}.{c['name']}: {statistic} {c['summary'][statistic]:.3f} >= {bound} "
        f"(over {c['summary']['blocks']} blocks of consecutive calls)"
        for name in sections
        for c in doc[name]["contenders"]
        if c["skipped"] is None and c["summary"][statistic] >= bound
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magi_compiler.bench.check", description=__doc__)
    parser.add_argument("json_path")
    parser.add_argument(
        "--stability",
        action="store_true",
        help="also check the block spread: medians < 1.2 (CUDA), lower quartiles < 1.5 (CPU)",
    )
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
