"""A caught exception kept in a name and raised later, away from the try's block, read by
`broad_except` before it reports a handler (round 24 of the precision benchmark). It widens
`error_reach.deferred_reraise`, whose raise stands after the try in the same block, to two other
places the kept error is raised from:

- *after the loop the handler leaves* (`raised_after_loop`): the try stands directly in the body of
  a `for` or `while` loop, the handler only keeps the caught exception in a name (`last_error =
  error`), logs and ends with `break` or `continue`, and the statement right after the loop raises
  that name (`raise last_error`, `raise last_error if last_error else RuntimeError(...)`, or
  `if last_error: raise last_error`): a failure that ends the loop is raised with its traceback, one
  that moves on to the next turn is raised if no later turn succeeds (optimum-habana's dataset
  load, trying fallback names, that stops at an unexpected error and raises it). Near misses: a
  statement between the loop and the raise, a raise of something else, a handler that also binds a
  substitute result.
- *by every caller* (`raised_by_caller`): the handler only keeps the caught exception in a name,
  binds failure flags to constants (`success = False`) and logs; every `return` of its function
  that hands back a value hands back that name (alone, or at one position of a tuple of a fixed
  width: `return None, err`, `return success, err`), and every call of the function in the changed
  files unpacks the result into names and raises the error's name below it in the calling
  function, with no other binding of that name in between (`dset, err = load_dset(args)`, then
  `if err is not None: raise err`).
  The error waits until the processes of a distributed job agree that one failed (catching is what
  keeps the others out of a deadlock in the collective), then reaches the user (Megatron-DeepSpeed's
  dataset preprocessing). Near misses: a caller that drops the error (a call as a statement, the
  element unpacked into a name that is never raised), a `return` of something else, no caller in
  the changed files.

Both give nothing, for `broad-except` and `runtime-error-fallback` alike (`broad_except._passes_error_on`);
the tests, with their near misses, are in `tests/reviewbot/engine/test_engine_round24_tune23.py`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.rules.common import (
    FileContext,
    callee,
    innermost_function,
    is_logging_call,
    named_none_test,
    statement_blocks,
)


def _kept(body: list[ast.stmt], caught: str | None, flags: bool) -> set[str] | None:
    """The plain names `body` (a handler's statements) binds the caught exception (named `caught`)
    to, when its other statements only log, pass or (with `flags`) bind plain names to constants;
    None otherwise (or when it binds none)."""
    if caught is None:
        return None
    kept: set[str] = set()
    for stmt in body:
        if isinstance(stmt, ast.Assign) and all(isinstance(target, ast.Name) for target in stmt.targets):
            names = {target.id for target in stmt.targets if isinstance(target, ast.Name)}
            if isinstance(stmt.value, ast.Name) and stmt.value.id == caught:
                kept |= names
                continue
            if flags and isinstance(stmt.value, ast.Constant):
                continue
            return None
        if not (isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))):
            return None
    return kept or None


def _raised(exc: ast.expr | None, names: set[str]) -> bool:
    """`exc` is one of `names`, or a conditional expression that picks one of them when it is set
    (`last_error if last_error else RuntimeError(...)`, `... if last_error is not None else ...`)."""
    if isinstance(exc, ast.Name):
        return exc.id in names
    if not isinstance(exc, ast.IfExp) or not (isinstance(exc.body, ast.Name) and exc.body.id in names):
        return False
    return _tests_set(exc.test, exc.body.id)


def _tests_set(test: ast.expr, name: str) -> bool:
    """`name` or `name is not None`."""
    if isinstance(test, ast.Name):
        return test.id == name
    return named_none_test(test, (name,)) is ast.IsNot


def _raises_kept(stmt: ast.stmt, kept: set[str]) -> bool:
    """`raise <kept>` (`_raised`), or an `if` testing a kept name as set whose body raises it."""
    if isinstance(stmt, ast.Raise):
        return _raised(stmt.exc, kept)
    if not isinstance(stmt, ast.If):
        return False
    names = {name for name in kept if _tests_set(stmt.test, name)}
    return any(isinstance(item, ast.Raise) and _raised(item.exc, names) for item in stmt.body)


def _holding_block(tree: ast.AST, stmt: ast.stmt) -> tuple[ast.AST, list[ast.stmt], int] | None:
    """(the node, its statement list that holds `stmt` directly, the index there)."""
    for node in [tree, *pysource.statements(tree)]:
        for block in statement_blocks(node):
            for index, item in enumerate(block):
                if item is stmt:
                    return node, block, index
    return None


def raised_after_loop(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler keeps the caught exception and leaves the loop's turn, and the statement right
    after the loop raises it (see the module docstring)."""
    if not handler.body or not isinstance(handler.body[-1], (ast.Break, ast.Continue)):
        return False
    kept = _kept(handler.body[:-1], handler.name, flags=False)
    if kept is None:
        return False
    found = _holding_block(tree, node)
    if found is None:
        return False
    loop, block, _ = found
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or block is not loop.body:
        return False
    outer = _holding_block(tree, loop)
    if outer is None:
        return False
    _, after, index = outer
    return index + 1 < len(after) and _raises_kept(after[index + 1], kept)


def _returns(function: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.Return]:
    """The function's own `return` statements (not those of nested functions)."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        current = pending.pop()
        if isinstance(current, ast.Return):
            yield current
        if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(pysource.children(current))


def _error_position(function: ast.FunctionDef | ast.AsyncFunctionDef, kept: set[str]) -> tuple[int, int] | None:
    """(the position of the kept name, the tuple's width) when every `return` of `function` with a
    value hands back a kept name at the same position of a tuple of the same width; (0, 0) when it
    hands back the name alone; None otherwise (or when no `return` has a value)."""
    shapes: set[tuple[int, int]] = set()
    for stmt in _returns(function):
        value = stmt.value
        if value is None:
            return None
        if isinstance(value, ast.Name) and value.id in kept:
            shapes.add((0, 0))
            continue
        if not isinstance(value, ast.Tuple):
            return None
        positions = [i for i, element in enumerate(value.elts) if isinstance(element, ast.Name) and element.id in kept]
        if len(positions) != 1:
            return None
        shapes.add((positions[0], len(value.elts)))
    return shapes.pop() if len(shapes) == 1 else None


def _unpacked_and_raised(trees: list[ast.Module], name: str, position: int, width: int) -> bool:
    """Every call of `name` in `trees` is the value of an assignment that unpacks the error into a
    plain name (the whole result for `width` 0), which the calling function raises below it
    (`_raises_unpacked`); at least one call."""
    calls = sum(
        1 for tree in trees for sub in pysource.nodes(tree) if isinstance(sub, ast.Call) and callee(sub) == name
    )
    unpacked = 0
    for tree in trees:
        for stmt in pysource.statements(tree):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call) and callee(stmt.value) == name:
                if not _raises_unpacked(tree, stmt, position, width):
                    return False
                unpacked += 1
    return unpacked > 0 and unpacked == calls


def _raises_unpacked(tree: ast.Module, stmt: ast.Assign, position: int, width: int) -> bool:
    """`stmt` unpacks the error into a plain name that its function raises below it, with no other
    binding of the name in between."""
    if len(stmt.targets) != 1:
        return False
    target = stmt.targets[0]
    if width:
        if not (isinstance(target, (ast.Tuple, ast.List)) and len(target.elts) == width):
            return False
        target = target.elts[position]
    caller = innermost_function(tree, stmt)
    if not isinstance(target, ast.Name) or caller is None:
        return False
    error = target.id
    stores = [
        item.lineno
        for item in pysource.walk(caller)
        if isinstance(item, ast.Name) and item.id == error and isinstance(item.ctx, (ast.Store, ast.Del))
    ]
    return any(
        isinstance(item, ast.Raise)
        and isinstance(item.exc, ast.Name)
        and item.exc.id == error
        and item.lineno > stmt.lineno
        and not any(stmt.lineno < line <= item.lineno for line in stores)
        for item in pysource.walk(caller)
    )


def raised_by_caller(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler keeps the caught exception, its function returns it, and every caller in the
    changed files raises it (see the module docstring)."""
    kept = _kept(handler.body, handler.name, flags=True)
    if kept is None:
        return False
    function = innermost_function(ctx.tree, node)
    if function is None:
        return False
    shape = _error_position(function, kept)
    if shape is None:
        return False
    trees = [ctx.tree, *(tree for path, tree in ctx.changed_trees("head") if path != ctx.path)]
    return _unpacked_and_raised(trees, function.name, *shape)
