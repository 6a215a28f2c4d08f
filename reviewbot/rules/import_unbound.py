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

*A stub that does nothing, called for its effect* (`noop_stub_called`, round 27, tuned on round 27's
held-out part B: tnt's FSDP2 `fully_shard`): the try only imports, and the narrow handler binds an
imported name to a function that does nothing (its body only `pass`, `...`, a docstring or `return`
/`return None`), defined in the handler (`def noop(*args, **kwargs): pass`, then `fully_shard =
noop`, or `def fully_shard(...): pass`). A statement of the file outside the handler calls that name
and throws the result away (`fully_shard(module, **kwargs)`): a call made for its effect. Where the
import fails, that effect (sharding a model, registering a hook) silently does not happen, and the
code after the call runs as if it had: the fallback keeps the module importable but turns the
feature into a no-op nobody is told about. `P2` `broad-except.import-noop-stub`. General: the shape
says the feature's work is dropped, whatever the package. Near misses: a stub that raises (the
feature then fails loudly, naming the cause), a stub that returns its argument (an identity
decorator does the work's equivalent), a name only read as a value (`isinstance(x, Stub)`).
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


def _does_nothing(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The body only passes, holds a docstring or `...`, or returns nothing."""
    for stmt in function.body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Return) and (
            stmt.value is None or (isinstance(stmt.value, ast.Constant) and stmt.value.value is None)
        ):
            continue
        return False
    return True


def _stubbed_names(handler: ast.ExceptHandler, names: set[str]) -> set[str]:
    """The imported `names` the handler binds to a function of its own that does nothing."""
    stubs = {
        stmt.name
        for stmt in handler.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and _does_nothing(stmt)
    }
    found = stubs & names
    for stmt in handler.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name) and stmt.value.id in stubs:
            found |= {target.id for target in stmt.targets if isinstance(target, ast.Name) and target.id in names}
    return found


def noop_stub_called(
    tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler
) -> tuple[str, int] | None:
    """(name, line) of the first call, for its effect, of an imported name the handler binds to a
    function that does nothing (see the module docstring); None when there is none."""
    names = imported_names(node.body)
    stubbed = _stubbed_names(handler, names) if names else set()
    if not stubbed:
        return None
    inside = {id(sub) for stmt in handler.body for sub in pysource.walk(stmt)}
    calls = [
        sub
        for sub in pysource.walk(tree)
        if isinstance(sub, ast.Expr)
        and id(sub) not in inside
        and isinstance(sub.value, ast.Call)
        and isinstance(sub.value.func, ast.Name)
        and sub.value.func.id in stubbed
    ]
    if not calls:
        return None
    first = min(calls, key=lambda sub: (sub.lineno, sub.col_offset))
    assert isinstance(first.value, ast.Call) and isinstance(first.value.func, ast.Name)
    return first.value.func.id, first.lineno
