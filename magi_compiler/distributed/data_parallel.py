"""SimpleFSDP-style data parallelism: DTensor parameters, gathered to `Replicate()` for compute.

`data_parallel(model, mesh, mode)` turns every parameter of `model` into an
`nn.Parameter(DTensor)` with the mode's placements and swaps each module's class for a
subclass whose parameter attributes are properties: reading `module.weight` redistributes the
stored DTensor to `Replicate()` and returns the local (full) tensor. Everything is ordinary
Python over DTensor, so Dynamo traces it into one graph (on torch 2.13 as `call_method`
`redistribute` / `to_local` nodes), and the whole-graph overlap pass
(`magi_compiler.passes.fsdp_overlap`) can find the all-gathers.

Gradients: `to_local(grad_placements=Partial("avg"))` marks the local gradient as a partial
average, so the backward of the redistribute reduces it back to the stored placements:
reduce-scatter for `Shard(0)`, all-reduce for `Replicate()`. The stored parameter's `.grad`
is therefore the average over data-parallel ranks, i.e. the gradient of the mean loss over
the global batch when each rank feeds its own slice of it.

Constraints: parameters must live on the mesh's device type; buffers stay plain tensors;
the model is modified in place (and returned for convenience).
"""

from __future__ import annotations

from typing import Literal, get_args

import torch
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.tensor import DTensor, Partial, Placement, Replicate, Shard, distribute_tensor

DataParallelMode = Literal["fully_shard", "replicate", "hybrid_shard"]

_MESH_NDIM: dict[str, int] = {"fully_shard": 1, "replicate": 1, "hybrid_shard": 2}
_CLASS_PREFIX = "DataParallel"


def _storage_placements(mode: str) -> tuple[Placement, ...]:
    if mode == "fully_shard":
        return (Shard(0),)
    if mode == "replicate":
        return (Replicate(),)
    return (Replicate(), Shard(0))


def gather_for_compute(param: DTensor) -> torch.Tensor:
    """The full local tensor of `param` for compute; its gradient reduces back to `param`'s placements."""
    ndim = param.device_mesh.ndim
    replicated = param.redistribute(placements=[Replicate()] * ndim)
    return replicated.to_local(grad_placements=[Partial("avg")] * ndim)


def _gathered_property(name: str) -> property:
    def getter(module: nn.Module) -> torch.Tensor:
        return gather_for_compute(module._parameters[name])

    return property(getter)


def _swap_class(module: nn.Module, param_names: list[str]) -> None:
    cls = module.__class__
    properties = {name: _gathered_property(name) for name in param_names}
    module.__class__ = type(f"{_CLASS_PREFIX}{cls.__name__}", (cls,), properties)


def _validate(model: nn.Module, mesh: DeviceMesh, mode: str) -> None:
    if mode not in _MESH_NDIM:
        raise ValueError(f"mode must be one of {get_args(DataParallelMode)}, got {mode!r}")
    if mesh.ndim != _MESH_NDIM[mode]:
        raise ValueError(
            f"mode {mode!r} needs a {_MESH_NDIM[mode]}-D device mesh "
            f"({'(replicate, shard)' if mode == 'hybrid_shard' else 'one data-parallel dimension'}), "
            f"got a {mesh.ndim}-D mesh of shape {tuple(mesh.shape)}"
        )
    for name, param in model.named_parameters():
        if isinstance(param, DTensor):
            raise TypeError(f"parameter {name!r} is already a DTensor: data_parallel was applied twice")
        if param.device.type != mesh.device_type:
            raise ValueError(
                f"parameter {name!r} is on {param.device.type}, the mesh is on {mesh.device_type}: "
                "move the model to the mesh's device first"
            )


def data_parallel(model: nn.Module, mesh: DeviceMesh, mode: DataParallelMode = "fully_shard") -> nn.Module:
    """Make `model` data parallel over `mesh` in place and return it.

    fully_shard: 1-D mesh, parameters stored `Shard(0)` (all-gathered in forward, gradients
    reduce-scattered). replicate: 1-D mesh, stored `Replicate()` (gradients all-reduced).
    hybrid_shard: 2-D mesh `(replicate_dim, shard_dim)`, stored `(Replicate(), Shard(0))`.
    A mesh whose dimensionality doesn't match the mode raises `ValueError`.
    """
    _validate(model, mesh, mode)
    placements = _storage_placements(mode)
    converted: dict[int, nn.Parameter] = {}  # keeps tied parameters tied
    for module in list(model.modules()):
        names = [name for name, param in module.named_parameters(recurse=False) if param is not None]
        if not names:
            continue
        for name in names:
            param = module._parameters[name]
            if id(param) not in converted:
                sharded = distribute_tensor(param.detach(), mesh, placements)
                converted[id(param)] = nn.Parameter(sharded, requires_grad=param.requires_grad)
            module._parameters[name] = converted[id(param)]
        _swap_class(module, names)
    return model
