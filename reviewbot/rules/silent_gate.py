"""`silent-gate`: a condition that skips work a configuration flag asked for, with no log.

Within a function, a "flag check" is an `if` whose test reads a configuration attribute (an
attribute chain with a segment named like `config`, `cfg`, `settings`... see
`config_attribute_names`). A gate is a skipping exit (`continue`, `break`, a bare
`return`, or a `return` of `None`, an empty literal, a constant or a parameter passed through
unchanged; a non-empty string names a choice, not a skip) under an `if` whose body logs nothing and
whose test adds a condition other than the flag (a local computed from the configuration alone, see
`configured_locals`, is the configuration too),
placed where the flag asked for the work: after a flag check that exits early when the flag is off,
inside the body of a flag check, or `or`-ed with the flag in the same test. Returning a computed
value is the work itself, not a skip; raising is loud. A condition that calls a function of the same
module which logs counts as logged (the helper says why it skips). Severity P2-MAINTAIN.

Only new conditions count: at head, a gate whose condition (compared as code, `self.` dropped,
the operands of `and`/`or` in any order) skipped silently as often in the base versions of the changed files (the same file, or a file the
code moved from) as it does in their head versions was moved, not added, and is not reported.
"""

from __future__ import annotations

import ast
import functools
from collections import Counter

from reviewbot import pysource
from reviewbot.findings import Finding, Severity
from reviewbot.keychange.closure import unwind_attributes
from reviewbot.rules.common import FileContext, contains_logging

EXITS = (ast.Return, ast.Continue, ast.Break)


def _is_config_chain(node: ast.AST, names: tuple[str, ...]) -> bool:
    if not isinstance(node, ast.Attribute):
        return False
    segments, base = unwind_attributes(node)
    if isinstance(base, ast.Name):
        segments.append(base.id)
    # the config object itself must be a prefix segment, the flag the last one; a segment names a
    # config when one of its words is, or ends with, a config name (`fsdp_config`, `modelcfg`; not
    # `UNCONFIRMED_CAP`)
    return any(_names_config(seg, names) for seg in segments[1:])


def _names_config(segment: str, names: tuple[str, ...]) -> bool:
    return any(word.endswith(n) for word in segment.lower().split("_") for n in names)


def _reads_config(test: ast.AST, names: tuple[str, ...]) -> bool:
    return any(_is_config_chain(sub, names) for sub in pysource.walk(test))


def _only_config(test: ast.AST, names: tuple[str, ...], configured: frozenset[str] = frozenset()) -> bool:
    """The test is the flag alone (possibly negated or compared to a constant), or locals
    ``configured`` holds (values computed from the configuration alone)."""
    if isinstance(test, ast.UnaryOp):
        return _only_config(test.operand, names, configured)
    if isinstance(test, ast.Compare):
        parts = [test.left, *test.comparators]
        return all(_only_config(p, names, configured) or isinstance(p, ast.Constant) for p in parts)
    if isinstance(test, ast.BoolOp):
        return all(_only_config(v, names, configured) for v in test.values)
    if isinstance(test, ast.Name):
        return test.id in configured
    return _is_config_chain(test, names)


# calls that compute from their arguments alone
_PURE_BUILTINS = frozenset({"any", "all", "bool", "frozenset", "len", "list", "max", "min", "set", "sorted", "tuple"})
_PURE_NODES = (
    ast.BoolOp, ast.UnaryOp, ast.BinOp, ast.Compare, ast.IfExp, ast.JoinedStr, ast.FormattedValue,
    ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.comprehension,
    ast.boolop, ast.unaryop, ast.operator, ast.cmpop, ast.expr_context,
)  # fmt: skip


def configured_locals(function: ast.FunctionDef | ast.AsyncFunctionDef, names: tuple[str, ...]) -> frozenset[str]:
    """The locals of ``function`` assigned (once, to a plain name) a value computed from the
    configuration: it reads a configuration attribute or such a local, and otherwise only the
    function's parameters, locals computed from those alone, constants, its own comprehension
    variables and pure builtins (``_PURE_BUILTINS``). A gate on those is the configuration
    choosing, not a new condition."""
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    assignments = [node for node in pysource.walk(function) if isinstance(node, ast.Assign)]
    assigned = Counter(target.id for node in assignments for target in node.targets if isinstance(target, ast.Name))
    configured: set[str] = set()
    pure = set(params)  # names whose values come from the parameters, constants and the configuration
    for node in sorted((n for n in assignments if len(n.targets) == 1), key=lambda n: n.lineno):
        target = node.targets[0]
        if not isinstance(target, ast.Name) or assigned[target.id] != 1:
            continue
        reads = _reads_of_pure(node.value, names, configured, pure)
        if reads is not None:
            pure.add(target.id)
            if reads:
                configured.add(target.id)
    return frozenset(configured)


def _reads_of_pure(value: ast.expr, names: tuple[str, ...], configured: set[str], pure: set[str]) -> bool | None:
    """Whether ``value`` reads the configuration (an attribute chain of it or a ``configured``
    local), when it is computed from ``pure`` names, constants, its own comprehension variables and
    pure builtins alone; None when it is not."""
    bound = {
        target.id
        for node in pysource.walk(value)
        if isinstance(node, ast.comprehension)
        for target in pysource.walk(node.target)
        if isinstance(target, ast.Name)
    }
    reads = False
    todo: list[ast.AST] = [value]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Attribute):
            if not _is_config_chain(node, names):
                return None
            reads = True
        elif isinstance(node, ast.Name):
            if node.id in configured:
                reads = True
            elif node.id not in pure and node.id not in bound and node.id not in _PURE_BUILTINS:
                return None
        elif isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Name) and node.func.id in _PURE_BUILTINS) or node.keywords:
                return None
            todo.extend(node.args)
        elif isinstance(node, ast.Constant):
            continue
        elif isinstance(node, _PURE_NODES):
            todo.extend(ast.iter_child_nodes(node))
        else:
            return None
    return reads


def _is_skip(stmt: ast.stmt, params: set[str]) -> bool:
    if isinstance(stmt, (ast.Continue, ast.Break)):
        return True
    if not isinstance(stmt, ast.Return):
        return False
    value = stmt.value
    if isinstance(value, ast.Constant) and isinstance(value.value, str) and value.value:
        return False  # a non-empty string names a choice (a mode), not a skip
    if value is None or isinstance(value, ast.Constant):
        return True
    if isinstance(value, (ast.List, ast.Tuple, ast.Set, ast.Dict)):
        return not (value.elts if not isinstance(value, ast.Dict) else value.keys)
    return isinstance(value, ast.Name) and value.id in params


def _exits_silently(body: list[ast.stmt], params: set[str]) -> bool:
    return bool(body) and _is_skip(body[-1], params) and not contains_logging(body)


def _calls_logging_helper(test: ast.AST, helpers: set[str]) -> bool:
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id in helpers
        for sub in pysource.walk(test)
    )


def condition_key(test: ast.expr) -> str:
    """The condition as code, with `self.` dropped (a method moved to a function reads the same)
    and the operands of each `and`/`or` in sorted order (a move that reorders them is still a move)."""
    return " ".join(_ordered_code(test).replace("self.", "").split())


def _ordered_code(node: ast.expr) -> str:
    if isinstance(node, ast.BoolOp):
        joiner = " and " if isinstance(node.op, ast.And) else " or "
        return "(" + joiner.join(sorted(_ordered_code(value) for value in node.values)) + ")"
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return "not " + _ordered_code(node.operand)
    return ast.unparse(node)


def _skips_silently_anywhere(body: list[ast.stmt]) -> bool:
    """`_exits_silently` without knowing the parameters: a bare or simple-valued exit, no log."""
    last = body[-1] if body else None
    if isinstance(last, ast.Return) and isinstance(last.value, ast.Name):
        return not contains_logging(body)
    return last is not None and _is_skip(last, set()) and not contains_logging(body)


def silent_conditions(trees: tuple[tuple[str, ast.Module], ...]) -> Counter[str]:
    """How often each `condition_key` guards an `if` that exits silently in `trees` ((path, tree)
    pairs: the review's parsed files, read only)."""
    keys: Counter[str] = Counter()
    for _, tree in trees:
        keys.update(
            condition_key(node.test)
            for node in pysource.statements(tree)
            if isinstance(node, ast.If) and _skips_silently_anywhere(node.body)
        )
    return keys


def moved_conditions(
    base_trees: tuple[tuple[str, ast.Module], ...], head_trees: tuple[tuple[str, ast.Module], ...]
) -> frozenset[str]:
    """Conditions that skip silently no more often in the changed files at head (`head_trees`)
    than at base: the engine computes this once per review (`FileContext.moved_conditions`)."""
    base = silent_conditions(base_trees)
    head = silent_conditions(head_trees)
    return frozenset(key for key, count in head.items() if base[key] >= count)


def _gate_finding(ctx: FileContext, node: ast.If) -> Finding:
    cond = ast.unparse(node.test)
    if len(cond) > 80:
        cond = cond[:77] + "..."
    return Finding(
        rule="silent-gate",
        severity=Severity.P2,
        path=ctx.path,
        line_start=node.lineno,
        line_end=node.end_lineno or node.lineno,
        message_id="silent-gate.skips",
        params={"cond": cond},
        qualname=ctx.qualname(node.lineno),
    )


class _Scanner:
    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.names = ctx.config.config_attribute_names
        self.findings: list[Finding] = []
        self.function: ast.FunctionDef | ast.AsyncFunctionDef | None = None
        self.configured_by_function: dict[int, frozenset[str]] = {}

    def _configured(self) -> frozenset[str]:
        """The configured locals of the function being scanned (read only for a gate in focus,
        once per function)."""
        if self.function is None:
            return frozenset()
        key = id(self.function)
        if key not in self.configured_by_function:
            self.configured_by_function[key] = configured_locals(self.function, self.names)
        return self.configured_by_function[key]

    @functools.cached_property
    def logging_helpers(self) -> set[str]:
        """The module's functions that log (read only when a silent exit is found)."""
        return {
            node.name
            for node in self.ctx.tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and contains_logging(node.body)
        }

    @functools.cached_property
    def moved(self) -> frozenset[str]:
        """Conditions this change moved rather than added, at head (read only when a gate is found)."""
        return self.ctx.moved_conditions() if self.ctx.revision == "head" else frozenset()

    def scan(self, body: list[ast.stmt], flag_active: bool, params: set[str]) -> None:
        active = flag_active
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = stmt.args
                inner = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
                outer = self.function
                self.function = stmt
                self.scan(stmt.body, False, inner)
                self.function = outer
            elif isinstance(stmt, ast.ClassDef):
                self.scan(stmt.body, False, set())
            elif isinstance(stmt, ast.If):
                active = self._visit_if(stmt, active, params)
            else:
                for field in ("body", "orelse", "finalbody"):
                    inner_body = getattr(stmt, field, None)
                    if isinstance(inner_body, list) and inner_body and isinstance(inner_body[0], ast.stmt):
                        self.scan(inner_body, active, params)
                for handler in getattr(stmt, "handlers", []):
                    self.scan(handler.body, active, params)

    def _visit_if(self, stmt: ast.If, active: bool, params: set[str]) -> bool:
        reads = _reads_config(stmt.test, self.names)
        only = reads and _only_config(stmt.test, self.names)
        ored_with_flag = reads and isinstance(stmt.test, ast.BoolOp) and isinstance(stmt.test.op, ast.Or)
        # the cheap tests first: the file's logging helpers are read only for a gate in focus
        if (
            (active or ored_with_flag)
            and not only
            and self.ctx.focus(stmt.lineno, stmt.end_lineno or stmt.lineno)
            and _exits_silently(stmt.body, params)
            and not _only_config(stmt.test, self.names, self._configured())
            and not _calls_logging_helper(stmt.test, self.logging_helpers)
            and condition_key(stmt.test) not in self.moved
        ):
            self.findings.append(_gate_finding(self.ctx, stmt))
        if reads:
            if isinstance(stmt.body[-1], EXITS):
                active = True  # flag off -> exit; the rest of the block is work the flag asked for
            self.scan(stmt.body, True, params)
        else:
            self.scan(stmt.body, active, params)
        self.scan(stmt.orelse, active, params)
        return active


def check(ctx: FileContext) -> list[Finding]:
    scanner = _Scanner(ctx)
    scanner.scan(ctx.tree.body, False, set())
    return scanner.findings
