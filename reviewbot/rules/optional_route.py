"""An optional package's route, the function's own other route after it (round 24 of the precision
benchmark).

`def get_available_memory_gb(): try: import psutil; return psutil.virtual_memory().available / 2**30
except: pass` and then the same figure read from `/proc/meminfo`, else `0` (NVIDIA Fuser's build
probe): the try starts by importing a third-party package that the file imports nowhere outside a
try, answers the function with it, and the handler only passes or logs, so a missing package
falls through to the function's next way of computing the same answer. "Not installed" is the
failure the handler is for, and the other route is code the function runs anyway on machines
without the package. What is left is a nit (`P3`): the catch-all also sends a bug of the first
route (or, bare, a Ctrl+C) to the second without a trace; `except ImportError` says what is
expected.

`optional_route` asks: the try has no `else:` or `finally:`; its first statement is an absolute
import of modules outside the standard library and the repository (no folder of the file's path),
none of which the file imports outside a try; its last statement returns a value; it stands
directly in a function's body, and a statement of that function after it returns a value that is no
constant (the other route); and the handler only passes or logs. Near misses, still the swallow: an
import of a package the file also imports unguarded, a function whose code after the try only
returns a constant (`return None`: the work skipped, not done another way), a handler that binds a
substitute.
"""

from __future__ import annotations

import ast
import sys

from reviewbot import pysource
from reviewbot.rules.common import FileContext, imports_any, innermost_function, is_logging_call

_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _optional_modules(ctx: FileContext, stmt: ast.stmt) -> set[str] | None:
    """The top-level names `stmt` imports when it is an absolute import of modules outside the
    standard library and the repository; None otherwise."""
    if isinstance(stmt, ast.ImportFrom):
        if stmt.level or not stmt.module:
            return None
        tops = {stmt.module.split(".")[0]}
    elif isinstance(stmt, ast.Import):
        tops = {alias.name.split(".")[0] for alias in stmt.names}
    else:
        return None
    folders = set(ctx.path.split("/")[:-1])
    if tops & folders or tops & sys.stdlib_module_names:
        return None
    return tops


def _imported_unguarded(tree: ast.Module, tops: set[str]) -> bool:
    """Some import of the file outside every try body imports one of `tops`."""
    guarded = {
        id(sub)
        for node in pysource.nodes(tree)
        if isinstance(node, (ast.Try, ast.TryStar))
        for stmt in node.body
        for sub in pysource.walk(stmt)
    }
    return imports_any(tree, tops, guarded)


def _returns_computed(body: list[ast.stmt]) -> bool:
    """A `return` of a value that is no constant somewhere in `body` (not in nested definitions)."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _OWN_SCOPES):
            continue
        if isinstance(node, ast.Return) and node.value is not None and not isinstance(node.value, ast.Constant):
            return True
        pending.extend(pysource.children(node))
    return False


def optional_route(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The optional package (`psutil`) when the try is its route to the function's answer and the
    handler falls through to the function's other route (see the module docstring); None otherwise."""
    if node.orelse or node.finalbody or not handler.body:
        return None
    if not all(
        isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))
        for stmt in handler.body
    ):
        return None
    last = node.body[-1]
    if not (isinstance(last, ast.Return) and last.value is not None):
        return None
    tops = _optional_modules(ctx, node.body[0])
    if tops is None or _imported_unguarded(ctx.tree, tops):
        return None
    function = innermost_function(ctx.tree, node)
    if function is None:
        return None
    index = next((i for i, stmt in enumerate(function.body) if stmt is node), None)
    if index is None or not _returns_computed(function.body[index + 1 :]):
        return None
    return ", ".join(sorted(tops))
