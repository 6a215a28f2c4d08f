"""What the regression suites ran on: Python, torch, CUDA, GPU model and count, driver version."""

from __future__ import annotations

import importlib.util
import logging
import platform
import shutil
import subprocess
import sys

from reviewbot.results.schema import Environment

logger = logging.getLogger(__name__)


def nvidia_smi_gpus(timeout_s: float = 20.0) -> list[tuple[str, str]]:
    """``(model, driver version)`` per GPU from `nvidia-smi`; empty when it is missing or fails.

    Asked of nvidia-smi rather than torch so that this process never creates a CUDA context
    (the suites run in child processes and should have the whole GPU)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return []
    try:
        proc = subprocess.run(
            [exe, "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        logger.warning("nvidia-smi did not answer within %.0f s; GPU model and driver left out", timeout_s)
        return []
    if proc.returncode != 0:
        logger.warning("nvidia-smi failed (exit %d): %s", proc.returncode, proc.stderr.strip())
        return []
    gpus = []
    for line in proc.stdout.strip().splitlines():
        name, _, driver = line.rpartition(",")
        gpus.append((name.strip(), driver.strip()))
    return gpus


def collect_environment() -> Environment:
    """Probe this interpreter and machine. torch is imported only here, so the package stays light."""
    torch_version = cuda = None
    gpu_count = 0
    if importlib.util.find_spec("torch") is not None:
        import torch

        torch_version = torch.__version__
        cuda = torch.version.cuda
        gpu_count = torch.cuda.device_count() if cuda else 0
    gpus = nvidia_smi_gpus() if gpu_count else []
    return Environment(
        python=sys.version.split()[0],
        platform=platform.platform(),
        torch=torch_version,
        cuda=cuda,
        gpu_model=gpus[0][0] if gpus else None,
        gpu_count=gpu_count,
        driver=gpus[0][1] if gpus else None,
    )
