"""Interleaved timing runs: every contender is timed once per round, round-robin, with the
starting contender rotating each round, so drift (clocks, thermals, neighbours) hits all
contenders alike instead of whichever ran last.

Phases, all under ``torch.no_grad()``: (1) one contender after the other, the first call
(compile + run, wall time); (2) ``warmup`` untimed rounds; (3) one output check against
eager; (4) ``iterations`` timed rounds (counting, outside the timed region, the calls that ran
Magi's swapped-in bytecode), with Python's garbage collector paused (as ``timeit``
does) so a collection cannot land in one contender's sample. Compile counters are read around every call, outside
the timed region, so graphs compiled during timing are reported, not hidden.
"""

from __future__ import annotations

import dataclasses
import gc
import time

import torch

from magi_compiler.bench.contenders import Contender
from magi_compiler.bench.progress import Progress
from magi_compiler.bench.timers import Timer

# Bound on the relative L2 error ||out - eager|| / ||eager||: robust to the few elements where
# fused low-precision kernels round differently, which an elementwise bound is not.
REL_ERROR_BOUND = {torch.float32: 1e-4, torch.float16: 5e-3, torch.bfloat16: 2e-2}


@dataclasses.dataclass
class ContenderRun:
    """One contender's result; ``samples`` are per-call milliseconds."""

    name: str
    entry: str
    samples: list[float]
    first_call_s: float
    graphs_compiled: int
    graphs_compiled_while_timed: int
    swapped_calls_while_timed: int
    max_abs_diff: float
    rel_error: float
    outputs_match: bool


@dataclasses.dataclass(frozen=True)
class OutputCheck:
    max_abs_diff: float
    rel_error: float
    match: bool


def compare_outputs(out: torch.Tensor, reference: torch.Tensor) -> OutputCheck:
    """``out`` against eager's ``reference``: shape and dtype equal, relative L2 error within the dtype's bound."""
    if out.shape != reference.shape or out.dtype != reference.dtype:
        return OutputCheck(float("inf"), float("inf"), False)
    diff = out.float() - reference.float()
    max_abs = diff.abs().max().item() if diff.numel() else 0.0
    norm = reference.float().norm().item()
    rel = diff.norm().item() / norm if norm else diff.norm().item()
    return OutputCheck(max_abs, rel, rel <= REL_ERROR_BOUND.get(reference.dtype, 1e-4))


def run_interleaved(
    contenders: list[Contender],
    x: torch.Tensor,
    timer: Timer,
    iterations: int,
    warmup: int,
    progress: Progress,
    calls_per_sample: int = 1,
    label: str = "latency",
) -> list[ContenderRun]:
    """Time every contender on ``x``; the first contender must be ``eager`` (the output reference)."""
    if iterations < 1 or warmup < 0 or calls_per_sample < 1:
        raise ValueError(
            f"need iterations >= 1, warmup >= 0, calls_per_sample >= 1; got {iterations}, {warmup}, {calls_per_sample}"
        )
    assert contenders and contenders[0].name == "eager", "eager must come first: it is the output reference"
    torch._dynamo.mark_dynamic(x, 0)
    first_call_s: dict[str, float] = {}
    compiled = {c.name: 0 for c in contenders}
    compiled_while_timed = dict.fromkeys(compiled, 0)
    swapped_while_timed = dict.fromkeys(compiled, 0)
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    with torch.no_grad():
        for index, contender in enumerate(contenders, 1):
            progress.stage(f"{label}: first call (compile) of {contender.name} ({index}/{len(contenders)})")
            count = contender.graph_count()
            start = time.perf_counter()
            contender.call(x)
            timer.synchronize()
            first_call_s[contender.name] = time.perf_counter() - start
            compiled[contender.name] += contender.graph_count() - count
        progress.stage(f"{label}: {warmup} warm-up rounds")
        for _ in range(warmup):
            for contender in contenders:
                count = contender.graph_count()
                contender.call(x)
                compiled[contender.name] += contender.graph_count() - count
        timer.synchronize()
        reference = contenders[0].call(x)
        checks = {c.name: compare_outputs(c.call(x), reference) for c in contenders}
        gc.collect()
        gc.disable()
        try:
            for round_index in range(iterations):
                shift = round_index % len(contenders)
                for contender in contenders[shift:] + contenders[:shift]:
                    count, swaps = contender.graph_count(), contender.swap_count()
                    elapsed_ms, _ = timer.time_batch(contender.call, calls_per_sample, x)
                    compiled_while_timed[contender.name] += contender.graph_count() - count
                    swapped_while_timed[contender.name] += contender.swap_count() - swaps
                    samples[contender.name].append(elapsed_ms / calls_per_sample)
                progress.update(f"{label}: timed rounds", round_index + 1, iterations)
        finally:
            gc.enable()
    return [
        ContenderRun(
            name=c.name,
            entry=c.entry,
            samples=samples[c.name],
            first_call_s=first_call_s[c.name],
            graphs_compiled=compiled[c.name],
            graphs_compiled_while_timed=compiled_while_timed[c.name],
            swapped_calls_while_timed=swapped_while_timed[c.name],
            max_abs_diff=checks[c.name].max_abs_diff,
            rel_error=checks[c.name].rel_error,
            outputs_match=checks[c.name].match,
        )
        for c in contenders
    ]
