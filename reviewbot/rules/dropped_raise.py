"""A handler that raised on every entry at the base and now lets some entries through with nothing
done (round 24 of the precision benchmark, optimum-intel's task inference).

`except KeyError as e: raise KeyError("The task could not be inferred ... pass --task")` became
`except KeyError as e: try: config = AutoConfig.from_pretrained(name); if "Mistral..." in
config.architectures: task = "text-generation-with-past" except Exception: raise KeyError(...)`:
the base's raise still stands in the handler, but under a condition, and an entry whose config
loads and is not Mistral's falls through with only `config` bound, a name nothing after the try
reads. The caller then gets the value the try was to replace (`"auto"`) and fails later with a
misleading error. The handler may be narrow; the harm is the missing re-raise.

`raise_made_conditional` asks, for a handler of the head revision:

- the file's base version holds the same try body (`same_node`) in a function of the same name
  (or at module level, as the try stands), with a handler catching the same types (the `except`
  clause's type compared as code) whose last statement is a `raise`, with no `return`, `break` or
  `continue` before it: every entry raised;
- the head handler differs from it and still holds that `raise` (`ast.dump` equal), nested: the
  change put the raise under a condition;
- some way through the head handler falls off its end (`_fall_through_paths`: the branches of
  `if`, the body and `else:` of a nested `try` and each of its handlers that does not end in
  `raise`, a loop run or skipped; a nested `finally:` counts as a change) having bound no name
  that a statement after the try in the same function reads, and having made no other change (an
  assignment to an attribute or item, a call that is no logging call): that entry now passes
  silently where it raised.

Reported as `P2` `broad-except.raise-made-conditional`. Near misses: a handler whose every way
through binds what the code after the try reads (`else: raise` restored, or a `task =` on every
branch), one that returns or leaves the loop instead (an answer, not a fall-through), a base
handler that did not raise on every entry, a raise the change rewrote.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import FileContext, innermost_function, is_logging_call, same_node

# a way through a handler that changes something besides binding plain names
_EFFECT = "*effect*"
# ways through a handler followed before giving up (each `if` doubles them)
_MAX_PATHS = 64


def _ends_in_raise(body: list[ast.stmt]) -> bool:
    """The last statement is a `raise` and none before it leaves the block."""
    if not body or not isinstance(body[-1], ast.Raise):
        return False
    return not any(
        isinstance(sub, (ast.Return, ast.Break, ast.Continue)) for stmt in body[:-1] for sub in pysource.walk(stmt)
    )


def _bound(stmt: ast.stmt) -> frozenset[str]:
    """What a simple statement changes: the plain names it binds, and `_EFFECT` for an attribute or
    item store or a call that is no logging call."""
    found: set[str] = set()
    if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            for sub in pysource.walk(target):
                if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                    found.add(sub.id)
                elif isinstance(sub, (ast.Attribute, ast.Subscript)) and isinstance(sub.ctx, ast.Store):
                    found.add(_EFFECT)
    elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not is_logging_call(stmt.value):
        found.add(_EFFECT)
    elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
        found.update((alias.asname or alias.name).split(".")[0] for alias in stmt.names)
    elif not isinstance(stmt, (ast.Expr, ast.Pass)):
        found.add(_EFFECT)
    return frozenset(found)


def _fall_through_paths(body: list[ast.stmt], start: frozenset[str]) -> list[frozenset[str]] | None:
    """What each way through `body` that falls off its end changes (`_bound`), starting from `start`;
    ways that raise or leave (`return`, `break`, `continue`) are dropped. None past `_MAX_PATHS`."""
    paths = [start]
    for stmt in body:
        following: list[frozenset[str]] = []
        for path in paths:
            step = _through(stmt, path)
            if step is None:
                return None
            following.extend(step)
        if len(following) > _MAX_PATHS:
            return None
        paths = following
    return paths


def _through(stmt: ast.stmt, path: frozenset[str]) -> list[frozenset[str]] | None:
    """The ways through one statement from `path` (see `_fall_through_paths`)."""
    if isinstance(stmt, (ast.Raise, ast.Return, ast.Break, ast.Continue)):
        return []
    if isinstance(stmt, ast.If):
        return _joined(_fall_through_paths(stmt.body, path), _fall_through_paths(stmt.orelse, path))
    if isinstance(stmt, (ast.Try, ast.TryStar)):
        done = _fall_through_paths(stmt.body, path)
        if done is None:
            return None
        ways: list[frozenset[str]] | None = []
        for after_body in done:
            ways = _joined(ways, _fall_through_paths(stmt.orelse, after_body))
        for handler in stmt.handlers:
            ways = _joined(ways, _fall_through_paths(handler.body, path))
        if ways is None or not stmt.finalbody:
            return ways
        return [way | frozenset([_EFFECT]) for way in ways]  # a `finally:` clause is taken for a change
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return _fall_through_paths(stmt.body, path)
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
        return _joined([path], _fall_through_paths([*stmt.body, *stmt.orelse], path))
    return [path | _bound(stmt)]


def _joined(first: list[frozenset[str]] | None, second: list[frozenset[str]] | None) -> list[frozenset[str]] | None:
    return None if first is None or second is None else [*first, *second]


def base_handler(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> ast.ExceptHandler | None:
    """The base version's handler of the same try body, in a function of the same name, catching the
    same types."""
    if ctx.revision != "head" or handler.type is None:
        return None
    base = next((tree for path, tree in ctx.changed_trees("base") if path == ctx.path), None)
    if base is None:
        return None
    function = innermost_function(ctx.tree, node)
    where = None if function is None else function.name
    caught = ast.dump(handler.type)
    for other in pysource.statements(base):
        if not isinstance(other, (ast.Try, ast.TryStar)) or not same_node(other.body, node.body):
            continue
        holder = innermost_function(base, other)
        if (None if holder is None else holder.name) != where:
            continue
        for earlier in other.handlers:
            if earlier.type is not None and ast.dump(earlier.type) == caught:
                return earlier
    return None


def _read_after(tree: ast.Module, node: ast.Try | ast.TryStar) -> set[str] | None:
    """The names read by statements after `node` in its function (by line), or None at module level."""
    function = innermost_function(tree, node)
    if function is None:
        return None
    end = node.end_lineno or node.lineno
    return {
        sub.id
        for sub in pysource.walk(function)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.lineno > end
    }


def raise_made_conditional(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The base's handler raised on every entry; the head's holds the same `raise` under a condition
    and some way through it falls off its end having done nothing the code after the try reads (see
    the module docstring)."""
    earlier = base_handler(ctx, node, handler)
    if earlier is None or not _ends_in_raise(earlier.body) or same_node(earlier.body, handler.body):
        return False
    raised = ast.dump(earlier.body[-1])
    if any(ast.dump(stmt) == raised for stmt in handler.body):
        return False
    if not any(isinstance(stmt, ast.Raise) and ast.dump(stmt) == raised for stmt in pysource.statements(handler)):
        return False
    read = _read_after(ctx.tree, node)
    paths = _fall_through_paths(handler.body, frozenset())
    if read is None or not paths:
        return False
    return any(_EFFECT not in path and not (path & read) for path in paths)
