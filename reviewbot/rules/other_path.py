"""A reported fallback to another path (round 19): severity follows what the handler shows.

Rounds 16 to 18 labelled the same shape false at `P2` again and again: a catch-all whose handler
says, where it happens, that it is falling back (a `print`, a warning, a log record at info level
or above, a printed traceback), and whose fallback computes the result another way or hands back
the input unchanged: `data = load_dataset(name)` after a failed `load_from_disk(name)`, a second
source tried, a shared-memory segment linked instead of created, the eager model returned when
tracing fails, an undecodable payload forwarded as it came. What such a handler costs is known and
visible: the other path gives a correct result (slower, or from elsewhere), and when it fails too
its own error propagates with the first one chained as its `__context__`. What is left is the
catch-all itself (a programmer error of the first path also takes the fallback, told only in the
log) and a report that may drop the exception: a `P3` nit, not the `P2` of a silent swallow.

Not this class, and still the swallow: a silent handler (nothing printed, warned or logged at info
or above: a `logger.debug` record is not shown); a constant in place of the result (`return False`,
`scores = [0.0 ...]`, `None`): a degenerate value that flows on as data; a handler that skips the
work (a bare `return`, `continue`, `break`, falling through with nothing bound: the work is lost,
not done another way); a second path guarded by a try of its own (its failure is swallowed too); a
value built in the handler from several parts (a tuple, an arithmetic sentinel); a value computed
from the caught exception (`substitute(exc)`); the try's own call again (a retry is the same path).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.rules.common import callee, is_logging_call, same_node

_SHOWN_LEVELS = frozenset(["info", "warning", "warn", "error", "exception", "critical"])
_SHOWN_CALLS = frozenset(["print", "print_exc", "print_exception", "warn"])


def _reports(stmt: ast.stmt) -> bool:
    """A statement that shows the failure where it happens: `print(...)` (or a printing helper whose
    name says so, `print_rank_0`, `strategy.print`), `warnings.warn`, a log call at info level or
    above, `traceback.print_exc()`."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = callee(stmt.value)
    if is_logging_call(stmt.value) and isinstance(stmt.value.func, ast.Attribute) and name != "log":
        return name in _SHOWN_LEVELS
    return name in _SHOWN_CALLS or name.startswith("print_") or name.endswith("_print")


def _other_value(value: ast.expr | None, caught: str | None, tried: list[ast.Call]) -> bool:
    """A call (the other path, computed here) whose positional arguments are values at hand and
    whose keyword arguments call nothing (the same inputs handed to another route:
    `load_dataset(name, data_dir=data_dir)`; not `respond(guess(batch), ids, "OK", 200)`, a response
    built from a guess and constants), or a name or attribute read (the input at hand, handed back
    unchanged); not a constant, a tuple or an expression built of parts, nothing that reads the
    caught exception `caught` (keeping the error is no other path), and no call of the try's own
    (`tried`) again: a retry is the same path."""
    if value is None or any(isinstance(node, ast.Name) and node.id == caught for node in pysource.walk(value)):
        return False
    if isinstance(value, ast.Call):
        return (
            not is_logging_call(value)
            and not any(same_node(value, call) for call in tried)
            and all(_at_hand(arg.value if isinstance(arg, ast.Starred) else arg) for arg in value.args)
            and not any(isinstance(node, ast.Call) for kw in value.keywords for node in pysource.walk(kw.value))
        )
    return _at_hand(value)


def _at_hand(value: ast.expr) -> bool:
    """A name or an attribute of one (`model`, `self._func`): a value the function holds."""
    node = value
    while isinstance(node, ast.Attribute):
        node = node.value
    return isinstance(node, ast.Name)


def _paths(body: list[ast.stmt]) -> Iterator[list[ast.stmt]] | None:
    """The statement lists of `body`'s paths, an `if`/`else` at its end opened into its branches;
    None when such a branch is missing (an `if` without `else` falls through with nothing done)."""
    *head, last = body
    if not isinstance(last, ast.If):
        return iter([body])
    if not last.orelse:
        return None
    branches = [_paths(last.body), _paths(last.orelse)]
    if any(branch is None for branch in branches):
        return None
    return (head + path for branch in branches if branch is not None for path in branch)


def _prepares(stmt: ast.stmt, result: ast.stmt) -> bool:
    """An assignment to plain names that `result` reads: an argument of the other path prepared
    (`cache_path = cache_path or default_cache()` before `load(name, cache_dir=cache_path)`)."""
    if not (isinstance(stmt, ast.Assign) and all(isinstance(target, ast.Name) for target in stmt.targets)):
        return False
    read = {node.id for node in pysource.walk(result) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return {target.id for target in stmt.targets if isinstance(target, ast.Name)} <= read


def _one_path(path: list[ast.stmt], caught: str | None, tried: list[ast.Call], binds: list[ast.expr]) -> bool:
    """One path of the handler: reports, and its only other statements hand back or bind the other
    path's result (`return <call or name>`, or `<target> = <call or name>` where the try binds
    `<target>` too (`binds`), with nothing after it but reports), after assignments that prepare its
    arguments."""
    *preparing, result = [stmt for stmt in path if not _reports(stmt)] or [None]
    if result is None or not any(_reports(stmt) for stmt in path):
        return False
    if not all(_prepares(stmt, result) for stmt in preparing):
        return False
    if isinstance(result, ast.Return):
        return result is path[-1] and _other_value(result.value, caught, tried)
    if isinstance(result, ast.Assign):
        return all(any(same_node(target, bound) for bound in binds) for target in result.targets) and _other_value(
            result.value, caught, tried
        )
    return False


def reported_other_path(handler: ast.ExceptHandler, try_body: list[ast.stmt]) -> bool:
    """The handler shows the failure and falls back to another path on every way through it (see the
    module docstring); a nested `try` in it is no plain path, and `try_body`'s own calls are no other
    path."""
    if any(isinstance(node, ast.Try | ast.TryStar) for node in pysource.walk(handler) if node is not handler):
        return False
    paths = _paths(handler.body)
    if paths is None:
        return False
    tried = [node for stmt in try_body for node in pysource.walk(stmt) if isinstance(node, ast.Call)]
    binds = [
        target
        for stmt in try_body
        for node in pysource.walk(stmt)
        if isinstance(node, ast.Assign)
        for target in node.targets
    ]
    return all(_one_path(path, handler.name, tried, binds) for path in paths)


def report_names_caught(handler: ast.ExceptHandler) -> bool:
    """A report of the handler (`_reports`, under any branch) passes the caught exception to its call
    (`print(f"failed: {e}")`, `logger.info("... %s", e)`), or carries the traceback
    (`traceback.print_exc()`, `logger.exception`, `exc_info=`)."""
    for stmt in pysource.statements(handler):
        if not _reports(stmt):
            continue
        assert isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
        call = stmt.value
        if callee(call) in ("exception", "print_exc", "print_exception") or any(
            k.arg == "exc_info" for k in call.keywords
        ):
            return True
        arguments = [*call.args, *(k.value for k in call.keywords)]
        if handler.name is not None and any(
            isinstance(node, ast.Name) and node.id == handler.name for arg in arguments for node in pysource.walk(arg)
        ):
            return True
    return False
