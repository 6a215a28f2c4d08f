"""Checks of a bench JSON document, shared by the regression test and machines without pytest:
``python -m magi_bench.check bench.json [--stability]`` prints each problem and exits 1
if there is any.

Contract (any device): schema-valid; every contender of every timing section present, with
one sample per round, outputs matching eager, or skipped with a reason (only contenders that
need what is missing here may be skipped: never eager, torch.compile or the three Magi entry
points, and never reduce-overhead on CUDA); every compiled entry compiled exactly one graph
and none while timed; with the bytecode swap on (the default), every timed call of a Magi
entry ran the swapped-in bytecode. Dynamic section: outputs match eager and nothing compiles
after the first pass.

Stability: for the contenders of the latency and attention sections, a spread over 4 blocks
of consecutive calls (:mod:`magi_bench.stats`) stays below a bound. On CUDA, for every
contender, the block medians' spread stays below 1.2. On CPU, for every compiled contender,
the spread of its block lower quartiles divided by eager's in the same rounds stays below 1.5:
a shared CPU runner's load slows part of a block's calls (which moves medians, not lower
quartiles) or a whole stretch of rounds (which slows eager in the same rounds and cancels); a
program whose own calls drift, recompile or re-record moves it all the same.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from magi_bench.contenders import CONTENDER_NAMES, MAGI_CONTENDERS
from magi_bench.report import TIMING_SECTIONS, validate_document

# device type -> (statistic, bound, whether eager is bounded too)
STABILITY = {"cuda": ("block_median_spread", 1.2, True), "cpu": ("relative_block_p25_spread", 1.5, False)}
NEVER_SKIPPED = ("eager", "torch_compile", "magi_class", "magi_function", "magi_method")


def stability_rule(doc: dict[str, Any]) -> tuple[str, float, bool]:
    """The statistic, bound and whether eager is bounded, for the document's device."""
    return STABILITY["cuda" if doc["environment"]["device"] == "cuda" else "cpu"]


def _statistic(contender: dict[str, Any], statistic: str) -> float:
    return contender["summary"][statistic] if statistic in contender["summary"] else contender[statistic]


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
    """Every bounded contender of the latency and attention sections whose statistic (see
    :func:`stability_rule`) reaches ``bound`` (default: the device's bound)."""
    statistic, default_bound, eager_bounded = stability_rule(doc)
    bound = default_bound if bound is None else bound
    sections = [name for name in ("latency", "attention") if doc[name] is not None]
    if not sections:
        return ["no latency or attention section"]
    return [
        f"{name}.{c['name']}: {statistic} {_statistic(c, statistic):.3f} >= {bound} "
        f"(over {c['summary']['blocks']} blocks of consecutive calls)"
        for name in sections
        for c in doc[name]["contenders"]
        if c["skipped"] is None and (eager_bounded or c["name"] != "eager") and _statistic(c, statistic) >= bound
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m magi_bench.check", description=__doc__)
    parser.add_argument("json_path")
    parser.add_argument(
        "--stability",
        action="store_true",
        help="also check the block spread: medians < 1.2 (CUDA), lower quartiles relative to eager < 1.5 (CPU)",
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
