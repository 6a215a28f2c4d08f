"""Removes no-op conversions and dead nodes from a Dynamo FX graph.

A ``x.contiguous()``, ``x.to(...)`` or ``x.type_as(y)`` whose recorded result has the same
dtype, device, sizes and strides as ``x`` returns ``x`` itself in eager mode, so using ``x``
in its place is exact. Sizes are compared as symbolic expressions (no guard is added).
Dead nodes are then removed, keeping every node that may have a side effect (a call of an op
that mutates an argument included).
"""

from __future__ import annotations

import logging

import torch
from torch import fx

from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))


_NOOP_METHODS = {"contiguous", "to", "type_as"}
_NOOP_FUNCTIONS = {torch.Tensor.contiguous, torch.Tensor.to, torch.Tensor.type_as}


def _layout(value: object) -> tuple | None:
    if not isinstance(value, torch.Tensor):
        return None
    return (value.dtype, value.device, tuple(map(str, value.shape)), tuple(map(str, value.stride())))


def _is_noop(node: fx.Node) -> bool:
    if not (
        (node.op == "call_method" and node.target in _NOOP_METHODS)
        or (node.op == "call_function" and node.target in _NOOP_FUNCTIONS)
    ):
        return False
    if not node.args or not isinstance(node.args[0], fx.Node):
        return False
    if node.kwargs.get("copy") or node.kwargs.get("memory_format") is not None:
        return False
    before = _layout(node.args[0].meta.get("example_value"))
    after = _layout(node.meta.get("example_value"))
    return before is not None and before == after


def _mutates(target: object) -> bool:
    """Whether ``target`` is an op (or an op packet, any of its overloads) whose schema mutates
    an argument."""
    if isinstance(target, torch._ops.OpOverloadPacket):
        return any(getattr(target, name)._schema.is_mutable for name in target.overloads())
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


def _is_impure(node: fx.Node) -> bool:
    """FX's purity test, except that a method call is impure unless it is a known no-op
    conversion (FX treats every ``call_method`` as pure, which would drop an unused
    ``x.add_(1)``), and a call of an op packet with a mutable schema is impure (torch 2.11's test
    looks at ``OpOverload`` schemas only, which would drop an unused call of a custom op that
    writes into an ``out`` argument, as an out-parameter splitting op does)."""
    if node.op == "call_method":
        return node.target not in _NOOP_METHODS
    return node.is_impure() or (node.op == "call_function" and _mutates(node.target))


def eliminate_noops_and_dead_code(gm: fx.GraphModule) -> None:
    removed = 0
    for node in list(gm.graph.nodes):
        if _is_noop(node):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            removed += 1
    if gm.graph.eliminate_dead_code(is_impure_node=_is_impure) or removed:
        gm.recompile()
    logger.debug("no-op elimination removed %d node(s)", removed)
