"""The size ranges a traced graph allows on the dynamic dims of its entry's tensor arguments.

Dynamo turns a check on a dynamic size in the traced code (``assert t <= block_size``,
``if x.shape[0] <= 8:``, ``torch._check``) into a guard and narrows that size's range in its
ShapeEnv. The bytecode swap skips guards, so the entry records, for each captured code, the
ranges narrower than Dynamo's default (at least 2, no upper bound) of sizes of its own tensor
arguments (:func:`traced_size_bounds`, read while Dynamo compiles), and a swapped call with a
size outside them takes the guarded path (:func:`within`). Only ranges of single sizes are kept:
a guard relating sizes (``s0 * s1 <= n``, ``s0 % 8 == 0``, ``s0 == s1``) is not checked on the
swapped path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import sympy
import torch
from torch._dynamo.source import LocalSource, TensorProperty, TensorPropertySource
from torch.utils._sympy.numbers import int_oo

DEFAULT_LOWER = 2  # Dynamo's lower bound of a backed dynamic size (0 and 1 are specialized)


@dataclasses.dataclass(frozen=True)
class SizeBound:
    """Dim ``dim`` of argument ``name`` (at ``position`` among the call's positional arguments
    when it is one) must be in ``lower..upper`` (``upper`` None: no upper bound)."""

    name: str
    position: int | None
    dim: int
    lower: int
    upper: int | None


def traced_size_bounds(positional_names: Sequence[str]) -> tuple[SizeBound, ...]:
    """The narrowed ranges of the current Dynamo compile's argument sizes; ``positional_names``
    are the names of the call's positional parameters in order (without a bound ``self``).
    Empty outside a compile."""
    context = torch._guards.TracingContext.try_get()
    fake_mode = getattr(context, "fake_mode", None)
    shape_env = getattr(fake_mode, "shape_env", None)
    if shape_env is None:
        return ()
    bounds = []
    for symbol, sources in shape_env.var_to_sources.items():
        value_range = shape_env.var_to_range.get(symbol)
        if value_range is None:
            continue
        lower = DEFAULT_LOWER if value_range.lower in (-int_oo, -sympy.oo) else int(value_range.lower)
        upper = None if value_range.upper in (int_oo, sympy.oo) else int(value_range.upper)
        if lower <= DEFAULT_LOWER and upper is None:
            continue
        for source in sources:
            if (
                isinstance(source, TensorPropertySource)
                and source.prop is TensorProperty.SIZE
                and isinstance(source.base, LocalSource)
            ):
                name = source.base.local_name
                position = positional_names.index(name) if name in positional_names else None
                bounds.append(SizeBound(name, position, source.idx, lower, upper))
    return tuple(bounds)


def within(bounds: Sequence[SizeBound], args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> bool:
    """Whether every bounded size of this call (positional ``args`` without a bound ``self``) is
    in its range. The call must have the dispatch signature of the capture the bounds were
    recorded with (the same arguments passed the same way, tensors of the same rank)."""
    for bound in bounds:
        passed_by_position = bound.position is not None and bound.position < len(args)
        value = args[bound.position] if passed_by_position else kwargs[bound.name]
        size = value.shape[bound.dim]
        if size < bound.lower or (bound.upper is not None and size > bound.upper):
            return False
    return True
