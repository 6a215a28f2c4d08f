"""Benchmark the FSDP overlap pass: training-step time and exposed all-gather time.

    torchrun --nproc-per-node 2 -m magi_bench.overlap \\
        --layers 8 --hidden 4096 --dtype bf16 --batch 2 --seq 2048          # 2 GPUs, NCCL
    python -m magi_bench.overlap --layers 2 --hidden 64   # 1 gloo rank, CPU

For each variant (`off`: Inductor compiles the DTensor graph as Dynamo gives it; `none`: the
pass with one all-gather per parameter; `coalesced`: the pass with buckets) it compiles a
`data_parallel(..., "fully_shard")` TinyTransformer with Inductor, times `--steps` training
steps (forward, mean-square loss, backward, SGD) after `--warmup`, then profiles 2 steps:
- GPU: all-gather time = NCCL AllGather kernel time; exposed = the part of it during which no
  compute kernel runs on the device;
- CPU/gloo: all-gather time = gloo all_gather work on gloo's threads; exposed = the part of it
  during which the main thread is blocked in `wait_tensor`.
Rank 0 prints one line per variant and a final JSON line; ratios are against `off`. A variant
with no all-gather to profile (`off` on one rank: DTensor replicates without a collective) shows
`hidden n/a` and a line saying why; its ratios are null.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import torch
import torch.distributed as dist
from torch.autograd import DeviceType
from torch.distributed.device_mesh import init_device_mesh
from torch.profiler import ProfilerActivity, profile

from magi_bench.process_group import init_from_env
from magi_bench.toy_model import TinyTransformer
from magi_compiler.distributed.data_parallel import data_parallel
from magi_compiler.passes.fsdp_overlap import INDUCTOR_CONFIG_PATCH, apply_fsdp_overlap

_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
Interval = tuple[float, float]


def _union(intervals: list[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def overlap_us(intervals: list[Interval], cover: list[Interval]) -> float:
    """Total length of `intervals` that lies inside the union of `cover`."""
    covered = _union(cover)
    total = 0.0
    for start, end in intervals:
        for c_start, c_end in covered:
            total += max(0.0, min(end, c_end) - max(start, c_start))
    return total


def exposed_all_gather_us(events: list, cuda: bool) -> tuple[float, float]:
    """(all-gather time, exposed all-gather time) in microseconds from profiler events; (0, 0)
    when no all-gather ran (with the pass off on one rank, DTensor replicates a parameter without
    any collective)."""
    if cuda:
        kernels = [e for e in events if e.device_type == DeviceType.CUDA]
        gathers = [e for e in kernels if "nccl" in e.name.lower() and "allgather" in e.name.lower()]
        compute = [e for e in kernels if "nccl" not in e.name.lower()]
        ag = [(e.time_range.start, e.time_range.end) for e in gathers]
        total = sum(end - start for start, end in ag)
        return total, total - overlap_us(ag, [(e.time_range.start, e.time_range.end) for e in compute])
    ag = [(e.time_range.start, e.time_range.end) for e in events if e.name == "gloo:all_gather"]
    if not ag:
        return 0.0, 0.0
    all_waits = [e for e in events if e.name == "_c10d_functional::wait_tensor"]
    assert all_waits, "gloo all-gathers were profiled but no wait_tensor"
    main_thread = all_waits[0].thread
    waits = [(e.time_range.start, e.time_range.end) for e in all_waits if e.thread == main_thread]
    return sum(end - start for start, end in ag), overlap_us(ag, waits)


def _build(args: argparse.Namespace, variant: str, device: str) -> tuple[torch.nn.Module, object]:
    from torch._inductor.compile_fx import compile_fx

    torch.manual_seed(0)
    model = TinyTransformer(args.hidden, args.layers, args.heads).to(device=device, dtype=_DTYPES[args.dtype])
    model = data_parallel(model, init_device_mesh(device, (dist.get_world_size(),)), "fully_shard")

    def backend(gm: torch.fx.GraphModule, example_inputs: list) -> object:
        if variant == "off":
            return compile_fx(gm, example_inputs)
        apply_fsdp_overlap(gm, variant, args.bucket_size_mib, args.prefetch_depth)
        with torch._inductor.config.patch(INDUCTOR_CONFIG_PATCH):
            return compile_fx(gm, example_inputs)

    torch._dynamo.reset()
    return model, torch.compile(model, backend=backend, fullgraph=True)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def run_variant(args: argparse.Namespace, variant: str, device: str) -> dict:
    model, compiled = _build(args, variant, device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.seq, args.hidden, device=device, dtype=_DTYPES[args.dtype])

    def step() -> None:
        compiled(x).float().square().mean().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(args.warmup):
        step()
    times = []
    for _ in range(args.steps):
        _sync(device)
        dist.barrier()
        start = time.perf_counter()
        step()
        _sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    with profile(activities=activities) as prof:
        for _ in range(2):
            step()
        _sync(device)
    total, exposed = exposed_all_gather_us(list(prof.events()), device == "cuda")
    return {
        "variant": variant,
        "step_ms": statistics.median(times),
        "all_gather_ms_per_step": total / 2e3,
        "exposed_all_gather_ms_per_step": exposed / 2e3,
        "hidden_fraction": 1 - exposed / total if total else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--seq", type=int, default=8)
    parser.add_argument("--dtype", choices=sorted(_DTYPES), default="fp32")
    parser.add_argument("--variants", default="off,none,coalesced")
    parser.add_argument("--bucket-size-mib", type=float, default=256.0)
    parser.add_argument("--prefetch-depth", type=int, default=1)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = set(variants) - {"off", "none", "coalesced"}
    if unknown:
        parser.error(f"unknown variants {sorted(unknown)}")
    device = init_from_env()
    rank, world_size = dist.get_rank(), dist.get_world_size()
    try:
        results = [run_variant(args, variant, device) for variant in variants]
    finally:
        dist.destroy_process_group()
    if rank != 0:
        return 0
    base = next((r for r in results if r["variant"] == "off"), None)
    for r in results:
        if base is not None:
            r["step_time_vs_off"] = r["step_ms"] / base["step_ms"]
            r["exposed_vs_off"] = (
                r["exposed_all_gather_ms_per_step"] / base["exposed_all_gather_ms_per_step"]
                if base["exposed_all_gather_ms_per_step"]
                else None
            )
    print(
        f"fully_shard TinyTransformer layers={args.layers} hidden={args.hidden} {args.dtype} "
        f"batch={args.batch} seq={args.seq} device={device}",
        file=sys.stderr,
    )
    for r in results:
        hidden = "n/a" if r["hidden_fraction"] is None else f"{r['hidden_fraction']:.0%}"
        print(
            f"{r['variant']:>10}: step {r['step_ms']:9.2f} ms  all-gather {r['all_gather_ms_per_step']:8.2f} ms  "
            f"exposed {r['exposed_all_gather_ms_per_step']:8.2f} ms  hidden {hidden}",
            file=sys.stderr,
        )
        if r["hidden_fraction"] is None:
            why = " (one rank: DTensor replicates without a collective)" if world_size == 1 else ""
            print(
                f"{'':>10}  no all-gather was profiled{why}: hidden and ratios to its exposed time are n/a",
                file=sys.stderr,
            )
    print(json.dumps({"config": vars(args), "device": device, "results": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
