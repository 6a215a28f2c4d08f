"""Launch-bound latency of CUDA graph modes: an 8-layer MLP (hidden 1024, batch 2, seq 16,
bfloat16) through eager, ``@magi_compile`` with ``cudagraph_mode`` NONE / PIECEWISE / FULL and
``torch.compile(mode="reduce-overhead")``, in interleaved rounds; prints per-call figures and the
capture time and memory per size (docs/benchmarks.md, docs/cudagraphs.md).

With ``--split`` each layer's activation is a custom op (``magi_bench_cg::act``, GELU) named in
``splitting_ops``: PIECEWISE then runs it eagerly between 9 captured pieces (copying its outputs
into the next piece's static buffers), FULL compiles it in (``disable_graph_split``).

Usage: ``python benchmarks/cudagraph_latency.py [--rounds 30] [--calls 200] [--split]`` on a CUDA machine,
with ``MAGI_COMPILE_CACHE_ROOT_DIR`` and ``TORCHINDUCTOR_CACHE_DIR`` pointing at scratch dirs.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import time

import torch

from magi_compiler import magi_compile
from magi_compiler.cudagraph import capture_records

LAYERS, HIDDEN, BATCH, SEQ = 8, 1024, 2, 16
SPLIT_OP = "magi_bench_cg::act"


@torch.library.custom_op(SPLIT_OP, mutates_args=())
def act(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x)


@act.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class SplitGELU(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.magi_bench_cg.act(x)


def build_model(split: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(LAYERS):
        layers += [torch.nn.Linear(HIDDEN, HIDDEN), SplitGELU() if split else torch.nn.GELU()]
    return torch.nn.Sequential(*layers).to("cuda", torch.bfloat16).eval()


def contenders(model: torch.nn.Module, split: bool) -> dict:
    out = {"eager": model}
    for mode in ("NONE", "PIECEWISE", "FULL"):
        patch: dict = {"cudagraph_mode": mode}
        if split:
            patch |= {"splitting_ops": [SPLIT_OP], "disable_graph_split": mode == "FULL"}
        instance = copy.deepcopy(model)
        out[f"magi_{mode.lower()}"] = magi_compile(
            instance, method_name="forward", dynamic_arg_dims={"input": 0}, config_patch=patch
        )
    reduce_overhead = torch.compile(copy.deepcopy(model), mode="reduce-overhead", fullgraph=True)

    def reduce_overhead_call(x: torch.Tensor) -> torch.Tensor:
        torch.compiler.cudagraph_mark_step_begin()
        return reduce_overhead(x)

    out["torch_reduce_overhead"] = reduce_overhead_call
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--split", action="store_true", help="a splitting op after every linear layer")
    args = parser.parse_args()
    model = build_model(args.split)
    x = torch.randn(BATCH, SEQ, HIDDEN, device="cuda", dtype=torch.bfloat16)
    torch._dynamo.mark_dynamic(x, 0)
    runs = contenders(model, args.split)
    first_call_s = {}
    with torch.no_grad():
        expected = model(x)
        for name, fn in runs.items():
            torch.cuda.synchronize()
            start = time.perf_counter()
            out = fn(x)
            torch.cuda.synchronize()
            first_call_s[name] = time.perf_counter() - start
            torch.testing.assert_close(out.float(), expected.float(), rtol=2e-2, atol=2e-2)
            for _ in range(20):
                fn(x)
        samples: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(args.rounds):
            for name, fn in runs.items():
                torch.cuda.synchronize()
                start = time.perf_counter()
                for _ in range(args.calls):
                    fn(x)
                torch.cuda.synchronize()
                samples[name].append((time.perf_counter() - start) / args.calls * 1e6)
    summary = {
        name: {
            "median_us": round(statistics.median(v), 1),
            "min_us": round(min(v), 1),
            "max_us": round(max(v), 1),
            "first_call_s": round(first_call_s[name], 2),
        }
        for name, v in samples.items()
    }
    base = summary["eager"]["median_us"]
    print(f"{'contender':24} {'median us/call':>15} {'min':>8} {'max':>8} {'vs eager':>9} {'first call s':>13}")
    for name, row in summary.items():
        print(
            f"{name:24} {row['median_us']:15.1f} {row['min_us']:8.1f} {row['max_us']:8.1f} "
            f"{base / row['median_us']:8.2f}x {row['first_call_s']:13.2f}"
        )
    by_mode: dict[str, list] = {}
    for record in capture_records:
        by_mode.setdefault(record.mode, []).append(record)
    for mode, records in by_mode.items():
        total_s = sum(r.seconds for r in records)
        total_mib = sum(r.bytes for r in records) / 2**20
        largest = records[0]
        print(
            f"capture {mode}: {len(records)} sizes in {total_s:.2f} s, {total_mib:.1f} MiB reserved; "
            f"largest size {largest.size}: {largest.seconds * 1e3:.1f} ms, {largest.bytes / 2**20:.1f} MiB; "
            f"per size median {statistics.median(r.seconds for r in records) * 1e3:.1f} ms"
        )
    print(json.dumps({"summary": summary, "captures": [r.__dict__ for r in capture_records]}))


if __name__ == "__main__":
    main()
