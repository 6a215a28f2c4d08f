"""Undoing a registration the code itself makes, which may not be there yet (round 24 of the
precision benchmark).

`def __enter__(self): ...; try: backend.deregister_mem_pool(_pool) except RuntimeError: pass` and
`def __exit__(self, *args): ...; backend.register_mem_pool(_pool)` (apex's NCCL memory pool): the
try's one statement undoes a registration (`deregister_*`, `unregister_*`) that the same file makes
with the same arguments (`register_mem_pool(_pool)`). On the first use nothing is registered yet,
and the undo fails; the state the code wants before going on, "not registered", holds either way,
and the file's own registration call, unguarded or guarded on its own, is where a real failure of
the registration shows. Nothing is reported, here and for `except RuntimeError`.

`undoes_own_registration` asks: the try has no `else:` or `finally:` and its body is one call
standing alone, of a method or function whose name starts with `deregister` or `unregister`; the
file calls the name without that prefix (`register...`) with the same arguments; and the handler
only passes or logs. Near misses, still reported: the registration itself in a try (`try:
backend.register_mem_pool(_pool) except RuntimeError: pass`, the labelled problem of the same case),
an undo of something the file never registers, an undo with other arguments, a handler that binds
or computes something.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import callee, is_logging_call, same_node

_UNDOES = ("deregister", "unregister")


def undoes_own_registration(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try only undoes a registration that the file makes itself with the same arguments, and
    the handler only passes or logs (see the module docstring)."""
    if node.orelse or node.finalbody or len(node.body) != 1 or not handler.body:
        return False
    stmt = node.body[0]
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    undo = stmt.value
    name = callee(undo)
    prefix = next((p for p in _UNDOES if name.startswith(p)), None)
    if prefix is None:
        return False
    done = "register" + name[len(prefix) :]
    if not all(
        isinstance(inner, ast.Pass) or (isinstance(inner, ast.Expr) and is_logging_call(inner.value))
        for inner in handler.body
    ):
        return False
    return any(
        isinstance(call, ast.Call)
        and callee(call) == done
        and same_node(call.args, undo.args)
        and same_node(call.keywords, undo.keywords)
        for call in pysource.nodes(tree)
    )
