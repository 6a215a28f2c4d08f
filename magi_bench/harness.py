"""Interleaved timing runs: every contender is timed once per round, round-robin, with the
starting contender rotating each round, so drift (clocks, thermals, neighbours) hits all
contenders alike instead of whichever ran last.

Phases, all under ``torch.no_grad()``: (1) one contender after the other, the first call
(compile + run, wall time); (2) ``warmup`` untimed rounds; (3) one output check against
eager; (4) ``iterations`` timed rounds (counting, outside the timed region, the calls that ran
Magi's swapped-in bytecode), with Python's garbage collector paused (as ``timeit``
does) so a collection cannot land in one contender's sample. Compile counters are read around every call, outside
the timed region, so graphs compiled during timing are reported, not hidden. A skipped
contender (no ``call``) is carried through with its reason and no samples.

:func:`run_dynamic_batches` is the other harness: every contender, built fresh, is called on
a sequence of batch sizes (first pass: compiles, recompiles and CUDA-graph recordings
included), then again for steady-state passes.
"""

from __future__ import annotations

import dataclasses
import gc
import time

import torch

from magi_bench.contenders import Contender
from magi_bench.progress import Progress
from magi_bench.timers import Timer

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
    skipped: str | None = None


def skipped_run(contender: Contender) -> ContenderRun:
    """The run of a contender that cannot run here: its reason, no samples."""
    assert contender.skipped, f"{contender.name} is not skipped"
    return ContenderRun(
        name=contender.name,
        entry=contender.entry,
        samples=[],
        first_call_s=0.0,
        graphs_compiled=0,
        graphs_compiled_while_timed=0,
        swapped_calls_while_timed=0,
        max_abs_diff=0.0,
        rel_error=0.0,
        outputs_match=True,
        skipped=contender.skipped,
    )


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
    """Time every contender on ``x``; the first contender must be ``eager`` (the output reference).
    Skipped contenders come back in their place with their reason and no samples."""
    everyone = contenders
    contenders = [c for c in everyone if c.skipped is None]
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
    runs = {
        c.name: ContenderRun(
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
    }
    return [runs[c.name] if c.skipped is None else skipped_run(c) for c in everyone]


@dataclasses.dataclass
class DynamicRun:
    """One contender on a sequence of batch sizes: wall time of the compiling call before the
    passes, of each pass over the sequence (the first includes the recordings of its sizes),
    graphs compiled by the compiling call and the first pass and in the later passes (check
    pass included), and the worst relative error against eager."""

    name: str
    entry: str
    pass_s: list[float]
    graphs_compiled_first_pass: int
    graphs_compiled_later: int
    rel_error: float
    outputs_match: bool
    skipped: str | None = None
    compile_call_s: float = 0.0


def run_dynamic_batches(
    contenders: list[Contender],
    inputs: list[torch.Tensor],
    timer: Timer,
    passes: int,
    progress: Progress,
    compile_input: torch.Tensor,
) -> list[DynamicRun]:
    """Call every fresh (never called) contender once on ``compile_input`` (timed alone: it
    compiles; its batch size should not be one of ``inputs``'), then on ``inputs`` in order,
    ``passes`` timed times; contenders take turns pass by pass, the starting one rotating. The
    first contender must be ``eager``; an untimed pass after them compares every output with
    eager's.

    Before any of that, eager runs once at every batch size up to ``compile_input``'s: state
    that libraries build on the first call at a shape (cuDNN's attention plans, cuBLAS's
    heuristics) is process-wide, so without it the first contender to meet a shape pays for the
    others, and the contenders that pad to capture sizes meet shapes nobody else calls."""
    if passes < 2:
        raise ValueError(f"need passes >= 2 (one with compiles, one steady), got {passes}")
    assert contenders and contenders[0].name == "eager", "eager must come first: it is the output reference"
    runnable = [c for c in contenders if c.skipped is None]
    for x in (compile_input, *inputs):
        torch._dynamo.mark_dynamic(x, 0)
    pass_s: dict[str, list[float]] = {c.name: [] for c in runnable}
    compile_s = dict.fromkeys(pass_s, 0.0)
    compiled = {c.name: [0, 0] for c in runnable}
    errors = dict.fromkeys(pass_s, 0.0)
    match = dict.fromkeys(pass_s, True)
    with torch.no_grad():
        for batch in range(1, compile_input.shape[0] + 1):
            contenders[0].call(compile_input[:batch])
        references = [contenders[0].call(x).clone() for x in inputs]
        for contender in runnable:
            count = contender.graph_count()
            timer.synchronize()
            start = time.perf_counter()
            contender.call(compile_input)
            timer.synchronize()
            compile_s[contender.name] = time.perf_counter() - start
            compiled[contender.name][0] += contender.graph_count() - count
        for pass_index in range(passes):
            shift = pass_index % len(runnable)
            for contender in runnable[shift:] + runnable[:shift]:
                count = contender.graph_count()
                timer.synchronize()
                start = time.perf_counter()
                for x in inputs:
                    contender.call(x)
                timer.synchronize()
                pass_s[contender.name].append(time.perf_counter() - start)
                compiled[contender.name][min(pass_index, 1)] += contender.graph_count() - count
            progress.update("dynamic batch: passes", pass_index + 1, passes)
        for contender in runnable:  # untimed check pass
            count = contender.graph_count()
            for x, reference in zip(inputs, references, strict=True):
                # compared at once: a replayed CUDA graph reuses its output memory
                check = compare_outputs(contender.call(x), reference)
                errors[contender.name] = max(errors[contender.name], check.rel_error)
                match[contender.name] &= check.match
            compiled[contender.name][1] += contender.graph_count() - count
    runs = {
        c.name: DynamicRun(
            c.name,
            c.entry,
            pass_s[c.name],
            compiled[c.name][0],
            compiled[c.name][1],
            errors[c.name],
            match[c.name],
            compile_call_s=compile_s[c.name],
        )
        for c in runnable
    }
    return [
        runs[c.name] if c.skipped is None else DynamicRun(c.name, c.entry, [], 0, 0, 0.0, True, c.skipped)
        for c in contenders
    ]
