"""A handler whose own code raises on every entry: `handler-raises`.

The handler's first statements, the ones every entry runs (up to and including the header of the
first compound statement, or up to the first statement that leaves), are read for two operations
that cannot succeed, whatever was caught:

- an attribute read on the caught name that the caught builtin type lacks: `except ValueError as
  exception: if "..." in exception.value:` (llm-compressor's processor fallback, round 17): no
  builtin exception below `ValueError` has `value`, so every entry raises `AttributeError` and
  neither the conversion nor the fallback after it runs (`handler-raises.missing-attribute`). Only
  for handlers whose caught types are all builtin and none is `Exception` or `BaseException`
  (third-party exceptions below those carry their own attributes: `requests`' `response`), each
  named by a plain name (`requests.exceptions.ConnectionError` is no builtin), read
  against every builtin subclass of the caught types (`UnicodeDecodeError.reason` for
  `ValueError`), and only when the file does not rebind the type's name;
- a builtin exception constructed with a keyword argument it does not take:
  `raise RuntimeError("...", flush=True) from e` (verl's rollout-skip patch, round 17) raises
  `TypeError` in place of the conversion (`handler-raises.keyword-argument`). Whether the builtin
  takes the keyword is asked of this interpreter (`ImportError(name=...)` does).

- a read of a module-level name that the change removed (round 22, gpt-neox's fused kernels: the
  commit moved `srcpath = Path(__file__).parent.absolute()` from module level into `load()`, and
  the `ImportError` handler of `load_fused_kernels`, whose own lines did not change, prints an
  install hint with `str(srcpath)`): the name is bound at the module level of the base version and
  nowhere at the head's (not at module level, no `global` of it, no `from ... import *`), it is no
  builtin, and no function enclosing the handler binds it, so every entry raises `NameError`
  before the hint is shown (`handler-raises.removed-name`). Reported on the handler, wherever it
  stands in the file: the change is what broke it, away from the handler's lines (the engine keeps
  it although it touches no changed line, `engine._away_from_change`). Near misses: a name the
  head still binds at module level (another assignment), one an enclosing function or class body
  binds, a read under a condition.

All are P2: the handler was written for a failure and answers it with an error of its own; the
caught exception survives only as the new one's `__context__`. Reads under a condition (`if
hasattr(e, "value") and e.value`, the branches of an `if`, a lambda or comprehension) are not on
every entry and are left alone.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.exception_index import BUILTIN_EXCEPTIONS, caught_names
from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

RULE = "handler-raises"
_BROAD = frozenset(["Exception", "BaseException"])
_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)
_DEFERRED = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_BUILTIN_NAMES = frozenset(dir(builtins))


def _rebound(tree: ast.Module) -> frozenset[str]:
    """Names the file binds itself (definitions, imports, assignments): not the builtins then."""
    names: set[str] = set()
    for node in pysource.nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
    return frozenset(names)


def _entry_expressions(handler: ast.ExceptHandler) -> Iterator[ast.expr]:
    """The expressions every entry into the handler evaluates: those of its statements in order up to
    the first that leaves, and the header of the first compound statement (an `if`'s test, a loop's
    iterable, a `with`'s context expressions), where the straight line ends."""
    for stmt in handler.body:
        if isinstance(stmt, (ast.If, ast.While)):
            yield stmt.test
            return
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            yield stmt.iter
            return
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from (item.context_expr for item in stmt.items)
            return
        if isinstance(stmt, (ast.Try, ast.TryStar, ast.Match, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return
        for field in ("value", "exc", "test", "msg"):
            expr = getattr(stmt, field, None)
            if isinstance(expr, ast.expr):
                yield expr
        if isinstance(stmt, _LEAVES):
            return


def _evaluated(expr: ast.expr) -> Iterator[ast.AST]:
    """The nodes of `expr` that its evaluation always reaches: not the later operands of `and`/`or`,
    the branches of a conditional expression, or what a lambda or comprehension defers."""
    yield expr
    if isinstance(expr, _DEFERRED):
        return
    if isinstance(expr, ast.BoolOp):
        yield from _evaluated(expr.values[0])
        return
    if isinstance(expr, ast.IfExp):
        yield from _evaluated(expr.test)
        return
    for child in ast.iter_child_nodes(expr):
        if isinstance(child, ast.expr):
            yield from _evaluated(child)
        elif isinstance(child, ast.keyword):
            yield from _evaluated(child.value)


def _lacks(types: list[type[BaseException]], attribute: str) -> bool:
    """No builtin exception class below any of `types` (the types included) has `attribute`."""
    below = [cls for cls in BUILTIN_EXCEPTIONS.values() if any(issubclass(cls, t) for t in types)]
    return not any(hasattr(cls, attribute) for cls in below)


def _takes_keyword(cls: type[BaseException], keyword: str) -> bool:
    """Whether this interpreter's builtin `cls` accepts `keyword` in its constructor."""
    try:
        cls(**{keyword: None})
    except TypeError:
        return False
    return True


def _finding(ctx: FileContext, handler: ast.ExceptHandler, message_id: str, params: dict[str, object]) -> Finding:
    return Finding(
        rule=RULE,
        severity=Severity.P2,
        path=ctx.path,
        line_start=handler.lineno,
        line_end=handler.end_lineno or handler.lineno,
        message_id=message_id,
        params=params,
        qualname=ctx.qualname(handler.lineno),
    )


def _check_handler(ctx: FileContext, handler: ast.ExceptHandler, rebound: frozenset[str]) -> Finding | None:
    names = caught_names(handler)
    label = "except:" if handler.type is None else f"except {ast.unparse(handler.type)}"
    elts = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    readable = (
        handler.name is not None
        and names is not None
        and all(isinstance(elt, ast.Name) for elt in elts)
        and not _BROAD & set(names)
        and all(name in BUILTIN_EXCEPTIONS and name not in rebound for name in names)
    )
    types = [BUILTIN_EXCEPTIONS[name] for name in names or ()] if readable else []
    for expr in _entry_expressions(handler):
        for node in _evaluated(expr):
            if (
                types
                and isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Load)
                and isinstance(node.value, ast.Name)
                and node.value.id == handler.name
                and _lacks(types, node.attr)
            ):
                params = {"label": label, "name": handler.name, "attribute": node.attr, "line": node.lineno}
                return _finding(ctx, handler, "handler-raises.missing-attribute", params)
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in BUILTIN_EXCEPTIONS
                and node.func.id not in rebound
            ):
                refused = [
                    kw.arg
                    for kw in node.keywords
                    if kw.arg is not None and not _takes_keyword(BUILTIN_EXCEPTIONS[node.func.id], kw.arg)
                ]
                if refused:
                    params = {"label": label, "type": node.func.id, "keyword": refused[0], "line": node.lineno}
                    return _finding(ctx, handler, "handler-raises.keyword-argument", params)
    return None


def _module_names(tree: ast.Module) -> frozenset[str] | None:
    """The names bound at the module level of `tree` (by its own statements, not inside a def or
    class, or declared `global` anywhere); None when a `from ... import *` binds names unseen."""
    names: set[str] = set()
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if any(alias.name == "*" for alias in node.names):
                return None
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        pending.extend(pysource.children(node))
    for node in pysource.nodes(tree):
        if isinstance(node, ast.Global):
            names.update(node.names)
    return frozenset(names)


def _bound_in(function: ast.AST) -> frozenset[str]:
    """The names a function binds anywhere in it (its parameters, assignments, imports, definitions,
    nested scopes included: a read of them is not a read of a module-level name)."""
    names: set[str] = set()
    for node in pysource.nodes(function):
        if isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.ExceptHandler)) and node.name:
            names.add(node.name)
    return frozenset(names)


def _removed_names(ctx: FileContext) -> frozenset[str]:
    """Module-level names of the file's base version that its head binds nowhere at module level."""
    if ctx.revision != "head":
        return frozenset()
    base = next((tree for path, tree in ctx.changed_trees("base") if path == ctx.path), None)
    if base is None:
        return frozenset()
    before, after = _module_names(base), _module_names(ctx.tree)
    if before is None or after is None:
        return frozenset()
    return frozenset(before - after - _BUILTIN_NAMES)


def _reads_removed(
    ctx: FileContext, handler: ast.ExceptHandler, removed: frozenset[str], scopes: list[ast.AST]
) -> Finding | None:
    bound = frozenset().union(*(_bound_in(scope) for scope in scopes))
    label = "except:" if handler.type is None else f"except {ast.unparse(handler.type)}"
    for expr in _entry_expressions(handler):
        for node in _evaluated(expr):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in removed - bound:
                params = {"label": label, "name": node.id, "line": node.lineno}
                return _finding(ctx, handler, "handler-raises.removed-name", params)
    return None


def _handlers_with_scopes(tree: ast.Module) -> Iterator[tuple[ast.ExceptHandler, list[ast.AST]]]:
    """Each handler of the file with the functions and classes enclosing it, outermost first (a class
    body's names are not visible in its methods, so counting them there only reports less)."""
    pending: list[tuple[ast.AST, list[ast.AST]]] = [(tree, [])]
    scoping = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
    while pending:
        node, scopes = pending.pop()
        inner = [*scopes, node] if isinstance(node, scoping) else scopes
        if isinstance(node, ast.ExceptHandler):
            yield node, inner
        pending.extend((child, inner) for child in pysource.children(node))


def check(ctx: FileContext) -> list[Finding]:
    """The findings on the handlers of the file's try statements that `ctx.focus` can report, and
    on any handler of the file that reads a module-level name the change removed."""
    findings: list[Finding] = []
    removed = _removed_names(ctx)
    if removed:
        for handler, scopes in _handlers_with_scopes(ctx.tree):
            finding = _reads_removed(ctx, handler, removed, scopes)
            if finding is not None:
                findings.append(finding)
    flagged = {finding.line_start for finding in findings}
    handlers = [
        handler
        for node in pysource.nodes(ctx.tree)
        if isinstance(node, (ast.Try, ast.TryStar))
        for handler in node.handlers
        if ctx.focus(handler.lineno, handler.end_lineno or handler.lineno) and handler.lineno not in flagged
    ]
    if not handlers:
        return findings
    rebound = _rebound(ctx.tree)
    findings.extend(finding for handler in handlers if (finding := _check_handler(ctx, handler, rebound)) is not None)
    return findings
