"""The artifact-cache key includes DTensor input placements: switching data-parallel mode recompiles.

Each compile runs in a fresh process under `torchrun --nproc-per-node N` (N = 1 by default,
MAGI_PLACEMENT_TEST_NPROC to change it; gloo on CPU, NCCL where CUDA is present). The signal
is the compilation counter and the cache directory the key selects, not output closeness.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("placement_cache_worker.py")
NPROC = int(os.environ.get("MAGI_PLACEMENT_TEST_NPROC", "1"))


def _run_chain(cache_root: Path, inductor_dir: Path, modes: list[str], disable_fix: bool, out: dict, key: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAGI_COMPILE_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    env.update(MAGI_COMPILE_CACHE_ROOT_DIR=str(cache_root), TORCHINDUCTOR_CACHE_DIR=str(inductor_dir))
    env["OMP_NUM_THREADS"] = "1"
    runs = []
    for step, mode in enumerate(modes):
        result_dir = cache_root.parent / f"{cache_root.name}_run{step}"
        result_dir.mkdir()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={NPROC}"]
        cmd += [str(WORKER), "--mode", mode, "--out", str(result_dir)] + (["--disable-fix"] if disable_fix else [])
        proc = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            out[key] = AssertionError(f"{mode} run failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
            return
        runs.append([json.loads((result_dir / f"rank{r}.json").read_text()) for r in range(NPROC)])
    out[key] = runs


@pytest.fixture(scope="module")
def chains(tmp_path_factory) -> dict[str, list[list[dict]]]:
    if torch.cuda.is_available() and torch.cuda.device_count() < NPROC:
        pytest.skip(f"{NPROC} ranks need {NPROC} GPUs for NCCL")
    base = tmp_path_factory.mktemp("placement")
    inductor_dir = base / "inductor"
    out: dict = {}
    jobs = {
        "fixed": (["fully_shard", "replicate", "replicate"], False),
        "unfixed": (["fully_shard", "replicate"], True),
    }
    threads = [
        threading.Thread(target=_run_chain, args=(base / name, inductor_dir, modes, disable, out, name))
        for name, (modes, disable) in jobs.items()
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for value in out.values():
        if isinstance(value, AssertionError):
            raise value
    return out


def test_mode_switch_recompiles(chains):
    first, second, _ = chains["fixed"]
    for a, b in zip(first, second, strict=True):
        assert a["counters"]["num_inductor_compiles"] > 0
        assert b["counters"]["num_inductor_compiles"] > 0, "the replicate run must not reuse fully_shard's entry"
        assert b["cache_dir"] != a["cache_dir"] and not b["dir_preexisted"]
        changed = {name for name in a["factors"] if a["factors"][name] != b["factors"][name]}
        assert changed == {"input_placements"}


def test_same_mode_selects_the_same_entry(chains):
    _, second, third = chains["fixed"]
    for b, c in zip(second, third, strict=True):
        assert c["cache_dir"] == b["cache_dir"] and c["dir_preexisted"]
        if b["counters"]["num_cache_saves"] > 0:
            assert c["counters"]["num_inductor_compiles"] == 0 and c["counters"]["num_cache_hits"] > 0
        else:
            # DTensor-input artifacts could not be persisted on this torch: a logged, counted miss
            assert b["counters"]["num_cache_save_failures"] > 0
            assert any("could not save compiled artifact" in line for line in b["warnings"]), b["warnings"]
            assert c["counters"]["num_cache_misses"] > 0 and c["counters"]["num_inductor_compiles"] > 0


def test_without_the_fix_the_mode_switch_hits_the_old_entry(chains):
    first, second = chains["unfixed"]
    for a, b in zip(first, second, strict=True):
        assert a["factors"] == b["factors"], "with the fix disabled the key cannot tell the modes apart"
        # the bug: the replicate process selects the entry fully_shard wrote
        assert b["cache_dir"] == a["cache_dir"] and b["dir_preexisted"]
        if a["counters"]["num_cache_saves"] > 0:
            assert b["counters"]["num_inductor_compiles"] == 0, "the stale fully_shard artifact is loaded"


def test_each_rank_cache_dir_carries_rank_and_world_size(chains):
    for runs in chains.values():
        for run in runs:
            assert sorted(r["rank"] for r in run) == list(range(NPROC))
            for r in run:
                assert r["world_size"] == NPROC
                assert r["cache_dir"].split("/")[0].endswith(f"_rank_{r['rank']}_ws{NPROC}")
