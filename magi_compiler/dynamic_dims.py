"""Which dims of an entry's arguments are dynamic.

Dims the user names in ``dynamic_arg_dims`` are strict: Dynamo must keep them symbolic
(``torch._dynamo.mark_dynamic``) and a first call with size 0 or 1 there is an error. With no
``dynamic_arg_dims``, dim 0 of every tensor argument is inferred and soft
(``torch._dynamo.maybe_mark_dynamic``): Dynamo may specialize it (a weight's dim 0 used by a
matmul), and an inferred dim of size 0 or 1 is left static. Whether a soft dim stayed dynamic is
only known from the traced graph, so the bytecode swap's dispatch signature treats an inferred
dim as dynamic only where the graph's placeholder for that argument has a symbolic size.
"""

from __future__ import annotations

import torch
from torch import fx


def mark(name: str | None, value: torch.Tensor, dims: tuple[int, ...], strict: bool) -> None:
    """Mark ``dims`` of argument ``name``; a strict dim of size 0 or 1 raises ``ValueError``."""
    for dim in dims:
        size = value.shape[dim]
        if not strict:
            if size >= 2:
                torch._dynamo.maybe_mark_dynamic(value, dim)
            continue
        if size < 2:
            raise ValueError(
                f"argument {name!r} has size {size} on its dynamic dim {dim} in the first call. Dynamo "
                "specializes sizes 0 and 1 (it assumes every dynamic size is at least 2), so the graph "
                "compiled from this call would be fixed to this size. Make the first call with a size of "
                "at least 2 on that dim, or leave the dim out of dynamic_arg_dims."
            )
        torch._dynamo.mark_dynamic(value, dim)


def symbolic_local_dims(gm: fx.GraphModule) -> dict[str, frozenset[int]]:
    """For each placeholder of ``gm`` fed by a local of the traced frame, the dims whose size
    is symbolic in the traced graph."""
    dims: dict[str, frozenset[int]] = {}
    for node in gm.graph.find_nodes(op="placeholder"):
        grapharg = node.meta.get("grapharg")
        value = node.meta.get("example_value")
        local_name = getattr(getattr(grapharg, "source", None), "local_name", None)
        if local_name is None or not isinstance(value, torch.Tensor):
            continue
        dims[local_name] = frozenset(i for i, size in enumerate(value.shape) if isinstance(size, torch.SymInt))
    return dims
