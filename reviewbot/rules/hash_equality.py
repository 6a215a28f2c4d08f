"""`key-shares-artifacts.hash-equality`: an `__eq__` that decides equality by hash values alone.

Python's `hash()` is not injective (`hash(-1) == hash(-2)`, tuples and strings collide), so an
`__eq__` whose answer is only "the hashes are equal" makes two different objects equal whenever
their hashes collide: as a dict key, a set member or a cache key (a `jax.jit` static argument, a
memo table) the second object gets the first one's entry. Reported (P0 claimed; a static pattern,
so P2 unconfirmed) when every value `__eq__` returns, other than constants, is `A == B` with both
sides hash values, possibly `and`-ed with type checks (`isinstance(...)`, `type(a) is type(b)`).

A hash value is a call of the builtin `hash(...)` or `x.__hash__()`, or an attribute of the class
that its methods set from one: `self.X = hash(...)`, `object.__setattr__(self, "X", hash(...))`,
or a local `n = hash(...)` passed to `cls(...)` (or the class by name) as `X=n` or at `X`'s place
among the class's annotated fields (a dataclass). Not reported: hashes compared as a quick
rejection before the values themselves (`self.h == other.h and self.key == other.key`), and
attributes that do not come from `hash()` (an integer id).
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.findings import Finding, Severity
from reviewbot.rules.common import FileContext

_TYPE_CHECK_FUNCS = ("isinstance", "issubclass")


def _is_hash_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Name) and func.id == "hash":
        return len(node.args) == 1 and not node.keywords
    return isinstance(func, ast.Attribute) and func.attr == "__hash__" and not node.args


def _methods(cls: ast.ClassDef) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _fields(cls: ast.ClassDef) -> list[str]:
    """The class's annotated class-level names in order (a dataclass's `__init__` parameters)."""
    return [
        s.target.id
        for s in cls.body
        if isinstance(s, ast.AnnAssign)
        and isinstance(s.target, ast.Name)
        and "ClassVar" not in ast.unparse(s.annotation)
    ]


def _first_param(method: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    params = [*method.args.posonlyargs, *method.args.args]
    return params[0].arg if params else None


def _hash_attributes(cls: ast.ClassDef) -> set[str]:
    """Attributes the class's methods set from a `hash()` value (module docstring)."""
    fields = _fields(cls)
    found: set[str] = set()
    for method in _methods(cls):
        me = _first_param(method)
        hash_locals = {
            target.id
            for node in pysource.walk(method)
            if isinstance(node, ast.Assign) and _is_hash_call(node.value)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in pysource.walk(method):
            if isinstance(node, ast.Assign) and _is_hash_call(node.value):
                found.update(
                    t.attr
                    for t in node.targets
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me
                )
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "__setattr__"
                and len(node.args) == 3
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _is_hash_call(node.args[2])
            ):
                found.add(node.args[1].value)
            if isinstance(func, ast.Name) and func.id in (me, cls.name):
                for i, arg in enumerate(node.args):
                    if isinstance(arg, ast.Name) and arg.id in hash_locals and i < len(fields):
                        found.add(fields[i])
                found.update(
                    kw.arg
                    for kw in node.keywords
                    if kw.arg is not None and isinstance(kw.value, ast.Name) and kw.value.id in hash_locals
                )
    return found


def _is_hash_value(node: ast.AST, attrs: set[str], params: set[str]) -> bool:
    if _is_hash_call(node):
        return True
    return (
        isinstance(node, ast.Attribute)
        and node.attr in attrs
        and isinstance(node.value, ast.Name)
        and node.value.id in params
    )


def _is_type_check(node: ast.AST) -> bool:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return node.func.id in _TYPE_CHECK_FUNCS
    if isinstance(node, ast.Compare) and all(isinstance(op, (ast.Is, ast.Eq)) for op in node.ops):
        parts = [node.left, *node.comparators]
        return all(
            (isinstance(p, ast.Call) and isinstance(p.func, ast.Name) and p.func.id == "type")
            or (isinstance(p, ast.Attribute) and p.attr == "__class__")
            for p in parts
        )
    return False


def _compares_hashes(node: ast.AST, attrs: set[str], params: set[str]) -> bool:
    return (
        isinstance(node, ast.Compare)
        and len(node.ops) == 1
        and isinstance(node.ops[0], ast.Eq)
        and _is_hash_value(node.left, attrs, params)
        and _is_hash_value(node.comparators[0], attrs, params)
    )


def _decided_by_hash(value: ast.AST, attrs: set[str], params: set[str]) -> bool:
    """`value` is a hash comparison, alone or `and`-ed with type checks only."""
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.And):
        compares = [v for v in value.values if _compares_hashes(v, attrs, params)]
        return bool(compares) and all(v in compares or _is_type_check(v) for v in value.values)
    return _compares_hashes(value, attrs, params)


def _own_returns(func: ast.AST) -> list[ast.Return]:
    """The `return` statements of `func`'s own body (not of functions or classes nested in it)."""
    out: list[ast.Return] = []
    stack = list(ast.iter_child_nodes(func))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return):
            out.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return out


def _hash_only_eq(cls: ast.ClassDef) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    eq = next((m for m in _methods(cls) if m.name == "__eq__"), None)
    if eq is None:
        return None
    params = {a.arg for a in [*eq.args.posonlyargs, *eq.args.args]}
    decisive = [r.value for r in _own_returns(eq) if r.value is not None and not isinstance(r.value, ast.Constant)]
    decisive = [v for v in decisive if not (isinstance(v, ast.Name) and v.id == "NotImplemented")]
    if not decisive:
        return None
    attrs = _hash_attributes(cls)
    return eq if all(_decided_by_hash(v, attrs, params) for v in decisive) else None


def _hash_rebound(tree: ast.Module) -> bool:
    """The module binds its own `hash` (a function, an import or an assignment at top level)."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == "hash":
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == "hash" for a in node.names):
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "hash" for t in node.targets):
            return True
    return False


def check(ctx: FileContext) -> list[Finding]:
    if _hash_rebound(ctx.tree):
        return []
    findings = []
    for cls in (n for n in pysource.nodes(ctx.tree) if isinstance(n, ast.ClassDef)):
        eq = _hash_only_eq(cls)
        if eq is None:
            continue
        findings.append(
            Finding(
                rule="key-shares-artifacts",
                severity=Severity.P0,
                path=ctx.path,
                line_start=eq.lineno,
                line_end=eq.end_lineno or eq.lineno,
                message_id="key-shares-artifacts.hash-equality",
                params={"class_name": cls.name},
                qualname=ctx.qualname(eq.lineno),
            )
        )
    return findings
