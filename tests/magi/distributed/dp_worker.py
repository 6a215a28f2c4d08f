"""Worker for the multi-rank data-parallel tests; run under torchrun (gloo on CPU, NCCL on CUDA).

Each rank trains a copy of a tiny Transformer with `data_parallel` on its slice of the batch
and, next to it, an unsharded single-process reference on the whole batch; it records the
global loss and the largest gradient difference per step, and for the compiled run the
post-pass graph's collective sequence, in `<out>/rank<r>.json`. Runs: eager per mode, the
overlap pass under a plain AOTAutograd backend, and `magi_compile` with `fsdp.enable_fsdp`
(eager pieces, so the pass runs inside MagiBackend without an Inductor compile).
"""

from __future__ import annotations

import argparse
import copy
import json
import logging
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor

from magi_bench.toy_model import TinyTransformer
from magi_compiler import magi_compile
from magi_compiler.distributed import data_parallel
from magi_compiler.passes.fsdp_overlap import apply_fsdp_overlap, is_redistribute

STEPS = 3
BATCH, SEQ, HIDDEN = 4, 4, 16


def _mesh(mode: str, device: str):
    world = dist.get_world_size()
    if mode == "hybrid_shard":
        return init_device_mesh(device, (1, world), mesh_dim_names=("replicate", "shard"))
    return init_device_mesh(device, (world,))


def _train(mode: str, device: str, compiled: str | None, graph_log: list) -> list[dict]:
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    reference = TinyTransformer(HIDDEN, layers=2).to(device)
    model = data_parallel(copy.deepcopy(reference), _mesh(mode, device), mode)

    def backend(gm, example_inputs):
        report = apply_fsdp_overlap(gm, bucket_mode="coalesced", bucket_size_mib=0.002, prefetch_depth=1)
        graph_log.append(_collective_sequence(gm, report))
        from functorch.compile import make_boxed_func
        from torch._dynamo.backends.common import aot_autograd

        return aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward))(gm, example_inputs)

    if compiled == "magi":
        patch = {"backend": "eager", "disable_graph_split": True, "fsdp": {"enable_fsdp": True}}
        run = magi_compile(model, method_name="forward", model_tag="dp_magi", config_patch=patch)
    elif compiled == "overlap":
        run = torch.compile(model, backend=backend, fullgraph=True)
    else:
        run = model
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    steps = []
    for step in range(STEPS):
        torch.manual_seed(100 + step)
        batch = torch.randn(BATCH, SEQ, HIDDEN, device=device)
        local = batch.chunk(world)[rank]
        loss = run(local).square().mean()
        loss.backward()
        ref_loss = reference(batch).square().mean()
        ref_loss.backward()
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        global_loss /= world
        grad_diff = 0.0
        for (name, p), ref_p in zip(model.named_parameters(), reference.parameters(), strict=True):
            assert isinstance(p, DTensor), name
            full = p.grad.full_tensor()
            grad_diff = max(grad_diff, (full - ref_p.grad).abs().max().item())
        steps.append({"loss": global_loss.item(), "ref_loss": ref_loss.item(), "grad_diff": grad_diff})
        opt.step()
        ref_opt.step()
        opt.zero_grad()
        ref_opt.zero_grad()
    return steps


def _collective_sequence(gm, report) -> dict:
    seq = []
    for node in gm.graph.nodes:
        name = getattr(node.target, "__name__", str(node.target))
        if "all_gather_into_tensor" in name:
            seq.append(("issue", node.name))
        elif "wait_tensor" in name:
            seq.append(("wait", node.args[0].name))
        elif is_redistribute(node):
            seq.append(("redistribute", node.name))
    return {
        "sequence": seq,
        "buckets": [b.params for b in report.buckets],
        "overlapped": [b.compute_nodes_overlapped for b in report.buckets],
        "issue_index": [b.issue_index for b in report.buckets],
        "wait_index": [b.wait_index for b in report.buckets],
        "first_use_index": [b.first_use_index for b in report.buckets],
    }


class _PassLog(logging.Handler):
    """Collects the overlap pass's log lines, proof that MagiBackend ran it."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("fsdp overlap:"):
            self.lines.append(record.getMessage())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cpu", action="store_true", help="gloo on CPU even where CUDA is present")
    args = parser.parse_args()
    cuda = torch.cuda.is_available() and not args.cpu
    if cuda:
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl" if cuda else "gloo")
    device = "cuda" if cuda else "cpu"
    graphs: list = []
    pass_log = _PassLog()
    logger = logging.getLogger("magi_compiler")
    logger.addHandler(pass_log)
    logger.setLevel(logging.INFO)
    result = {
        "world_size": dist.get_world_size(),
        "device": device,
        "fully_shard": _train("fully_shard", device, compiled=None, graph_log=graphs),
        "replicate": _train("replicate", device, compiled=None, graph_log=graphs),
        "hybrid_shard": _train("hybrid_shard", device, compiled=None, graph_log=graphs),
        "fully_shard_compiled": _train("fully_shard", device, compiled="overlap", graph_log=graphs),
        "fully_shard_magi": _train("fully_shard", device, compiled="magi", graph_log=graphs),
    }
    result["graphs"] = graphs
    result["pass_log"] = pass_log.lines
    (args.out / f"rank{dist.get_rank()}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
