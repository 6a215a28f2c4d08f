"""Names a handler that falls through leaves unbound: the code after a try reads a name only the
try's body binds.

```
for d in jax.local_devices():
    try:
        dev = wp.device_from_jax(d)
    except Exception:
        pass  # "ignore unsupported devices"
    if dev.is_cuda:  # unbound on the first turn, the previous turn's device on the others
        ...
```

A handler that binds no name and does not leave (`return`, `raise`, `continue`, `break` or, since
round 21, `sys.exit(...)` directly in its body) hands the statement after the try a name the failed operation never bound: an
`UnboundLocalError`/`NameError`, or inside a loop the value of an earlier turn, taken for this
turn's. Bound before the try means bound by an earlier statement of the same scope on the way to
the try (its block and the blocks around it, up to the function, whose parameters count; a loop's
target counts for its body), so `dev = None` before the try makes it a stated default. Only the
statements after the try in its own block are read, in order, up to one that binds the name again;
of a `def` or `class` after it only what runs at once (decorators, defaults, bases), not its body.
Inside a compound statement after the try the reads are followed block by block in the order they
run (a loop's body, a later try's body, handlers and `else:`), so a name that statement binds
before reading it is not the try's (round 20: slime's second address strategy binds `ip` in its
own loop before testing it).

The same names read in a handler's own body (`except BaseException as e: log(f"{e} {outputs}")`)
raise there when the body failed before binding them, and that error replaces the caught one; a
name the body's leading statements bind without being able to fail (`n = 0`) is always bound.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable

from reviewbot import pysource

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_LEAVES = (ast.Return, ast.Raise, ast.Continue, ast.Break)
# calls that end the process: `sys.exit` and the `exit`/`quit` builtins raise `SystemExit`
_EXITS = frozenset(["sys.exit", "exit", "quit", "os._exit"])


@dataclasses.dataclass(frozen=True)
class UnboundRead:
    """`name`, bound only in the try's body, read at `line` after the try."""

    name: str
    line: int


def _names(node: ast.AST, ctx: type[ast.expr_context]) -> list[ast.Name]:
    """The `Name` nodes of `node` with context `ctx`, in source order, not entering nested scopes."""
    found: list[ast.Name] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Name) and isinstance(current.ctx, ctx):
            found.append(current)
        stack.extend(child for child in reversed(pysource.children(current)) if not isinstance(child, _SCOPES))
    return found


def _bound(stmt: ast.stmt, stores: Callable[[ast.stmt], set[str]] | None = None) -> set[str]:
    """Names `stmt` binds in its scope (assignments, loop targets, `with ... as`, imports, defs;
    of a `def` or `class` its name, not the names its body binds, which are its own). `stores`:
    the `Name` targets of a statement other than a def or class, nested blocks included, nested
    scopes not (`_Stores`, memoized per statement); by default read by `_names`."""
    if stores is not None and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names = set(stores(stmt))
    else:
        names = {n.id for part in _run_now(stmt) for n in _names(part, ast.Store)}
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names |= {(alias.asname or alias.name).split(".")[0] for alias in stmt.names}
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        names.add(stmt.name)
    return names


class _Stores:
    """`{n.id for n in _names(stmt, ast.Store)}` of a statement, memoized per statement and built
    from the memo of the statements nested in it, so that reading every statement of a deeply
    nested block costs one pass over it rather than one per level of nesting."""

    def __init__(self) -> None:
        self._memo: dict[int, set[str]] = {}

    def __call__(self, stmt: ast.stmt) -> set[str]:
        found = self._memo.get(id(stmt))
        if found is None:
            found = self._memo[id(stmt)] = self._of(stmt)
        return found

    def _of(self, node: ast.AST) -> set[str]:
        # the children `_names` enters: every child but a nested scope; statements (also those of
        # a handler or a match case) come from the memo, expressions hold none
        names: set[str] = set()
        for field in node._fields:
            value = getattr(node, field, None)
            for child in value if isinstance(value, list) else (value,):
                if not isinstance(child, ast.AST) or isinstance(child, _SCOPES):
                    continue
                if isinstance(child, ast.stmt):
                    names |= self(child)
                elif isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    names |= self._of(child)
                else:
                    names.update(n.id for n in _names(child, ast.Store))
        return names


def _declared_outside(tree: ast.Module) -> dict[int, set[str]]:
    """id of each function -> the names it declares `global` or `nonlocal`, in its body or in code
    nested in it: bound elsewhere, not followed there."""
    declared: dict[int, set[str]] = {}

    def visit(node: ast.AST, functions: list[set[str]]) -> None:
        for stmt in _child_statements(node):
            if isinstance(stmt, (ast.Global, ast.Nonlocal)):
                for names in functions:
                    names.update(stmt.names)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                declared[id(stmt)] = set()
                visit(stmt, [*functions, declared[id(stmt)]])
            else:
                visit(stmt, functions)

    visit(tree, [])
    return declared


def _child_statements(node: ast.AST) -> list[ast.stmt]:
    """The statements of `node`'s own statement lists (those of its handlers and match cases too)."""
    out: list[ast.stmt] = []
    for field in pysource.STATEMENT_LISTS:
        children = getattr(node, field, None)
        if not isinstance(children, list):
            continue
        for child in children:
            if isinstance(child, ast.stmt):
                out.append(child)
            else:
                out.extend(_child_statements(child))
    return out


def _falls_through(handler: ast.ExceptHandler) -> bool:
    """The handler's body can end without leaving the block: no statement of it leaves on every
    path (`_leaves`)."""
    return not any(_leaves(stmt) for stmt in handler.body)


def _leaves(stmt: ast.stmt) -> bool:
    """`return`, `raise`, `continue` or `break`, a call ending the process (`_EXITS`: `sys.exit(...)`
    raises `SystemExit`, round 21), or an `if` whose branches both end in one (TorchServe's `if "CUDA"
    in str(ex): ... return ... else: ... return ...`)."""
    if isinstance(stmt, _LEAVES):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and ast.unparse(stmt.value.func) in _EXITS:
        return True
    return (
        isinstance(stmt, ast.If)
        and bool(stmt.orelse)
        and any(_leaves(sub) for sub in stmt.body)
        and any(_leaves(sub) for sub in stmt.orelse)
    )


def unbound_reads(tree: ast.Module) -> dict[int, list[UnboundRead]]:
    """id of each try statement -> the names its body binds that are unbound before it and read by
    a later statement of its block (see the module docstring), with the line of that read; and id
    of each handler -> the first read in its own body of such a name that a failure in the body
    can leave unbound (`_read_in_handler`)."""
    out: dict[int, list[UnboundRead]] = {}
    memo: dict[int, set[str]] = {}
    stores = _Stores()
    declared = _declared_outside(tree)

    def bound_by(stmt: ast.stmt) -> set[str]:
        if id(stmt) not in memo:
            memo[id(stmt)] = _bound(stmt, stores)
        return memo[id(stmt)]

    def block(stmts: list[ast.stmt], bound: set[str], skip: set[str]) -> None:
        bound = set(bound)
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, (ast.Try, ast.TryStar)):
                reads = _reads_after(stmt, stmts[i + 1 :], bound | skip, bound_by)
                if reads:
                    out[id(stmt)] = reads
                for handler in stmt.handlers:
                    read = _read_in_handler(stmt, handler, bound | skip, bound_by)
                    if read is not None:
                        out[id(handler)] = [read]
            descend(stmt, bound, skip)
            bound |= bound_by(stmt)

    def descend(stmt: ast.stmt, bound: set[str], skip: set[str]) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = stmt.args
            params = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs)}
            params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
            block(stmt.body, params, declared[id(stmt)])
        elif isinstance(stmt, ast.ClassDef):
            block(stmt.body, set(), set())
        elif isinstance(stmt, (ast.For, ast.AsyncFor)):
            block(stmt.body, bound | {n.id for n in _names(stmt.target, ast.Store)}, skip)
            block(stmt.orelse, bound, skip)
        elif isinstance(stmt, (ast.While, ast.If)):
            block(stmt.body, bound, skip)
            block(stmt.orelse, bound, skip)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            targets = {n.id for item in stmt.items if item.optional_vars for n in _names(item.optional_vars, ast.Store)}
            block(stmt.body, bound | targets, skip)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            block(stmt.body, bound, skip)
            for handler in stmt.handlers:
                block(handler.body, bound | ({handler.name} if handler.name else set()), skip)
            block(stmt.orelse, bound | _bound_in(stmt.body, bound_by), skip)
            block(stmt.finalbody, bound, skip)
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                block(case.body, bound | {n.id for n in _names(case.pattern, ast.Store)}, skip)

    block(tree.body, set(), set())
    return out


def _bound_in(stmts: list[ast.stmt], bound_by: Callable[[ast.stmt], set[str]] = _bound) -> set[str]:
    names: set[str] = set()
    for stmt in stmts:
        names |= bound_by(stmt)
    return names


def _run_now(stmt: ast.stmt) -> list[ast.AST]:
    """The parts of `stmt` that run when it runs: of a `def` or `class` only its decorators,
    defaults, bases and keywords (its body reads names when it is called, which is how an announced
    import failure is meant to surface: a `NameError` at the first use)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = stmt.args
        return [*stmt.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None)]
    if isinstance(stmt, ast.ClassDef):
        return [*stmt.decorator_list, *stmt.bases, *stmt.keywords]
    return [stmt]


def _reads_after(
    node: ast.Try | ast.TryStar, after: list[ast.stmt], bound: set[str], bound_by: Callable[[ast.stmt], set[str]]
) -> list[UnboundRead]:
    """Of the names the try's body binds that are not in `bound`, those a statement of `after` reads
    before one binds them again, with the line of that first read, by name (`bound_by`: `_bound`,
    memoized)."""
    remaining = _bound_in(node.body, bound_by) - bound
    reads: list[UnboundRead] = []
    for stmt in after:
        if not remaining:
            break
        found = _unbound_read([stmt], remaining, bound_by)
        while found is not None:
            reads.append(found)
            remaining.discard(found.name)
            found = _unbound_read([stmt], remaining, bound_by) if remaining else None
        remaining -= bound_by(stmt)
    return sorted(reads, key=lambda read: read.name)


def _binds_safely(stmt: ast.stmt) -> bool:
    """`name = <constant or name>`: a statement that cannot fail before it binds."""
    if isinstance(stmt, ast.Assign):
        targets, value = stmt.targets, stmt.value
    elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        targets, value = [stmt.target], stmt.value
    else:
        return False
    return all(isinstance(target, ast.Name) for target in targets) and isinstance(value, (ast.Constant, ast.Name))


def _read_in_handler(
    node: ast.Try | ast.TryStar,
    handler: ast.ExceptHandler,
    bound: set[str],
    bound_by: Callable[[ast.stmt], set[str]],
) -> UnboundRead | None:
    """The first read in `handler`'s body (before the handler binds it) of a name the try's body
    binds, not in `bound`, and not bound by the body's leading statements that cannot fail
    (`_binds_safely`): when the body fails before binding it, the handler raises
    `UnboundLocalError`/`NameError` and that replaces the error it caught."""
    maybe = _bound_in(node.body, bound_by) - bound
    for stmt in node.body:
        if not _binds_safely(stmt):
            break
        maybe -= bound_by(stmt)
    maybe.discard(handler.name or "")
    return _unbound_read(handler.body, maybe, bound_by) if maybe else None


def _unbound_read(
    stmts: list[ast.stmt], maybe: set[str], bound_by: Callable[[ast.stmt], set[str]]
) -> UnboundRead | None:
    """The first read, in the order `stmts` run, of a name of `maybe` before a statement binds it;
    a loop's or `with`'s target is bound for its body (`for child in ...: child.cleanup()`), and a
    nested try is read block by block (`ip = info[4][0]` then `if not loopback(ip)` in a later
    try's loop reads a name bound there, not the earlier try's)."""
    maybe = set(maybe)
    for stmt in stmts:
        if not maybe:
            return None
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            inner = maybe - {n.id for n in _names(stmt.target, ast.Store)}
            found = (
                _expression_read(stmt.iter, maybe)
                or _unbound_read(stmt.body, inner, bound_by)
                or _unbound_read(stmt.orelse, maybe, bound_by)
            )
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            found = next(filter(None, (_expression_read(item.context_expr, maybe) for item in stmt.items)), None)
            targets = {n.id for item in stmt.items if item.optional_vars for n in _names(item.optional_vars, ast.Store)}
            found = found or _unbound_read(stmt.body, maybe - targets, bound_by)
        elif isinstance(stmt, (ast.If, ast.While)):
            found = (
                _expression_read(stmt.test, maybe)
                or _unbound_read(stmt.body, maybe, bound_by)
                or _unbound_read(stmt.orelse, maybe, bound_by)
            )
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            # a handler may run after any statement of the body, so it gets `maybe` as it was; the
            # `else:` runs after the whole body (round 20: a name a later try binds before reading it)
            found = (
                _unbound_read(stmt.body, maybe, bound_by)
                or next(
                    filter(
                        None,
                        (
                            _unbound_read(h.body, maybe - ({h.name} if h.name else set()), bound_by)
                            for h in stmt.handlers
                        ),
                    ),
                    None,
                )
                or _unbound_read(stmt.orelse, maybe - _bound_in(stmt.body, bound_by), bound_by)
                or _unbound_read(stmt.finalbody, maybe, bound_by)
            )
        else:
            found = next(filter(None, (_expression_read(part, maybe) for part in _run_now(stmt))), None)
        if found is not None:
            return found
        maybe -= bound_by(stmt)
    return None


def _expression_read(node: ast.AST, maybe: set[str]) -> UnboundRead | None:
    """The first read in `node` of a name of `maybe`, a comprehension's own targets excepted."""
    own = {
        n.id for sub in pysource.walk(node) if isinstance(sub, ast.comprehension) for n in _names(sub.target, ast.Store)
    }
    reads = [name for name in _names(node, ast.Load) if name.id in maybe and name.id not in own]
    first = min(reads, key=lambda name: (name.lineno, name.col_offset), default=None)
    return UnboundRead(first.id, first.lineno) if first is not None else None


def left_unbound(handler: ast.ExceptHandler, reads: Callable[[], list[UnboundRead]]) -> UnboundRead | None:
    """The first of the try's `reads()` when `handler` falls through and binds no name at all (a
    handler that sets a flag or a default, `ok = False`, states what the code after the try tests);
    `reads` is asked only then."""
    if not _falls_through(handler) or _bound_in(handler.body):
        return None
    found = reads()
    return found[0] if found else None
