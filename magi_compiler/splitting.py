"""Splitting an FX graph at ``splitting_ops`` (custom ops such as an attention op).

Each splitting op call becomes a piece of its own that runs eagerly; the nodes between
them become the pieces that get compiled. Op names are given as ``"ns::op"`` or
``"ns.op"``, optionally with an overload (``"ns::op.default"``).

Pieces take and return flat values (tensors, SymInts, scalars), never a tuple: an
``operator.getitem`` node goes to the piece of the value it indexes, so a splitting op
returning a tuple has its piece return the elements, which the split module passes on one
argument each. A compiled piece must not receive a tuple: Inductor flattens such inputs
only in the callable it compiles, while its saved artifact (what the cache and AOT load)
takes the flattened inputs, so the two would be called differently.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Sequence

import torch
from torch import fx
from torch.fx.passes.split_module import split_module


@dataclasses.dataclass
class Piece:
    name: str
    module: fx.GraphModule
    is_splitting_op: bool


def _op_names(target: object) -> set[str]:
    if isinstance(target, torch._ops.OpOverload):
        namespace, op = target.namespace, target._schema.name.split("::", 1)[1]
        overload = target._overloadname
        return {
            f"{namespace}::{op}",
            f"{namespace}.{op}",
            f"{namespace}::{op}.{overload}",
            f"{namespace}.{op}.{overload}",
        }
    if isinstance(target, torch._ops.OpOverloadPacket):
        # a packet call may resolve to any overload, so it matches the op under any of them
        namespace, op = target._qualified_op_name.split("::", 1)
        names = {f"{namespace}::{op}", f"{namespace}.{op}"}
        for overload in target.overloads():
            names |= {f"{namespace}::{op}.{overload}", f"{namespace}.{op}.{overload}"}
        return names
    return set()


def is_splitting_node(node: fx.Node, splitting_ops: Sequence[str]) -> bool:
    return node.op == "call_function" and bool(_op_names(node.target) & set(splitting_ops))


def split_graph(gm: fx.GraphModule, splitting_ops: Sequence[str]) -> tuple[fx.GraphModule, list[Piece]]:
    """Split ``gm`` at calls of ``splitting_ops``; returns the outer module and its pieces in order.

    The outer module calls its pieces as submodules ``submod_<n>``; callers may replace a
    piece by putting a callable of the same name in the outer module's ``__dict__``.
    """
    piece_of: dict[fx.Node, int] = {}
    splitting_pieces: set[int] = set()
    current = 0
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if _indexes_split_node(node, piece_of):
            piece_of[node] = piece_of[node.args[0]]
        elif is_splitting_node(node, splitting_ops):
            current += 1
            piece_of[node] = current
            splitting_pieces.add(current)
            current += 1
        else:
            piece_of[node] = current
    split_gm = split_module(gm, None, lambda node: piece_of[node], keep_original_order=True)
    pieces = []
    for name, module in split_gm.named_children():
        number = int(name.removeprefix("submod_"))
        assert isinstance(module, fx.GraphModule), f"split piece {name} is not a GraphModule"
        pieces.append(Piece(name=name, module=module, is_splitting_op=number in splitting_pieces))
    return split_gm, pieces


def _indexes_split_node(node: fx.Node, piece_of: dict[fx.Node, int]) -> bool:
    """Whether ``node`` takes an element of a tuple (or list) returned by a node already
    assigned to a piece (indexing a tensor is an ``operator.getitem`` too, and stays put)."""
    if node.op != "call_function" or node.target is not operator.getitem:
        return False
    source = node.args[0]
    return isinstance(source, fx.Node) and source in piece_of and _returns_sequence(source)


def _returns_sequence(node: fx.Node) -> bool:
    """Whether ``node`` returns a tuple or list: by its recorded example value (Dynamo records
    one on every node), else by the schema of the op it calls."""
    value = node.meta.get("example_value", node.meta.get("val"))
    if value is not None:
        return isinstance(value, (tuple, list))
    target = node.target
    if isinstance(target, torch._ops.OpOverloadPacket):
        schemas = [getattr(target, overload)._schema for overload in target.overloads()]
    elif isinstance(target, torch._ops.OpOverload):
        schemas = [target._schema]
    else:
        return False
    return any(len(schema.returns) != 1 or isinstance(schema.returns[0].type, torch.ListType) for schema in schemas)
