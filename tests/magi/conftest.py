"""Shared helpers for the magi_compiler tests: isolated cache directories and a runner
for small scripts in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = Path(__file__).resolve().parent / "scripts"


def script_env(cache_root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAGI_COMPILE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MAGI_COMPILE_CACHE_ROOT_DIR"] = str(cache_root)
    env.update(extra)
    return env


def run_script(name: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    """Run ``tests/magi/scripts/<name>`` in a fresh interpreter; a non-zero exit fails with its output."""
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / name), *args], check=False, env=env, capture_output=True, text=True, timeout=300
    )
    if proc.returncode != 0:
        raise AssertionError(f"{name} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def last_json_line(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def module_cache_env(tmp_path_factory: pytest.TempPathFactory):
    """Points MAGI_COMPILE_CACHE_ROOT_DIR and Inductor's cache at fresh temp dirs for one module."""
    root = tmp_path_factory.mktemp("magi_cache")
    saved = {k: os.environ.get(k) for k in ("MAGI_COMPILE_CACHE_ROOT_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    os.environ["MAGI_COMPILE_CACHE_ROOT_DIR"] = str(root / "magi")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    yield root / "magi"
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="module")
def single_rank_mesh(tmp_path_factory: pytest.TempPathFactory):
    """A one-rank gloo process group and a 1-D CPU device mesh, torn down after the module."""
    import torch

    if not torch.distributed.is_available():
        pytest.skip("this torch build has no torch.distributed")
    from torch.distributed.device_mesh import init_device_mesh

    store = torch.distributed.FileStore(str(tmp_path_factory.mktemp("pg") / "store"), 1)
    torch.distributed.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield init_device_mesh("cpu", (1,))
    torch.distributed.destroy_process_group()
