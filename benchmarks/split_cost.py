"""What splitting at a registered op costs at a compute-bound shape: magi_bench's AttentionModel
(attention as the registered op ``magi_bench::attention``) through eager, ``torch.compile``,
``@magi_compile`` split at the op (the default for this model) and ``@magi_compile`` unsplit
(no splitting ops: the op is called from one compiled graph, as ``torch.compile`` calls it), all
without CUDA graphs, in one process.

Timing: a round takes one sample of every contender (``--calls`` back-to-back calls; on CUDA
timed with events after a synchronize), starting one contender further each round; Python's
garbage collector is off while timing. Printed per contender: the median and minimum per call
over the rounds and the ratio of medians to ``torch.compile`` and to eager; then, because rounds
share the machine's state, the paired figure: per round, split over ``torch.compile`` (and over
unsplit, and over eager), its median and its 10th-90th percentile over the rounds.

``--graphs`` (CUDA) adds Magi with ``cudagraph_mode`` PIECEWISE and FULL (one capture size, the
batch: the default list's largest sizes do not fit in memory at this shape), and their per-round
ratio over Magi split without graphs (at a compute-bound shape graphs should not cost).

``--kernels`` adds where the time goes, from one profiled call of each contender (torch.profiler):
the number of device kernels (CUDA) or aten ops (CPU) one call launches, their summed self time,
and the copies among them (``copy_``, ``clone``, ``contiguous``), so lost fusions and layout
copies at the piece boundaries show as more kernels or more copies; the rest of a call's time is
host-side (Python, dispatch).

Usage: ``python benchmarks/split_cost.py [--device cuda|cpu] [--hidden 4096] [--seq 2048]
[--batch 4] [--layers 4] [--heads 32] [--rounds 30] [--calls 3] [--graphs] [--kernels]`` with
``MAGI_COMPILE_CACHE_ROOT_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` pointing at scratch dirs (the Magi
cache defaults to a fresh temporary directory). Figures only: nothing here asserts a speed.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch

from magi_bench.contenders import build_contenders
from magi_bench.harness import compare_outputs
from magi_bench.models import ModelDims, attention_spec
from magi_bench.stats import paired_ratios
from magi_bench.timers import Timer

_COPY_OPS = ("copy_", "clone", "contiguous")
_GRAPH_MODES = ("magi_piecewise_cudagraph", "magi_full_cudagraph")


def _contenders(
    dims: ModelDims, device: torch.device, dtype: torch.dtype, cache_root: str, graphs: bool
) -> dict[str, Callable]:
    """Display name -> call; eager first (the output reference)."""
    split = attention_spec(dims)
    unsplit = dataclasses.replace(split, name="AttentionModelUnsplit", splitting_ops=())
    eager, compiled, magi_split = build_contenders(
        split, device, dtype, cache_root, ("eager", "torch_compile", "magi_class")
    )
    (magi_unsplit,) = build_contenders(unsplit, device, dtype, cache_root, ("magi_class",))
    calls = {
        "eager": eager.call,
        "torch_compile": compiled.call,
        "magi_split": magi_split.call,
        "magi_unsplit": magi_unsplit.call,
    }
    if graphs:
        for contender in build_contenders(split, device, dtype, cache_root, _GRAPH_MODES, (dims.batch,)):
            calls[contender.name] = contender.call
    return calls


def _time_rounds(
    calls: dict[str, Callable], x: torch.Tensor, timer: Timer, args: argparse.Namespace
) -> dict[str, list[float]]:
    """Per-call milliseconds of every contender, one sample per round."""
    names = list(calls)
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc.collect()
    gc.disable()
    try:
        for round_index in range(args.rounds):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                elapsed_ms, _ = timer.time_batch(calls[name], args.calls, x)
                samples[name].append(elapsed_ms / args.calls)
            if (round_index + 1) % 10 == 0 or round_index + 1 == args.rounds:
                print(f"[split_cost] timed rounds {round_index + 1}/{args.rounds}", file=sys.stderr, flush=True)
    finally:
        gc.enable()
    return samples


def _paired(label: str, numerator: list[float], denominator: list[float]) -> str:
    """The per-round ratios ``numerator / denominator``: median and 10th-90th percentile."""
    median, low, high = paired_ratios(numerator, denominator)
    return f"{label}{median:>10.3f}x  ({low:.3f} - {high:.3f})"


def _kernel_table(calls: dict[str, Callable], x: torch.Tensor, cuda: bool) -> None:
    activity = torch.profiler.ProfilerActivity.CUDA if cuda else torch.profiler.ProfilerActivity.CPU
    print(f"\none profiled call each ({'device kernels' if cuda else 'aten ops'}):")
    print(f"{'contender':<26}{'count':>8}{'self ms':>10}{'copies':>8}{'copy ms':>10}")
    for name, call in calls.items():
        with torch.profiler.profile(activities=[activity]) as prof:
            call(x)
            if cuda:
                torch.cuda.synchronize()
        events = [e for e in prof.events() if (e.device_type.name == "CUDA") == cuda]
        if not cuda:
            events = [e for e in events if e.name.startswith("aten::")]
        self_us = (lambda e: e.self_device_time_total) if cuda else (lambda e: e.self_cpu_time_total)
        copies = [e for e in events if any(op in e.name for op in _COPY_OPS)]
        total_ms = sum(self_us(e) for e in events) / 1e3
        copy_ms = sum(self_us(e) for e in copies) / 1e3
        print(f"{name:<26}{len(events):>8}{total_ms:>10.3f}{len(copies):>8}{copy_ms:>10.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--hidden", type=int, default=4096)
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--batch", type=int, default=4, help="the dynamic dim, >= 2")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=3, help="calls per sample")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's own)")
    parser.add_argument("--graphs", action="store_true", help="also Magi with PIECEWISE and FULL CUDA graphs (CUDA)")
    parser.add_argument("--kernels", action="store_true", help="also profile one call of each contender")
    args = parser.parse_args(argv)
    if args.batch < 2 or args.rounds < 1 or args.calls < 1 or args.warmup < 0:
        parser.error("need --batch >= 2, --rounds >= 1, --calls >= 1, --warmup >= 0")
    if args.hidden % args.heads:
        parser.error(f"--hidden {args.hidden} is not a multiple of --heads {args.heads}")
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available here")
    if args.graphs and device.type != "cuda":
        parser.error("--graphs needs --device cuda")
    if args.threads:
        torch.set_num_threads(args.threads)
    cuda = device.type == "cuda"
    dtype = torch.bfloat16 if cuda else torch.float32
    dims = ModelDims(hidden=args.hidden, seq=args.seq, layers=args.layers, batch=args.batch, heads=args.heads)
    print(f"torch {torch.__version__}, {device}, {dtype}, {dims}", flush=True)
    timer = Timer(device)
    with tempfile.TemporaryDirectory(prefix="split-cost-") as scratch, torch.no_grad():
        calls = _contenders(dims, device, dtype, scratch, args.graphs)
        torch.manual_seed(0)
        x = torch.randn(dims.batch, dims.seq, dims.hidden, device=device, dtype=dtype)
        torch._dynamo.mark_dynamic(x, 0)
        first_call_s = {}
        for name, call in calls.items():
            print(f"[split_cost] first call (compile) of {name}", file=sys.stderr, flush=True)
            start = time.perf_counter()
            call(x)
            timer.synchronize()
            first_call_s[name] = time.perf_counter() - start
        for _ in range(args.warmup):
            for call in calls.values():
                call(x)
        reference = calls["eager"](x)
        for name, call in calls.items():
            check = compare_outputs(call(x), reference)
            if not check.match:
                print(f"{name}: outputs differ from eager's (relative error {check.rel_error:.2e})", file=sys.stderr)
                return 1
        samples = _time_rounds(calls, x, timer, args)
        if args.kernels:
            _kernel_table(calls, x, cuda)
    median = {name: statistics.median(values) for name, values in samples.items()}
    print(f"\n{'contender':<26}{'median ms':>11}{'min ms':>9}{'vs compile':>12}{'vs eager':>10}{'compile s':>11}")
    for name, values in samples.items():
        print(
            f"{name:<26}{median[name]:>11.4f}{min(values):>9.4f}{median[name] / median['torch_compile']:>11.3f}x"
            f"{median[name] / median['eager']:>9.3f}x{first_call_s[name]:>11.1f}"
        )
    print("\nper round, magi_split over:  median  (p10 - p90)")
    split = samples["magi_split"]
    for other in ("torch_compile", "magi_unsplit", "eager"):
        print(_paired(f"  {other:<16}", split, samples[other]))
    for mode in _GRAPH_MODES if args.graphs else ():
        print(_paired(f"per round, {mode} over magi_split:", samples[mode], split))
    return 0


if __name__ == "__main__":
    sys.exit(main())
