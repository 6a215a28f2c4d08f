"""Compile time cold vs warm, as time to first output of a fresh process.

For each contender: wipe its cache directories, start a process (cold: empty
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR`` and Magi cache), then start a second
one on the same directories (warm: cache hit). The time is measured here, from process
start to the child's ``FIRST_OUTPUT`` line, so it includes interpreter start, ``import
torch``, building the model and the first call (trace, compile or cache load, run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from magi_bench.first_output import MARKER
from magi_bench.models import ModelDims
from magi_bench.progress import Progress

STARTUP_CONTENDERS = ("eager", "torch_compile", "magi_class")
REPO_ROOT = Path(__file__).resolve().parents[1]  # holds magi_bench and magi_compiler (one distribution)


def _child_env(cache_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["TORCHINDUCTOR_CACHE_DIR"] = str(cache_dir / "inductor")
    env["TRITON_CACHE_DIR"] = str(cache_dir / "triton")
    env["MAGI_COMPILE_CACHE_ROOT_DIR"] = str(cache_dir / "magi")
    return env


def time_to_first_output(
    contender: str,
    device: torch.device,
    dtype: torch.dtype,
    dims: ModelDims,
    cache_dir: Path,
    timeout_s: float,
    threads: int | None = None,
) -> dict[str, Any]:
    """Run one fresh process; seconds from its start to its ``FIRST_OUTPUT`` line, and the child's report."""
    command = [
        sys.executable,
        "-m",
        "magi_bench.first_output",
        "--contender",
        contender,
        "--device",
        str(device),
        "--dtype",
        str(dtype).removeprefix("torch."),
        *(f"--{name}={value}" for name, value in dataclasses.asdict(dims).items()),
        "--magi-cache-dir",
        str(cache_dir / "magi"),
        *([f"--threads={threads}"] if threads is not None else []),
    ]
    cache_dir.mkdir(parents=True, exist_ok=True)
    stderr_path = cache_dir / f"stderr-{time.time_ns()}.log"
    first_output_s = None
    report_line = None
    with open(stderr_path, "w", encoding="utf-8") as stderr:
        start = time.perf_counter()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=stderr, text=True, env=_child_env(cache_dir))
        watchdog = threading.Timer(timeout_s, child.kill)
        watchdog.start()
        try:
            assert child.stdout is not None
            for line in child.stdout:
                if line.startswith(MARKER) and report_line is None:
                    first_output_s = time.perf_counter() - start
                    report_line = line
            child.wait()
        finally:
            watchdog.cancel()
    if child.returncode != 0 or report_line is None:
        tail = stderr_path.read_text(encoding="utf-8")[-3000:]
        raise RuntimeError(
            f"startup run of {contender} failed (exit {child.returncode}; killed after {timeout_s} s "
            f"if negative):\n{tail}"
        )
    assert first_output_s is not None
    return {"elapsed_s": first_output_s, "report": json.loads(report_line.removeprefix(MARKER))}


def run_startup(
    device: torch.device,
    dtype: torch.dtype,
    dims: ModelDims,
    root: Path,
    progress: Progress,
    contenders: tuple[str, ...] = STARTUP_CONTENDERS,
    timeout_s: float = 900.0,
    threads: int | None = None,
) -> dict[str, Any]:
    """The ``startup`` section: a cold then a warm process per contender."""
    runs = []
    cold_over_warm = {}
    for name in contenders:
        cache_dir = root / name
        shutil.rmtree(cache_dir, ignore_errors=True)
        times = {}
        for cache in ("cold", "warm"):
            progress.stage(f"startup: {cache} process for {name}")
            result = time_to_first_output(name, device, dtype, dims, cache_dir, timeout_s, threads)
            times[cache] = result["elapsed_s"]
            runs.append(
                {
                    "contender": name,
                    "cache": cache,
                    "time_to_first_output_s": result["elapsed_s"],
                    "child": {k: v for k, v in result["report"].items() if k != "counters"},
                    "counters": result["report"]["counters"],
                }
            )
        cold_over_warm[name] = times["cold"] / times["warm"]
    return {
        "model": "SimpleModel",
        "dims": dataclasses.asdict(dims),
        "unit": "s",
        "runs": runs,
        "cold_over_warm": cold_over_warm,
    }
