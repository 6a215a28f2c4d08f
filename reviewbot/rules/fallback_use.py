"""What the code around a broad handler does with its fallback, read by `broad_except` before it
reports a swallow (round 25 of the precision benchmark, tuned on round 25's held-out sets). Each
shape says where the failure goes, or why the fallback is a route the code already takes; none
names a project or a library.

- *the error shown and handed to its owner* (`hands_error_to_owner`): the handler logs the caught
  exception (naming it, or with its traceback), passes the exception object itself to one call
  whose name says it takes a failure (`self._manager.report_error(e)`, `job.set_failed(exc)`,
  `on_error(e)`), and then returns a constant or nothing. The failure is shown where it happens and
  reaches the code that owns the unit of work and decides what it means (torchft's
  `_ManagedWork.wait`: the manager discards the step), as a future's `set_exception(e)` does.
  Near misses: the error's text (`report(str(e))`), a call named for something else
  (`self.cleanup(e)`), a substitute computed after the hand-over, and a hand-over with no log
  (SHARK's `set_failure(exception)`, whose responder turns the failure into `None` logits: what
  the owner does with it is not in the handler, so the handler must show it itself).
- *an import whose only use is the try's `else:`* (`import_for_else_only`): the try only
  imports, the handler only passes or logs, the `else:` block only calls (it binds nothing), and
  every read of an imported name in the enclosing function (or module) stands in that `else:`.
  A failed import skips exactly the work that needs the package and nothing else changes
  (nvidia-resiliency-ext's TransformerEngine clean-up in an abort step). Near misses: an `else:`
  that binds a name, an imported name read after the try.
- *an older query for the same answer* (`older_query`): the try is one statement binding a name
  from one method call without arguments (a query of an object's state, wrapped in builtins only:
  `flag = bool(self.runtime.use_fast_path())`); the handler only binds names, the last the same
  one, from calls without arguments of other methods of the same object (and builtins), not
  guarded: a shim for an object that lacks the newer query (Mooncake's runtime). The object is a
  value the code holds (`self.runtime`, a parameter), not an imported module: a module's functions
  are a library's API, and `torch.cuda.is_initialized()` for a failed `torch.cuda.device_count()`
  answers another question (round 24's probe test keeps it a swallow). When the older
  query fails too, its error propagates; what is lost is that the newer query's other errors are
  taken for "old version" (a `P3` nit left unreported). Near misses: a call with arguments (work,
  not a query: an implementation fallback), another object's method, a handler that logs only.
- *the value every caller has when it skips the call* (`callers_skip_value`): the handler, logging
  aside, returns a constant (or a tuple of constants); every call of its function in the file is
  `<targets> = f(...)` as the body of an `if` without `else:`, and the statement right before that
  `if` binds the same targets to the same constant. A failure takes the caller down the path it
  takes when it does not call at all (compressed-tensors' meta-device estimate: `(0, 0)` skips the
  cap, as it does outside distributed runs). Near misses: another constant, a call that is not
  under such an `if`, a function called nowhere in the file.

`broad_except` reads the first with the ways a caught error is passed on (`_passes_error_on`, so
for `runtime-error-fallback` too), the second and third with its probes (`_is_probe`) and the
fourth before it reports `broad-except.constant-data`; each gives nothing. The tests, with their
near misses, are in `tests/reviewbot/engine/test_engine_round26_tune25.py`.
"""

from __future__ import annotations

import ast
import builtins

from reviewbot import pysource
from reviewbot.rules.common import (
    bound_by_import,
    callee,
    carries_traceback,
    imported_names,
    innermost_function,
    is_logging_call,
    reads_name,
    same_node,
    statement_blocks,
)

_FAILURE_PARTS = frozenset(["error", "errors", "exception", "exceptions", "fail", "failed", "failure", "abort"])
_BUILTINS = frozenset(dir(builtins))


def _logs(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)


def _shows_error(stmt: ast.stmt, name: str) -> bool:
    """A logging statement that names the caught exception or carries its traceback."""
    assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
    return carries_traceback(stmt.value) or reads_name(stmt.value, name)


def hands_error_to_owner(handler: ast.ExceptHandler) -> bool:
    """The handler hands the caught exception to a failure-taking call (see the module docstring)."""
    if handler.name is None or not handler.body:
        return False
    *rest, last = handler.body
    if isinstance(last, ast.Return):
        if last.value is not None and not isinstance(last.value, ast.Constant):
            return False
    else:
        rest = handler.body
    handed = shown = False
    for stmt in rest:
        if _logs(stmt):
            shown = shown or _shows_error(stmt, handler.name)
            continue
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Await):
            call = call.value
        if handed or not isinstance(call, ast.Call) or is_logging_call(call):
            return False
        parts = {part.lower() for part in callee(call).split("_")}
        takes = any(isinstance(arg, ast.Name) and arg.id == handler.name for arg in call.args)
        if not (parts & _FAILURE_PARTS and takes):
            return False
        handed = True
    return handed and shown


def import_for_else_only(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try imports names read only in its `else:` block (see the module docstring)."""
    names = imported_names(node.body)
    if not names or not node.orelse:
        return False
    if not all(isinstance(stmt, ast.Pass) or _logs(stmt) for stmt in handler.body):
        return False
    if not all(isinstance(stmt, ast.Expr) for stmt in node.orelse):
        return False
    scope: ast.AST = innermost_function(tree, node) or tree
    inside = {id(sub) for stmt in node.orelse for sub in pysource.walk(stmt)}
    return not any(
        isinstance(sub, ast.Name) and sub.id in names and isinstance(sub.ctx, ast.Load) and id(sub) not in inside
        for sub in pysource.walk(scope)
    )


def _query(call: ast.expr) -> tuple[str, str] | None:
    """(the object's dump, the method) for a method call without arguments, inside builtin calls
    (`bool(obj.query())`); None for anything else."""
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in _BUILTINS:
        if len(call.args) != 1 or call.keywords:
            return None
        call = call.args[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)) or call.args or call.keywords:
        return None
    return ast.dump(call.func.value), call.func.attr


def _module_names(tree: ast.Module) -> set[str]:
    """The names the module's own import statements bind."""
    return {
        name
        for stmt in pysource.walk(tree)
        if isinstance(stmt, (ast.Import, ast.ImportFrom))
        for name in bound_by_import(stmt)
    }


def older_query(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler answers the try's query from other queries of the same object, a value the
    code holds, not an imported module (see the module docstring)."""
    if len(node.body) != 1 or not handler.body:
        return False
    tried = node.body[0]
    if not (isinstance(tried, ast.Assign) and len(tried.targets) == 1 and isinstance(tried.targets[0], ast.Name)):
        return False
    query = _query(tried.value)
    if query is None:
        return False
    call = next(
        sub
        for sub in pysource.walk(tried.value)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and _query(sub) == query
    )
    assert isinstance(call.func, ast.Attribute)
    root = call.func.value
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(root, ast.Name) and root.id in _module_names(tree):
        return False
    last = handler.body[-1]
    if not (isinstance(last, ast.Assign) and same_node(last.targets, tried.targets)):
        return False
    asked = False
    for stmt in handler.body:
        if not isinstance(stmt, ast.Assign):
            return False
        for sub in pysource.walk(stmt.value):
            if not isinstance(sub, ast.Call):
                continue
            if isinstance(sub.func, ast.Name) and sub.func.id in _BUILTINS:
                continue
            other = _query(sub)
            if other is None or other[0] != query[0] or other[1] == query[1]:
                return False
            asked = True
    return asked


def _constant(value: ast.expr | None) -> bool:
    if isinstance(value, ast.Tuple):
        return bool(value.elts) and all(isinstance(elt, ast.Constant) for elt in value.elts)
    return isinstance(value, ast.Constant)


def _skipped_call(block: list[ast.stmt], index: int, call: ast.Call, returned: ast.expr) -> bool:
    """`block[index]` is an `if` without `else:` whose body is `<targets> = call`, and the statement
    before it binds the same targets to a constant equal to `returned`."""
    guard = block[index]
    if not (isinstance(guard, ast.If) and not guard.orelse and len(guard.body) == 1 and index > 0):
        return False
    bound, before = guard.body[0], block[index - 1]
    if not (isinstance(bound, ast.Assign) and bound.value is call and isinstance(before, ast.Assign)):
        return False
    return same_node(before.targets, bound.targets) and same_node(before.value, returned)


def callers_skip_value(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler returns what every caller binds when it skips the call (see the module docstring)."""
    rest = [stmt for stmt in handler.body if not _logs(stmt)]
    if len(rest) != 1 or not isinstance(rest[0], ast.Return) or not _constant(rest[0].value):
        return False
    returned = rest[0].value
    assert returned is not None
    function = innermost_function(tree, node)
    if function is None:
        return False
    calls = [
        sub
        for sub in pysource.walk(tree)
        if isinstance(sub, ast.Call) and callee(sub) == function.name and sub is not function
    ]
    if not calls:
        return False
    skipped: set[int] = set()
    for holder in pysource.walk(tree):
        for block in statement_blocks(holder):
            for index, stmt in enumerate(block):
                if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[0], ast.Assign):
                    call = stmt.body[0].value
                    if isinstance(call, ast.Call) and _skipped_call(block, index, call, returned):
                        skipped.add(id(call))
    return all(id(call) in skipped for call in calls)
