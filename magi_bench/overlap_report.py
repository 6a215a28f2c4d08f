"""Show the FSDP overlap pass on a small Transformer: the all-gathers before and after it.

    python -m magi_bench.overlap_report [--layers 4] [--bucket-mode coalesced]
    torchrun --nproc-per-node 2 -m magi_bench.overlap_report

Traces `TinyTransformer` wrapped with `data_parallel(..., "fully_shard")` through Dynamo,
then prints, for the graph as Dynamo gives it and after `apply_fsdp_overlap`, each all-gather
with the parameters it carries, where it is issued, where it is waited on, where its data is
first used (node indices), and how many compute nodes sit between issue and wait (what can
hide it). Without torchrun it runs as one gloo rank: the graph's structure is the same.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.distributed as dist
from torch import fx
from torch.distributed.device_mesh import init_device_mesh

from magi_bench.process_group import init_from_env
from magi_bench.toy_model import TinyTransformer
from magi_compiler.distributed.data_parallel import data_parallel
from magi_compiler.passes.fsdp_overlap import apply_fsdp_overlap, is_compute_node, is_redistribute


def capture_graph(model: torch.nn.Module, example: torch.Tensor) -> fx.GraphModule:
    """The full FX graph Dynamo hands a backend for `model(example)`."""
    captured: list[fx.GraphModule] = []

    def backend(gm: fx.GraphModule, example_inputs: list) -> object:
        captured.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=backend, fullgraph=True)(example)
    assert len(captured) == 1, f"expected one graph, Dynamo gave {len(captured)}"
    return captured[0]


def describe_before(gm: fx.GraphModule) -> list[dict]:
    """Each un-lowered parameter gather (redistribute) with its position and first use."""
    nodes = list(gm.graph.nodes)
    index_of = {node: i for i, node in enumerate(nodes)}
    rows = []
    for node in nodes:
        if not is_redistribute(node):
            continue
        consumers = [u for to_local in node.users for u in to_local.users]
        first_use = min(index_of[u] for u in consumers) if consumers else index_of[node]
        issue = index_of[node]
        param = node.args[0].meta["example_value"]
        rows.append(
            {
                "params": [node.args[0].name],
                "gathered_bytes": param.numel() * param.dtype.itemsize,
                "issue_index": issue,
                "wait_index": issue,  # DTensor's redistribute waits inside the call
                "first_use_index": first_use,
                "compute_nodes_overlapped": 0,
            }
        )
    return rows


def _to_compute_steps(gm: fx.GraphModule, rows: list[dict]) -> None:
    """Add `*_step` fields: how many compute nodes run before each node index."""
    steps, done = [], 0
    for node in gm.graph.nodes:
        steps.append(done)
        done += is_compute_node(node)
    for row in rows:
        for key in ("issue", "wait", "first_use"):
            row[f"{key}_step"] = steps[row[f"{key}_index"]]


def build_report(layers: int, hidden: int, bucket_mode: str, bucket_size_mib: float, prefetch_depth: int) -> dict:
    """Trace the model once and return the before/after description."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    model = data_parallel(
        TinyTransformer(hidden, layers, heads=2).to(device), init_device_mesh(device, (dist.get_world_size(),))
    )
    gm = capture_graph(model, torch.randn(2, 8, hidden, device=device))
    before = describe_before(gm)
    _to_compute_steps(gm, before)
    report = apply_fsdp_overlap(gm, bucket_mode, bucket_size_mib, prefetch_depth)
    after = [vars(b) for b in report.buckets]
    _to_compute_steps(gm, after)
    compute_nodes = sum(1 for n in gm.graph.nodes if is_compute_node(n))
    return {
        "layers": layers,
        "hidden": hidden,
        "world_size": dist.get_world_size(),
        "bucket_mode": bucket_mode,
        "bucket_size_mib": bucket_size_mib,
        "prefetch_depth": prefetch_depth,
        "compute_nodes": compute_nodes,
        "before": before,
        "after": after,
        "params_left": report.params_left,
    }


def _print_table(title: str, rows: list[dict]) -> None:
    print(f"{title}: {len(rows)} all-gather(s)")
    print("  positions are compute steps (compute ops executed before that point)")
    print(f"  {'#':>3} {'params':>6} {'KiB':>9} {'issued':>7} {'waited':>7} {'used':>6} {'ops hiding it':>13}")
    for i, row in enumerate(rows):
        kib = row["gathered_bytes"] / 1024
        print(
            f"  {i:>3} {len(row['params']):>6} {kib:>9.1f} {row['issue_step']:>7} {row['wait_step']:>7} "
            f"{row['first_use_step']:>6} {row['compute_nodes_overlapped']:>13}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--bucket-mode", choices=["none", "coalesced"], default="coalesced")
    parser.add_argument("--bucket-size-mib", type=float, default=0.1)
    parser.add_argument("--prefetch-depth", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    init_from_env()
    try:
        report = build_report(args.layers, args.hidden, args.bucket_mode, args.bucket_size_mib, args.prefetch_depth)
    finally:
        dist.destroy_process_group()
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"TinyTransformer: {report['layers']} layers, hidden {report['hidden']}, world size {report['world_size']}, "
        f"{report['compute_nodes']} compute nodes"
    )
    _print_table("before the pass (DTensor redistribute, blocking, right before use)", report["before"])
    _print_table(
        f"after the pass (bucket_mode={report['bucket_mode']}, bucket_size_mib={report['bucket_size_mib']}, "
        f"prefetch_depth={report['prefetch_depth']})",
        report["after"],
    )
    if report["params_left"]:
        print(f"left un-lowered: {report['params_left']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
