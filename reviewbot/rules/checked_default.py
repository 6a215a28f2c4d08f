"""A guessed default that the code checks right after the try (round 24 of the precision benchmark).

```
cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
if cuda_home is None:
    try:
        nvcc = subprocess.check_output(["which", "nvcc"]).decode().rstrip()
        cuda_home = os.path.dirname(os.path.dirname(nvcc))
    except Exception:
        cuda_home = "/usr/local/cuda"
        if not os.path.exists(cuda_home):
            cuda_home = None
assert cuda_home is not None
```

The try binds a name; the handler only logs and binds that name to a constant (the last source
tried: a default location), optionally followed by a check of it (`if <test reading the name>:
name = None`); and the first statement that runs after the try (the next one in its block, or, when
the try ends an `if` or `with` block, the one after that statement) fails when the name is empty:
`assert name is not None` (or `assert name`), or `if name is None:` (or `if not name:`) whose body
ends in `raise`. It is round 16's alternatives tried in turn (`error_reach.unrolled_alternatives`)
with one more, guessed, source: no source answering fails right there, and what is left is a guess
that a wrong value makes fail at its first use (DeepGEMM's CUDA home, the search order PyTorch's own
helper uses). A `P3`: the catch-all also takes a bug of the lookup for "not found":
`broad-except.checked-default`.

Near misses: a handler that computes its default (a call), a check after the try that does not
fail (a warning, a `return`), a check that stands later than the first statement after the try.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import is_logging_call, named_none_test

_CONTINUED = (ast.If, ast.With, ast.AsyncWith)


def _binds_constant(stmt: ast.stmt) -> str | None:
    """The name of `name = <constant>`."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Constant)
    ):
        return stmt.targets[0].id
    return None


def _reads(expr: ast.AST, name: str) -> bool:
    return any(
        isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load) for sub in pysource.walk(expr)
    )


def _default(handler: ast.ExceptHandler) -> str | None:
    """The name the handler binds to a constant, when it only logs, binds it, and may then check it
    (`if <test reading it>: name = None`)."""
    work = [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
    if not work:
        return None
    name = _binds_constant(work[0])
    if name is None:
        return None
    for stmt in work[1:]:
        if not (
            isinstance(stmt, ast.If)
            and not stmt.orelse
            and _reads(stmt.test, name)
            and len(stmt.body) == 1
            and _binds_constant(stmt.body[0]) == name
            and isinstance(stmt.body[0], ast.Assign)
            and isinstance(stmt.body[0].value, ast.Constant)
            and stmt.body[0].value.value is None
        ):
            return None
    return name


def _next_statement(tree: ast.AST, node: ast.stmt) -> ast.stmt | None:
    """The statement that runs right after `node`: the next one in its block, or, when `node` ends the
    body of an `if` or `with`, the one after that statement (and so on outwards)."""
    path: list[tuple[ast.AST, list[ast.stmt], int]] = []

    def find(parent: ast.AST) -> bool:
        for field in pysource.STATEMENT_LISTS:
            held = getattr(parent, field, None)
            if not isinstance(held, list):
                continue
            blocks = [clause.body for clause in held] if field in ("handlers", "cases") else [held]
            for block in blocks:
                for index, stmt in enumerate(block):
                    if stmt is node or (
                        isinstance(stmt, ast.stmt)
                        and stmt.lineno <= node.lineno <= (stmt.end_lineno or stmt.lineno)
                        and find(stmt)
                    ):
                        path.append((parent, block, index))
                        return True
        return False

    if not find(tree):
        return None
    for parent, block, index in path:
        if index + 1 < len(block):
            return block[index + 1]
        if not isinstance(parent, _CONTINUED):
            return None
    return None


def _empty_test(test: ast.expr, name: str) -> bool:
    """`name is None` or `not name`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Name) and test.operand.id == name
    return named_none_test(test, (name,)) is ast.Is


def _fails_when_empty(stmt: ast.stmt, name: str) -> bool:
    """`assert name` / `assert name is not None`, or `if name is None:` / `if not name:` ending in `raise`."""
    if isinstance(stmt, ast.Assert):
        test = stmt.test
        if isinstance(test, ast.Name):
            return test.id == name
        return named_none_test(test, (name,)) is ast.IsNot
    return isinstance(stmt, ast.If) and _empty_test(stmt.test, name) and isinstance(stmt.body[-1], ast.Raise)


def checked_default(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The name of a guessed default checked right after the try (see the module docstring); None
    otherwise."""
    if node.orelse or node.finalbody:
        return None
    name = _default(handler)
    if name is None:
        return None
    bound = {
        sub.id
        for stmt in node.body
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store)
    }
    if name not in bound:
        return None
    after = _next_statement(tree, node)
    return name if after is not None and _fails_when_empty(after, name) else None
