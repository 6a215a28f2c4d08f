"""What the rules share: the per-file context, qualified names, logging detection."""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections.abc import Callable, Collection, Iterator

from reviewbot import pysource
from reviewbot.exception_index import ExceptionIndex
from reviewbot.findings import Finding
from reviewbot.keychange import KeyChange
from reviewbot.keychange.closure import ClosureItem
from reviewbot.repo_config import RepoConfig


@dataclasses.dataclass
class RuffHit:
    code: str
    line: int
    end_line: int
    message: str


class QualnameIndex:
    """Innermost enclosing `Class.method` / `func.<locals>` name for a line."""

    def __init__(self, tree: ast.AST) -> None:
        spans: list[tuple[int, int, str]] = []

        def visit(node: ast.AST, prefix: str) -> None:
            # a def or class is a statement: only statement lists can hold one
            for field in pysource.STATEMENT_LISTS:
                children = getattr(node, field, None)
                if not isinstance(children, list):
                    continue
                for child in children:
                    if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                        name = f"{prefix}{child.name}"
                        spans.append((child.lineno, child.end_lineno or child.lineno, name))
                        visit(child, name + ".")
                    else:
                        visit(child, prefix)

        visit(tree, "")
        self._spans = sorted(spans)
        self._starts = [s[0] for s in self._spans]

    def spans(self, names: Collection[str]) -> list[tuple[int, int]]:
        """The (first, last) lines of every definition whose qualified name is in `names`."""
        return [(start, end) for start, end, name in self._spans if name in names]

    def at(self, line: int) -> str:
        best = ""
        best_len = None
        for start, end, name in self._spans[: bisect.bisect_right(self._starts, line)]:
            if start <= line <= end and (best_len is None or end - start <= best_len):
                best, best_len = name, end - start
        return best


@dataclasses.dataclass
class FileContext:
    """One version (head or base) of one changed Python file, as the rules see it."""

    path: str
    revision: str  # "head" | "base"
    source: str
    tree: ast.Module
    lines: list[str]
    qualnames: QualnameIndex
    config: RepoConfig
    ruff: list[RuffHit]
    key_change: KeyChange | None
    closure: dict[str, ClosureItem]
    factors: list[str]
    factors_gained: list[str]
    factors_known: list[str]
    # the head revision's own exception classes (`reviewbot.exception_index`), built on first call
    exceptions: Callable[[], ExceptionIndex]
    # (path, tree) of every changed Python file at "base" (removed files included) or "head" that parses,
    # parsed once per review on first call (`broad_except`'s callers); read-only (`pysource.Trees`)
    changed_trees: Callable[[str], tuple[tuple[str, ast.Module], ...]] = dataclasses.field(default=lambda _: ())
    # `silent_gate.moved_conditions` of the changed trees: which code the change moved rather than
    # added, computed once per review on first call
    moved_conditions: Callable[[], frozenset[str]] = dataclasses.field(default=lambda: frozenset())
    # whether a finding on lines `start`..`end` can be reported: for the head version the change's
    # `touches` (the engine keeps no other), everywhere else always. A rule whose findings the
    # engine filters by `touches` may skip the code outside it; it is only a saving of time.
    focus: Callable[[int, int], bool] = dataclasses.field(default=lambda start, end: True)

    def qualname(self, line: int) -> str:
        return self.qualnames.at(line)


LOG_METHODS = {"debug", "info", "warning", "warn", "error", "exception", "critical", "log"}


def is_logging_call(node: ast.AST) -> bool:
    """`logger.info(...)`, `logging.warning(...)`, `log.debug(...)`, `warnings.warn(...)`, `print(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in LOG_METHODS:
        return True
    return isinstance(func, ast.Name) and func.id in ("print", "warn")


def contains_logging(nodes: list[ast.stmt]) -> bool:
    return any(is_logging_call(sub) for node in nodes for sub in pysource.walk(node))


LOUD_LEVELS = frozenset(["warning", "warn", "error", "critical", "exception"])


# a level's or print's helper named for where or how often it shows the message (round 24):
# `logger.warning_rank0`, `logger.warning_once`, `print_rank_0`, `rank_zero_warn`, `rank0_print`
_SHOWN_VARIANT = re.compile(
    r"(?:rank_?(?:0|zero)_)?(?P<level>debug|info|warning|warn|error|critical|exception|print)"
    r"(?P<where>(?:_rank_?(?:0|zero)|_once|_main_process)*)"
)


def shown_level(call: ast.Call) -> str | None:
    """The level a call shows its message at: the method of a logging call (`logger.warning(...)`:
    "warning"), "print" for `print(...)`, "warn" for `warn(...)`; since round 24 also the level of
    a helper named for one process or one showing of it (`logger.warning_rank0(...)`,
    `logger.warning_once(...)`: "warning"; `print_rank_0(...)`, `rank0_print(...)`: "print";
    `rank_zero_warn(...)`: "warn"). None for any other call."""
    name = callee(call)
    if is_logging_call(call):
        return name
    match = _SHOWN_VARIANT.fullmatch(name)
    if match is None or name == match.group("level"):
        return None
    return match.group("level")


def none_comparison(test: ast.expr) -> tuple[ast.expr, type[ast.cmpop]] | None:
    """``(X, ast.Is)`` for ``X is None``, ``(X, ast.IsNot)`` for ``X is not None``; None for any other test."""
    if not (
        isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value is None
    ):
        return None
    return test.left, type(test.ops[0])


def named_none_test(test: ast.expr, names: Collection[str]) -> type[ast.cmpop] | None:
    """``ast.Is`` for ``name is None``, ``ast.IsNot`` for ``name is not None``, where ``name`` is one of
    ``names`` (a collection of names, not one name as a string); None for any other test."""
    found = none_comparison(test)
    if found is None or not isinstance(found[0], ast.Name) or found[0].id not in names:
        return None
    return found[1]


def reads_name(node: ast.AST, name: str | None) -> bool:
    """Some name node inside ``node``, in any context, is ``name``; False when there is no name (a
    handler without ``as``)."""
    return name is not None and any(isinstance(sub, ast.Name) and sub.id == name for sub in pysource.walk(node))


def bound_by_import(stmt: ast.Import | ast.ImportFrom) -> set[str]:
    """The names an import statement binds: each alias's ``as`` name, else its first dotted part."""
    return {alias.asname or alias.name.split(".")[0] for alias in stmt.names}


def imported_names(body: list[ast.stmt]) -> set[str] | None:
    """The names a block of import statements only binds; None when another statement is in it."""
    names: set[str] = set()
    for stmt in body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return None
        names |= bound_by_import(stmt)
    return names


def imports_any(tree: ast.AST, tops: Collection[str], skipped: Collection[int]) -> bool:
    """Some absolute import statement of ``tree`` whose id is not in ``skipped`` imports a module
    whose top-level package is one of ``tops``."""
    for sub in pysource.nodes(tree):
        if id(sub) in skipped:
            continue
        if isinstance(sub, ast.ImportFrom) and not sub.level and (sub.module or "").split(".")[0] in tops:
            return True
        if isinstance(sub, ast.Import) and any(alias.name.split(".")[0] in tops for alias in sub.names):
            return True
    return False


def carries_traceback(call: ast.Call) -> bool:
    """A logging call that carries the traceback: `.exception(...)`, or `exc_info=` not False or None."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "exception":
        return True
    return any(
        k.arg == "exc_info" and not (isinstance(k.value, ast.Constant) and k.value.value in (False, None))
        for k in call.keywords
    )


TRACEBACK_PRINTS = frozenset(["print_exc", "print_exception"])
"""The `traceback` module's calls that print the exception being handled."""


def shows_caught(call: ast.Call, name: str | None) -> bool:
    """The call shows the exception a handler caught (bound to `name`, or None): it prints the
    traceback (`traceback.print_exc()`), or reports at warning level or above or prints
    (`shown_level`) with the traceback (`carries_traceback`) or the exception itself."""
    if callee(call) in TRACEBACK_PRINTS:
        return True
    level = shown_level(call)
    loud = level is not None and (level in LOUD_LEVELS or level == "print")
    return loud and (carries_traceback(call) or reads_name(call, name))


def last_name(node: ast.expr) -> str:
    """An attribute's last part (`self.f` -> `f`), a plain name, or "" for anything else."""
    return node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""


def callee(call: ast.Call) -> str:
    """The called name: a method's or attribute's last part, a plain name, or "" for anything else."""
    return last_name(call.func)


def warns(stmt: ast.stmt | None) -> bool:
    """`warnings.warn(...)`/`warn(...)` or a logging call at warning level or above."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    name = callee(stmt.value)
    if name == "warn":
        return True
    return is_logging_call(stmt.value) and name in LOUD_LEVELS


def hands_back_nothing(function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """No `return <value>` (other than `None`) or `yield` in `function`'s own body (nested functions
    and classes are theirs)."""
    pending: list[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return False
        if isinstance(node, ast.Return) and not (
            node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
        ):
            return False
        pending.extend(pysource.children(node))
    return True


def same_node(first: object, second: object) -> bool:
    """`ast.dump(first) == ast.dump(second)` for nodes, lists of them and the values they hold,
    compared node by node and given up at the first difference, without building either text: the
    same node classes, the same fields (a missing one reads as None, which `ast.dump` leaves out
    alike) and leaf values with the same `repr` (`1` is not `1.0`, `0.0` is not `-0.0`)."""
    if isinstance(first, ast.AST):
        if type(first) is not type(second):
            return False
        return all(same_node(getattr(first, name, None), getattr(second, name, None)) for name in first._fields)
    if isinstance(first, list):
        return (
            isinstance(second, list)
            and len(first) == len(second)
            and all(same_node(one, other) for one, other in zip(first, second, strict=True))
        )
    if isinstance(second, (ast.AST, list)):
        return False
    return first is second or repr(first) == repr(second)


def innermost_function(tree: ast.Module, node: ast.stmt) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The innermost function (at any depth, a method included) whose lines hold `node`'s."""
    found = None
    for function in pysource.nodes(tree):
        if (
            isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
            and function.lineno < node.lineno <= (function.end_lineno or function.lineno)
            and (found is None or function.lineno > found.lineno)
        ):
            found = function
    return found


def statement_blocks(node: ast.AST) -> Iterator[list[ast.stmt]]:
    """The statement lists `node` holds directly: its body, `else:` and `finally:` blocks, and the
    bodies of its `except` clauses and `case`s (none for a simple statement or an expression)."""
    for field in pysource.STATEMENT_LISTS:
        held = getattr(node, field, None)
        if not isinstance(held, list):
            continue
        if field in ("handlers", "cases"):
            yield from (inner.body for inner in held)
        else:
            yield held


FileRule = Callable[[FileContext], list[Finding]]


def _call_of(stmt: ast.stmt) -> tuple[str, ast.Call] | None:
    """(how the statement uses the call's value, the call) for `targets = call(...)`, `return
    call(...)` and `call(...)`."""
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
        return "=" + "".join(ast.dump(target) for target in stmt.targets), stmt.value
    if isinstance(stmt, ast.Return) and isinstance(stmt.value, ast.Call):
        return "return", stmt.value
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return "expr", stmt.value
    return None


def paired_calls(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> tuple[ast.Call, ast.Call] | None:
    """(the try's call, the handler's call) when the try and the handler are one statement each,
    both a call whose value is used the same way (`_call_of`: bound to the same targets, returned, or
    discarded); None otherwise."""
    if len(node.body) != 1 or len(handler.body) != 1:
        return None
    tried, fallback = _call_of(node.body[0]), _call_of(handler.body[0])
    if tried is None or fallback is None or tried[0] != fallback[0]:
        return None
    return tried[1], fallback[1]


def top_level_function(tree: ast.Module, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The function `name` defined directly in the module's body, if any."""
    return next(
        (stmt for stmt in tree.body if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name),
        None,
    )
