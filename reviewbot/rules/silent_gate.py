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

Not a gate either (round 24 of the precision benchmark, optimum-habana's LLaVA LoRA targets):

- *a loop filter*: a `continue` in a `for` loop whose body only filters and collects (`if`
  statements, `continue`, and calls appending to or adding to a collection: `selected.append(name)`),
  an unrolled `[name for name in names if ...]`. The loop chooses elements; the work happens on
  what it collected, after it (`_collects_only`). Near miss: a loop whose body also calls anything
  else (`convert(module)`): the skipped turn skips that work.
- *a guard every caller has checked*: the gate is the first statement of a private function (its
  name starts with `_`; a docstring aside), and every call of the function in the file stands in
  the body of an `if` whose test, or one `and`-ed operand of it, is the negation of each condition
  the gate adds to the flag (`if family == "llava": self._freeze()` before `if family != "llava":
  return`, compared as code; `_checked_by_callers`), a `not X` or `X is None` counting as ruled out
  by a test that reads an attribute of `X` (`if cfg.get("family") == "llava":` before `if not cfg
  or ...`): no call from the file reaches the skip. Near misses: a public function (callers
  elsewhere), one call outside such an `if`, a caller testing another value.

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
from reviewbot.rules.common import FileContext, contains_logging, none_comparison

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


# methods that add an element to the collection they are called on
_COLLECTS = frozenset({"append", "add", "extend", "insert", "appendleft"})


def _collects_only(loop: ast.For | ast.AsyncFor) -> bool:
    """The loop's body only filters and collects (see the module docstring): `if` statements whose
    branches do the same, `continue`, and calls of `_COLLECTS` methods on a plain name; one such call
    at least."""
    collects = 0
    pending: list[ast.stmt] = list(loop.body)
    while pending:
        stmt = pending.pop()
        if isinstance(stmt, ast.If):
            pending.extend([*stmt.body, *stmt.orelse])
        elif (
            isinstance(stmt, ast.Expr)
            and isinstance(stmt.value, ast.Call)
            and isinstance(stmt.value.func, ast.Attribute)
            and stmt.value.func.attr in _COLLECTS
            and isinstance(stmt.value.func.value, ast.Name)
        ):
            collects += 1
        elif not isinstance(stmt, ast.Continue):
            return False
    return collects > 0


_NEGATED_OPS: dict[type, type] = {
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Lt: ast.GtE,
    ast.GtE: ast.Lt,
    ast.Gt: ast.LtE,
    ast.LtE: ast.Gt,
}


def _negation(test: ast.expr) -> str:
    """The code of `not test`: the operand of a `not`, a single comparison with its operator
    inverted, or `not (test)`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        inverted = _NEGATED_OPS[type(test.ops[0])]()
        return ast.unparse(ast.Compare(left=test.left, ops=[inverted], comparators=test.comparators))
    return f"not ({ast.unparse(test)})"


def _calls_function(node: ast.AST, name: str) -> bool:
    """`name(...)` or `<anything>.name(...)`."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


def _guarding_tests(tree: ast.Module, call: ast.Call) -> set[str]:
    """The code of every test, and of each `and`-ed operand of it, of the `if` statements in whose
    body (not `else:`) `call` stands."""
    found: set[str] = set()
    for node in pysource.statements(tree):
        if not isinstance(node, ast.If):
            continue
        if any(stmt.lineno <= call.lineno <= (stmt.end_lineno or stmt.lineno) for stmt in node.body):
            test = node.test
            operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And) else [test]
            found.update(ast.unparse(operand) for operand in [test, *operands])
    return found


def _checked_by_callers(
    tree: ast.Module, function: ast.FunctionDef | ast.AsyncFunctionDef | None, gate: ast.If, added: list[ast.expr]
) -> bool:
    """The gate opens a private function and every call of it in `tree` stands under an `if` that
    tests the negation of each condition in `added` (see the module docstring)."""
    if function is None or not function.name.startswith("_") or not added:
        return False
    body = function.body[1:] if ast.get_docstring(function) is not None else function.body
    if not body or body[0] is not gate:
        return False
    calls = [
        node for node in pysource.nodes(tree) if isinstance(node, ast.Call) and _calls_function(node, function.name)
    ]
    return bool(calls) and all(
        all(_ruled_out(condition, _guarding_tests(tree, call)) for condition in added) for call in calls
    )


def _ruled_out(condition: ast.expr, tests: set[str]) -> bool:
    """A caller's guarding `tests` (code, `_guarding_tests`) rule `condition` out: one of them is its
    negation, or `condition` is `not X` / `X is None` and a test reads an attribute of `X` (the
    caller's check dereferences `X`: `X.get("family") == "llava"` holds only for a set `X`)."""
    if _negation(condition) in tests:
        return True
    compared = none_comparison(condition)
    if isinstance(condition, ast.UnaryOp) and isinstance(condition.op, ast.Not):
        subject = condition.operand
    elif compared is not None and compared[1] is ast.Is:
        subject = compared[0]
    else:
        return False
    prefix = ast.unparse(subject) + "."
    return any(test.startswith(prefix) for test in tests)


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
        self.loop: ast.For | ast.AsyncFor | ast.While | None = None

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
                outer, outer_loop = self.function, self.loop
                self.function, self.loop = stmt, None
                self.scan(stmt.body, False, inner)
                self.function, self.loop = outer, outer_loop
            elif isinstance(stmt, ast.ClassDef):
                self.scan(stmt.body, False, set())
            elif isinstance(stmt, ast.If):
                active = self._visit_if(stmt, active, params)
            elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                outer_loop, self.loop = self.loop, stmt
                self.scan(stmt.body, active, params)
                self.loop = outer_loop
                self.scan(stmt.orelse, active, params)
            else:
                for field in ("body", "orelse", "finalbody"):
                    inner_body = getattr(stmt, field, None)
                    if isinstance(inner_body, list) and inner_body and isinstance(inner_body[0], ast.stmt):
                        self.scan(inner_body, active, params)
                for handler in getattr(stmt, "handlers", []):
                    self.scan(handler.body, active, params)

    def _chooses_or_checked(self, stmt: ast.If) -> bool:
        """A loop filter's `continue` or a guard every caller has checked (round 24, see the module
        docstring)."""
        if (
            isinstance(stmt.body[-1], ast.Continue)
            and isinstance(self.loop, (ast.For, ast.AsyncFor))
            and _collects_only(self.loop)
        ):
            return True
        test = stmt.test
        operands = test.values if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or) else [test]
        added = [operand for operand in operands if not _only_config(operand, self.names)]
        return _checked_by_callers(self.ctx.tree, self.function, stmt, added)

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
            and not self._chooses_or_checked(stmt)
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
