"""Where a model's artifacts live: ``<root>/model_<idx>[_<tag>]_rank_<rank>_ws<world>/<key>/``."""

from __future__ import annotations

import os
import re

import torch

_TAG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def distributed_rank_and_world() -> tuple[int, int]:
    """``torch.distributed``'s rank and world size when a process group is up, else ``(0, 1)``."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_rank(), torch.distributed.get_world_size()
    return 0, 1


def model_cache_dir(root: str, model_index: int, model_tag: str | None, key: str) -> str:
    """The cache directory of one compiled model; ``model_tag`` must be a plain file-name word."""
    if model_tag is not None and not _TAG.match(model_tag):
        raise ValueError(f"model_tag {model_tag!r} must match {_TAG.pattern} (it becomes part of a directory name)")
    rank, world = distributed_rank_and_world()
    tag = f"_{model_tag}" if model_tag else ""
    return os.path.join(root, f"model_{model_index}{tag}_rank_{rank}_ws{world}", key)
