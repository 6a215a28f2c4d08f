"""One rank of the placement cache-key test; run under torchrun (gloo on CPU, NCCL on CUDA).

    torchrun --nproc-per-node 1 placement_cache_worker.py --mode fully_shard --out DIR [--disable-fix]

Compiles a small MLP wrapped with `data_parallel(mode)` through `magi_compile` (cache root
from MAGI_COMPILE_CACHE_ROOT_DIR) and writes `<out>/rank<r>.json`: the cache directory the key
selected (relative to the root), whether it existed before this process, the key factors,
the compilation counter deltas and the package's warning lines. `--disable-fix` hashes an empty
input list for the `input_placements` factor, reproducing the bug that factor fixes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh

import magi_compiler.cache_key as cache_key_module
from magi_bench.process_group import init_from_env
from magi_compiler import compilation_counter, get_entry_state, magi_compile
from magi_compiler.distributed import data_parallel


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.up = nn.Linear(16, 32)
        self.down = nn.Linear(32, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))


def _drop_placement_factor() -> None:
    """Make the placement factor blind to DTensors: every graph hashes as if it had none."""
    original = cache_key_module.compute_input_placement_hash
    cache_key_module.compute_input_placement_hash = lambda example_inputs: original([])


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _key_dirs(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.glob("*/*") if p.is_dir()} if root.is_dir() else set()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["fully_shard", "replicate"], required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--disable-fix", action="store_true")
    args = parser.parse_args()
    if args.disable_fix:
        _drop_placement_factor()
    lines = _Lines()
    logging.getLogger("magi_compiler").addHandler(lines)
    device = init_from_env()
    rank, world = dist.get_rank(), dist.get_world_size()
    root = Path(os.environ["MAGI_COMPILE_CACHE_ROOT_DIR"])
    existing = _key_dirs(root)
    torch.manual_seed(0)
    model = data_parallel(MLP().to(device), init_device_mesh(device, (world,)), args.mode)
    magi_compile(model, method_name="forward", model_tag="placement")
    before = compilation_counter.snapshot()
    with torch.no_grad():
        model(torch.randn(4, 16, device=device))
    deltas = {k: v - getattr(before, k) for k, v in dataclasses.asdict(compilation_counter).items()}
    backend = get_entry_state(model.forward).backend
    selected = str(Path(backend.cache_dir).relative_to(root))
    result = {
        "mode": args.mode,
        "rank": rank,
        "world_size": world,
        "cache_dir": selected,
        "dir_preexisted": selected in existing,
        "factors": backend.key_factors,
        "counters": deltas,
        "warnings": lines.lines,
    }
    (args.out / f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
