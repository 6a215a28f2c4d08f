"""A try whose result nothing reads (round 24 of the precision benchmark).

```
try:
    router_logits_bs = router_logits.view(B, S, -1)
except Exception:
    router_logits_bs = router_logits
...
if need_router_logits:
    router_logits_bs = router_logits.view(B, S, num_experts)
    return y, router_logits_bs
```

The try only binds plain names to values (`name = <expression>`), and each of those names is `_`
or is bound again before every read of it after the try: a read in the function counts only when
an assignment of the name stands before it, after the try, directly in a block that holds the read
(the statement itself or one around it), so every way to the read passes that assignment. The
handler only passes, reports, or binds the same names to values at hand (a name, a constant, an
attribute of a name). Whatever the try computes, and whatever the handler puts in its place, is
dead: no result of the program can change by the catch-all (ktransformers' router logits viewed
again before they are returned, gpt-neox's `_ = get_state(...)` "just for logging purposes").
What is left is the catch-all itself around dead code: `broad_except`'s `P3`
`broad-except.unread-result`, read after the reported fallback and before the existing route.

Near misses: a name read after the try with no assignment before the read on its way (a read
under an `if` whose assignment stands in another branch, or the read first), a name read by a
nested function or declared `global`/`nonlocal`, a try standing in a loop with any read of the
name in its function (the next turn may read this turn's value), a handler that computes its
substitute (a call), and a try body with a statement that is not a binding (`self.save(state)`:
the work itself, whose loss round 12's "nothing substituted" keeps at `P2`).
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import innermost_function, is_logging_call

_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


def _bound_plain(stmt: ast.stmt) -> list[str] | None:
    """The names `stmt` binds when it is `name = <expression>` (one or more plain-name targets, or a
    tuple of them); None for any other statement."""
    if not isinstance(stmt, ast.Assign):
        return None
    names: list[str] = []
    for target in stmt.targets:
        parts = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(part, ast.Name) for part in parts):
            return None
        names.extend(part.id for part in parts if isinstance(part, ast.Name))
    return names


def _at_hand(value: ast.expr) -> bool:
    node = value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, (ast.Name, ast.Constant))


def _handler_substitutes_only(handler: ast.ExceptHandler, bound: set[str]) -> bool:
    """The handler only passes, reports, or binds names of `bound` to values at hand."""
    for stmt in handler.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)):
            continue
        names = _bound_plain(stmt)
        if names is None or not set(names) <= bound:
            return False
        assert isinstance(stmt, ast.Assign)
        if not _at_hand(stmt.value):
            return False
    return True


def _paths(function: ast.AST) -> dict[int, list[tuple[list[ast.stmt], int]]]:
    """id of each statement of `function`'s own code -> the (block, index) pairs from the function's
    body down to it: the blocks that hold it or a statement around it, with that statement's index."""
    found: dict[int, list[tuple[list[ast.stmt], int]]] = {}

    def visit(block: list[ast.stmt], around: list[tuple[list[ast.stmt], int]]) -> None:
        for index, stmt in enumerate(block):
            here = [*around, (block, index)]
            found[id(stmt)] = here
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in pysource.STATEMENT_LISTS:
                held = getattr(stmt, field, None)
                if not isinstance(held, list):
                    continue
                if field in ("handlers", "cases"):
                    for clause in held:
                        visit(clause.body, here)
                else:
                    visit(held, here)

    visit(getattr(function, "body", []), [])
    return found


def _rebound_before(path: list[tuple[list[ast.stmt], int]], name: str, after_line: int) -> bool:
    """An assignment of `name` stands directly in a block of `path`, before the path's statement
    there and after line `after_line`."""
    for block, index in path:
        for stmt in block[:index]:
            names = _bound_plain(stmt)
            if names is not None and name in names and stmt.lineno > after_line:
                return True
    return False


def unread_result(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try binds only names whose every later read is preceded by another binding (or `_`), and the
    handler substitutes nothing else (see the module docstring)."""
    if node.orelse or node.finalbody or not handler.body:
        return False
    bound: set[str] = set()
    for stmt in node.body:
        names = _bound_plain(stmt)
        if names is None:
            return False
        bound.update(names)
    if not _handler_substitutes_only(handler, bound):
        return False
    function = innermost_function(tree, node)
    if function is None:
        return False
    for sub in pysource.walk(function):
        if isinstance(sub, (ast.Global, ast.Nonlocal)) and bound & set(sub.names):
            return False
        if (
            isinstance(sub, _SCOPES)
            and sub is not function
            and any(isinstance(n, ast.Name) and n.id in bound for n in pysource.walk(sub))
        ):
            return False
    paths = _paths(function)
    try_path = paths.get(id(node))
    if try_path is None:
        return False
    in_loop = any(isinstance(block[index], _LOOPS) for block, index in try_path[:-1])
    end = node.end_lineno or node.lineno
    inside = {id(stmt) for stmt in pysource.statements(node)}
    for stmt in pysource.statements(function):
        if id(stmt) in inside or id(stmt) == id(node) or id(stmt) not in paths:
            continue
        for name in bound:
            if not _reads_here(stmt, name):
                continue
            if in_loop:
                return False
            if stmt.lineno <= end:
                continue
            if not _rebound_before(paths[id(stmt)], name, end):
                return False
    return True


def _reads_here(stmt: ast.stmt, name: str) -> bool:
    """`stmt` reads `name` in its own expressions (a compound statement's test, iterable, items), not in
    the statements it holds, which are read on their own."""
    for field in stmt._fields:
        if field in pysource.STATEMENT_LISTS:
            continue
        value = getattr(stmt, field, None)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, ast.AST) and not isinstance(child, ast.stmt) and _reads_expr(child, name):
                return True
    return False


def _reads_expr(expr: ast.AST, name: str) -> bool:
    return any(
        isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) for sub in pysource.walk(expr)
    )
