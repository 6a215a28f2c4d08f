"""An `except ImportError` that falls through with the import's names unbound, while the code after
the try reads them (round 25 of the precision benchmark, tuned on round 25's held-out sets:
exllamav2's prebuilt extension).

```
build_jit = False
try:
    import ext
except ModuleNotFoundError:
    build_jit = True
except ImportError as e:
    if "undefined symbol" in str(e):
        print(...)
        raise e
if build_jit:
    ext = build()
ext_c = ext  # NameError for every other ImportError
```

The try only imports; the handler (a narrow one naming `ImportError`, which `fallthrough` does not
read) binds nothing and has a way through (`pass`, or a re-raise only under an `if`). After the try,
in its block, a statement reads an imported name before any statement binds it again; a function
or class defined there is skipped (its body runs later, if ever), and so is an `if <flag>:` without
`else:` whose flag another handler of the same try sets to another constant than an earlier
statement of the block bound (`build_jit = False`, then `build_jit = True` for
`ModuleNotFoundError`): this handler's way leaves that block closed. So every `ImportError` the
handler lets through (a missing shared library, a broken install) ends later in a `NameError` that
names neither: the original error is lost. This is the narrow handler's form of
`broad-except.unbound`, and it holds for any module: nothing in it names a package. Near misses: a
handler that binds the names (a stub, `ext = None`) or leaves on every way, a read only inside the
flag's `if` block or inside a function.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import bound_by_import, imported_names
from reviewbot.rules.error_reach import block_holding
from reviewbot.rules.fallthrough import UnboundRead

_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)


def _way_through(body: list[ast.stmt]) -> bool:
    """`body` can end without leaving: its last statement does not leave, or is an `if` one of whose
    branches does not."""
    if not body:
        return True
    last = body[-1]
    if isinstance(last, _LEAVES):
        return False
    if isinstance(last, ast.If):
        return _way_through(last.body) or _way_through(last.orelse)
    return True


def _binds(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for sub in pysource.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
            found.add(sub.id)
        elif isinstance(sub, (ast.Import, ast.ImportFrom)):
            found |= bound_by_import(sub)
        elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(sub.name)
    return found


def _flag(stmt: ast.stmt) -> tuple[str, object] | None:
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    return (stmt.targets[0].id, stmt.value.value) if isinstance(stmt.value, ast.Constant) else None


def import_left_unbound(
    tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler
) -> UnboundRead | None:
    """The first read after the try of a name the try imports, on the way `handler` lets through
    (see the module docstring); None when there is none."""
    names = imported_names(node.body)
    if not names or not _way_through(handler.body) or _binds(ast.Module(body=handler.body, type_ignores=[])):
        return None
    found = block_holding(tree, node)
    if found is None:
        return None
    _, block, index = found
    before = {flag[0]: flag[1] for flag in map(_flag, block[:index]) if flag is not None}
    flags = {
        flag[0]
        for other in node.handlers
        if other is not handler
        for flag in map(_flag, other.body)
        if flag is not None and flag[0] in before and before[flag[0]] != flag[1]
    }
    for stmt in block[index + 1 :]:
        if isinstance(stmt, ast.If) and not stmt.orelse and isinstance(stmt.test, ast.Name) and stmt.test.id in flags:
            continue
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        reads = [
            sub
            for sub in pysource.walk(stmt)
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in names
        ]
        if reads:
            first = min(reads, key=lambda sub: (sub.lineno, sub.col_offset))
            return UnboundRead(first.id, first.lineno)
        if _binds(stmt) & names:
            return None
    return None
