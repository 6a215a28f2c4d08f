"""Process-group setup shared by the FSDP report and benchmark entry points."""

from __future__ import annotations

import os

import torch
import torch.distributed as dist


def init_from_env() -> str:
    """Join the torchrun group if launched by torchrun, else a one-rank gloo group; returns the device type.

    NCCL and the rank's GPU when CUDA is present, gloo on CPU otherwise.
    """
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if "RANK" in os.environ:
        dist.init_process_group("nccl" if cuda else "gloo")
    else:
        dist.init_process_group("nccl" if cuda else "gloo", store=dist.HashStore(), rank=0, world_size=1)
    return "cuda" if cuda else "cpu"
