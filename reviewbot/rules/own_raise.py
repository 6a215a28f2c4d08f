"""A try that raises on purpose into its own catch-all (round 20 of the precision benchmark).

`try: if torch.jit.is_scripting(): raise Exception(); from torch.compiler import is_compiling ...
except Exception: <stand-ins>` (torchrec's compiler probe) and `try: ...; if status: assert False,
"dirty tree"; revision = "+" + rev(); except: revision = "+local"` (DeepGEMM's local version): the
try's own `raise` (or `assert False`) jumps to the handler on purpose, so the handler is the branch
written for that condition, stated in code, and what it binds is a stand-in (a constant, a stub
function), not a substitute computed from the failed work. What is left is exceptions used as
control flow, and the catch-all also taking the try's other failures into that branch: a `P3` nit,
not the `P2` of a hidden swallow. The finding keeps the swallow's claim (`P0`) so that the
exception-injection experiment, not the shape, decides a blocker; unconfirmed it is `P3`.

`raises_into_handler` asks, of a catch-all handler that does not re-raise: a statement of the try body (at any
depth, not in a nested def, class or try) is a `raise` of a new exception (`raise X(...)`, `raise X`;
not a bare `raise` or a re-raise of a caught name) or an `assert` of a false constant (`assert
False`, `assert 0`); and every statement of the handler is a report (a call standing alone whose
arguments call nothing but formatting), `pass`, a definition, or an assignment or `return` of a
constant (or nothing). Near misses: a try with no raise of its own (a plain swallow), a handler that
computes a substitute (`return build(x)`), a raise only inside a nested function.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from reviewbot.rules.common import is_logging_call

_OWN_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda, ast.Try, ast.TryStar)


def _own_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of `body` at any depth, not those of nested defs, classes and tries."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, _OWN_SCOPES):
            continue
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, list):
                yield from _own_statements([s for s in inner if isinstance(s, ast.stmt)])
        for case in getattr(stmt, "cases", []) or []:
            yield from _own_statements(case.body)


def _raises_on_purpose(stmt: ast.stmt) -> bool:
    """`raise X(...)`/`raise X` where `X` is no lower-case name (a class, not a caught value), or
    `assert <false constant>`."""
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        target = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        if isinstance(target, ast.Attribute):
            return target.attr[:1].isupper()
        return isinstance(target, ast.Name) and target.id[:1].isupper()
    return isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant) and not stmt.test.value


def _stand_in(stmt: ast.stmt) -> bool:
    """A report, `pass`, a definition, or an assignment or `return` of a constant or nothing."""
    if isinstance(stmt, (ast.Pass, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return is_logging_call(stmt.value)
    if isinstance(stmt, ast.Return):
        return stmt.value is None or isinstance(stmt.value, ast.Constant)
    return isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)


def raises_into_handler(try_body: list[ast.stmt], handler: ast.ExceptHandler) -> str | None:
    """How the try (`try_body`) raises on purpose into the handler, which only binds stand-ins (see
    the module docstring): "assert" when every such statement is an `assert` (which `python -O`
    removes, so the jump vanishes there), "raise" otherwise; None when it does not."""
    if not handler.body or not all(_stand_in(stmt) for stmt in handler.body):
        return None
    jumps = [stmt for stmt in _own_statements(try_body) if _raises_on_purpose(stmt)]
    if not jumps:
        return None
    return "assert" if all(isinstance(stmt, ast.Assert) for stmt in jumps) else "raise"
