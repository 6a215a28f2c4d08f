"""The ``input_placements`` factor of the artifact-cache key."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import torch


def _dtensor_type() -> type | None:
    if not torch.distributed.is_available():
        return None
    from torch.distributed.tensor import DTensor

    return DTensor


def compute_input_placement_hash(example_inputs: Sequence[object]) -> str:
    """Hash how the DTensor inputs of a graph are laid out.

    Hashed, for each ``DTensor`` among ``example_inputs`` in input order: its dtype, its
    placements (``Shard(0)``, ``Replicate()``, ...) and its device mesh's shape. Two models
    sharded differently (or over a differently shaped mesh) therefore get different cache
    directories, while rank and world size are already part of the directory name.

    Left out, deliberately: plain tensors (their dtypes and shapes), SymInts and Python
    scalars contribute nothing, and the graph's code is not looked at. Dynamo's restart
    analysis traces one graph twice and the two traces differ in exactly those things (a
    Python float becomes a tensor input, then a constant), yet both traces must land in the
    same cache directory. With no DTensor input the hash is the hash of an empty list.
    """
    dtensor = _dtensor_type()
    described: list[str] = []
    if dtensor is not None:
        for value in example_inputs:
            if isinstance(value, dtensor):
                placements = ",".join(str(p) for p in value.placements)
                described.append(f"{value.dtype}|{placements}|{tuple(value.device_mesh.shape)}")
    return hashlib.sha256(repr(described).encode()).hexdigest()[:16]
