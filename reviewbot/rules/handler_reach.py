"""What a handler's outcome can reach, read before `broad_except` gives a swallowing handler `P2`
(round 12 of the precision benchmark: the evidence of harm is what the substitute does downstream).

- *moved, not added* (`moved_handlers`): a handler whose try body and handler are, statement for
  statement, the code of a try of the base revision (any changed file: code moved across files
  counts) as often at base as at head, each occurrence under at least the `if` conditions it stood
  under at base. The change moved it (under a new `elif`, into another function); it adds no new
  way to lose an error. Like `silent_gate`'s moved conditions; a try whose guarding `if` the change
  removed runs in more situations and stays new (accelerate's `gather_for_metrics` handler).
- *another implementation on the same inputs* (`implementation_alternative`): a try of one
  statement calling `owner.op(args)` whose handler is one statement calling `owner.other(args)` with
  the same arguments and binding the same targets (torchrec's `torch.ops.fbgemm.permute_sparse_data`,
  then `permute_2D_sparse_data`). What the handler does on an error that is not "this implementation
  is missing" is run the same operation on the same inputs again: an OOM, a bad input or a compiler
  failure fails there too and propagates; nothing is substituted that the caller would not get.
- *nothing substituted* (`nothing_substituted`): a try standing directly in a function or module
  body, without `return` or `yield`, whose bindings are read nowhere else in that scope, that
  runs no code of the repository (only libraries outside it: `runs_no_repository_code`), and a
  handler that binds and returns nothing (only `pass` and reports); the program goes on exactly as
  without the try's effect. What is lost is announced (the handler warns at warning level or above)
  or is only a module outside the repository being imported (a side-effect import): no result the
  user receives changes, at most an effect the user is told about, and no bug of the repository is
  what the handler can swallow. A compile step or a save of the repository's own code skipped with
  a warning (`write(graph)`, `self.save(state)`) loses the work itself and stays `P2`.
- *a result only reported* (`report_only_results`): a module-private function (`_name`) whose every
  use in the file is a call from a *report procedure*: a function that hands back no value and whose
  statements only bind local names, print, echo, log or warn, and branch on those (ColossalAI's
  installation check: `_check_cuda_version()` read by `check_installation`, which only echoes). A
  constant the private function's handler substitutes can only change a line of that report.

Each keeps the finding at `P3` (or drops it, for moved code): the catch-all still hides a bug of its
try, but without evidence that its fallback value reaches a result, it is no `P2`. Near misses (see
`tests/reviewbot/engine/test_engine_exception_round12.py`): a changed handler or try body, a
different argument in the alternative, a binding read after the try or a substitute returned, a
private function whose result also reaches code that returns a value.

Round 13 reads where a reported fallback's constant goes (`tests/reviewbot/engine/test_engine_exception_round13.py`):

- *a placeholder in the try's entry* (`placeholder_entry`): a reported fallback may write a constant
  into the entry the try writes (`metadata["model_hash"] = "unknown"`), as it may bind one to a
  plain name: nothing.
- *the caller's argument replaced* (`replaced_argument`): the other way, a reported fallback that
  sets a parameter the try converts in place, read after the try, hands the rest of the function
  an input the caller did not pass (TGI's JSON schema becoming `(.*?)`); `broad_except` reports it
  at `P2`. Near miss: an option parameter the try does not bind, switched by the handler.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Iterable, Mapping

from reviewbot import pysource
from reviewbot.rules.common import (
    FileContext,
    callee,
    hands_back_nothing,
    innermost_function,
    is_logging_call,
    paired_calls,
    same_node,
    warns,
)

# builtins that run no code they are handed or named (not `getattr`, `map`, `sorted`, `next`, ...)
_BUILTINS = frozenset(name for name in dir(builtins) if not name.startswith("_")) - frozenset(
    ["getattr", "setattr", "delattr", "hasattr", "map", "filter", "sorted", "super", "next", "iter", "eval", "exec"]
)
# calls that only show text to the user (`click.echo`, `typer.secho`, `print`) besides logging
_DISPLAY = frozenset(["echo", "secho", "print", "pprint"])


def handler_key(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str:
    """The try body and one handler as code, without positions (`ast.dump` drops them)."""
    return ast.dump(ast.Module(body=node.body, type_ignores=[])) + "|" + ast.dump(handler)


Guards = frozenset[tuple[str, bool]]
# a handler's try body and handler as statement kinds, its name and caught type: equal `handler_key`s
# have equal shapes, and a shape costs no `ast.dump` of the try body
Shape = tuple[tuple[str, ...], tuple[str, ...], str | None, str | None]


def _shape(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> Shape:
    return (
        tuple(type(stmt).__name__ for stmt in node.body),
        tuple(type(stmt).__name__ for stmt in handler.body),
        handler.name,
        None if handler.type is None else ast.dump(handler.type),
    )


class _Handlers:
    """The handlers of one tree by `_shape`, each with the `if` branches its try stands in (the `if`
    statement, whether the try is in its `else:`/`elif` branch); their `handler_key`s and the
    conditions as code are dumped on first use. Owned by the tree (`_tree_guarded_handlers`), read
    by the one review that parsed it."""

    def __init__(self) -> None:
        self.by_shape: dict[Shape, list[tuple[ast.Try | ast.TryStar, ast.ExceptHandler, tuple]]] = {}
        self._keys: dict[ast.ExceptHandler, str] = {}
        self._tests: dict[ast.If, str] = {}

    def key(self, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str:
        """`handler_key(node, handler)`, dumped once."""
        if handler not in self._keys:
            self._keys[handler] = handler_key(node, handler)
        return self._keys[handler]

    def guards(self, branches: tuple[tuple[ast.If, bool], ...]) -> Guards:
        """The branches as guards: (the condition as code, in its `else:` branch)."""
        for branch, _ in branches:
            if branch not in self._tests:
                self._tests[branch] = ast.dump(branch.test)
        return frozenset((self._tests[branch], in_else) for branch, in_else in branches)

    def occurrences(self, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> list[Guards]:
        """The guards of each handler of the tree with the `handler_key` of `node`'s `handler`, found
        among those of its shape by `same_node` (the handlers first, then the try bodies)."""
        return [
            self.guards(branches)
            for other, other_handler, branches in self.by_shape.get(_shape(node, handler), ())
            if same_node(handler, other_handler) and same_node(node.body, other.body)
        ]


def _guarded_handlers(trees: tuple[tuple[str, ast.Module], ...]) -> dict[str, list[Guards]]:
    """`handler_key` -> the guards of each occurrence: the `if` conditions the try stands under, each
    as (the condition as code, whether the try is in its `else:`/`elif` branch)."""
    found: dict[str, list[Guards]] = {}
    for _, tree in trees:
        handlers = _tree_guarded_handlers(tree)
        for occurrences in handlers.by_shape.values():
            for node, handler, branches in occurrences:
                found.setdefault(handlers.key(node, handler), []).append(handlers.guards(branches))
    return found


@pysource.PerTree
def _tree_guarded_handlers(tree: ast.AST) -> _Handlers:
    """The handlers of one tree (`_Handlers`), kept while the tree lives: each changed file's review
    reads the others' again. One pass over the statement lists (a try is a statement; an `if`'s
    condition holds none); the values hold nodes of the tree, never the tree itself."""
    found = _Handlers()

    def visit(body: list[ast.stmt], branches: tuple[tuple[ast.If, bool], ...]) -> None:
        for stmt in body:
            if isinstance(stmt, (ast.Try, ast.TryStar)):
                for handler in stmt.handlers:
                    found.by_shape.setdefault(_shape(stmt, handler), []).append((stmt, handler, branches))
            if isinstance(stmt, ast.If):
                visit(stmt.body, (*branches, (stmt, False)))
                visit(stmt.orelse, (*branches, (stmt, True)))
                continue
            for field in ("body", "handlers", "orelse", "finalbody", "cases"):  # in `_fields` order
                children = getattr(stmt, field, None)
                if not children or not isinstance(children, list):  # a lambda's `body` is one expression
                    continue
                if isinstance(children[0], (ast.ExceptHandler, ast.match_case)):
                    for clause in children:
                        visit(clause.body, branches)
                else:
                    visit(children, branches)

    visit(getattr(tree, "body", []), ())
    return found


def moved_handlers(ctx: FileContext, among: Iterable[ast.Try | ast.TryStar] | None = None) -> frozenset[str]:
    """`handler_key`s of the head revision that occur at least as often in the base versions of the
    changed files (removed files included) as in their head versions, each head occurrence under at
    least the `if` conditions of a base occurrence: moved, not added, and running in no situation
    it did not run in before. A try whose guarding condition the change removed runs in more
    situations (accelerate's `gather_for_metrics` handler, now also on one process): still new.
    `among`: only the keys of these tries' handlers are asked, their occurrences found by `same_node`
    among the handlers of their shape (nothing else is dumped); the keys of every changed head
    file by default. Empty for a base-revision context."""
    if ctx.revision != "head":
        return frozenset()
    if among is None:
        base = _guarded_handlers(ctx.changed_trees("base"))
        head = _guarded_handlers(ctx.changed_trees("head"))
        return frozenset(key for key, occurrences in head.items() if _moved(occurrences, base.get(key, [])))
    moved: set[str] = set()
    for node in among:
        for handler in node.handlers:
            head_occurrences, base_occurrences = (
                [
                    guards
                    for _, tree in ctx.changed_trees(revision)
                    for guards in _tree_guarded_handlers(tree).occurrences(node, handler)
                ]
                for revision in ("head", "base")
            )
            if head_occurrences and _moved(head_occurrences, base_occurrences):
                moved.add(handler_key(node, handler))
    return frozenset(moved)


def _moved(head: list[Guards], base: list[Guards]) -> bool:
    """As many occurrences at base as at head, each head one under at least a base one's guards."""
    return len(base) >= len(head) and all(any(before <= guards for before in base) for guards in head)


def implementation_alternative(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The alternative's name (`owner.other`) when the try's one statement calls `owner.op(args)` and
    the handler's one statement calls `owner.other(args)` with the same arguments, binding or returning
    the result the same way; None otherwise."""
    calls = paired_calls(node, handler)
    if calls is None:
        return None
    first, second = calls
    if not (isinstance(first.func, ast.Attribute) and isinstance(second.func, ast.Attribute)):
        return None
    if first.func.attr == second.func.attr or ast.dump(first.func.value) != ast.dump(second.func.value):
        return None
    same_args = [ast.dump(a) for a in first.args] == [ast.dump(a) for a in second.args]
    same_keywords = [ast.dump(k) for k in first.keywords] == [ast.dump(k) for k in second.keywords]
    if not (same_args and same_keywords):
        return None
    return ast.unparse(second.func)


def _bound_names(body: list[ast.stmt]) -> set[str]:
    names: set[str] = set()
    for stmt in body:
        for node in pysource.walk(stmt):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
    return names


def _scope_of(tree: ast.Module, node: ast.stmt) -> list[ast.stmt] | None:
    """The statement list of the function or module whose body holds `node` directly."""
    if any(stmt is node for stmt in tree.body):
        return tree.body
    return _function_bodies(tree).get(node)


@pysource.PerTree
def _function_bodies(tree: ast.AST) -> dict[ast.stmt, list[ast.stmt]]:
    """Each statement standing directly in the body of a function of `tree` (at any depth) -> that
    body, read once per tree for `_scope_of`."""
    return {
        stmt: function.body
        for function in pysource.statements(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for stmt in function.body
    }


def _third_party_imports_only(ctx: FileContext, body: list[ast.stmt]) -> bool:
    """Only `import`/`from ... import` statements, none of a module of the repository (relative, or a
    top-level name that is a folder on the file's own path)."""
    folders = set(ctx.path.split("/")[:-1])
    for stmt in body:
        if isinstance(stmt, ast.ImportFrom):
            if stmt.level or (stmt.module or "").split(".")[0] in folders:
                return False
        elif isinstance(stmt, ast.Import):
            if any(alias.name.split(".")[0] in folders for alias in stmt.names):
                return False
        else:
            return False
    return True


def _outside(ctx: FileContext, dotted: str) -> bool:
    """A dotted import target outside the repository: its top-level name is no folder on the file's
    own path (relative imports resolve into the file's package, so they are inside)."""
    return dotted.split(".")[0] not in set(ctx.path.split("/")[:-1])


def runs_no_repository_code(ctx: FileContext, body: list[ast.stmt], imports: Mapping[str, str]) -> bool:
    """Every call of `body` goes to a library outside the repository: its callee is rooted at a name the
    file imports from such a module (`to_agraph(graph)`, `os.path.splitext(p)`), at a name `body` bound
    to such a call's result (`A = to_agraph(g)`, then `A.draw(p)`) or to an attribute of such a
    module (`v = torch.version.cuda`, then `v.split(".")`), or is a builtin that runs no code
    it is handed; no lambda is handed over, nothing is imported from the repository and nothing is
    awaited. No code of the repository runs there, so no programmer error of it can be what the
    handler swallows."""
    values: set[str] = set()
    for stmt in body:
        for node in pysource.walk(stmt):
            if isinstance(node, (ast.Await, ast.Lambda, ast.YieldFrom)):
                return False
            if isinstance(node, ast.ImportFrom) and (node.level or not _outside(ctx, node.module or "")):
                return False
            if isinstance(node, ast.Import) and not all(_outside(ctx, alias.name) for alias in node.names):
                return False
            if isinstance(node, ast.Assign) and (
                isinstance(node.value, ast.Call) or _outside_attribute(ctx, node.value, imports)
            ):
                values.update(t.id for t in node.targets if isinstance(t, ast.Name))
            if not isinstance(node, ast.Call):
                continue
            root = node.func
            while isinstance(root, ast.Attribute):
                root = root.value
            if not isinstance(root, ast.Name):
                return False
            if root.id in values and root is not node.func:
                continue
            target = imports.get(root.id)
            if target is None:
                if not (root.id in _BUILTINS and root is node.func):
                    return False
            elif not _outside(ctx, target):
                return False
    return True


def _outside_attribute(ctx: FileContext, value: ast.expr, imports: Mapping[str, str]) -> bool:
    """An attribute read of a module outside the repository (`torch.version.cuda`)."""
    if not isinstance(value, ast.Attribute):
        return False
    root = value.value
    while isinstance(root, ast.Attribute):
        root = root.value
    return isinstance(root, ast.Name) and root.id in imports and _outside(ctx, imports[root.id])


def nothing_substituted(
    ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, imports: Mapping[str, str]
) -> str | None:
    """ "announced" or "side-effect import" when the handler substitutes nothing that is read (see the
    module docstring), what is lost is announced or only a third-party import, and the try runs no
    code of the repository (`runs_no_repository_code`): a compile step or a save of the repository's
    own, skipped with a warning, loses the work itself. None otherwise."""
    if node.orelse or node.finalbody or not handler.body:
        return None
    scope = _scope_of(ctx.tree, node)
    if scope is None:
        return None
    for stmt in node.body:
        for sub in pysource.walk(stmt):
            if isinstance(sub, (ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)):
                return None
    if not all(isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and _reports(stmt)) for stmt in handler.body):
        return None
    bound = _bound_names(node.body)
    # anywhere else in the scope, nested functions included: a function defined above a module-level
    # try reads its names when called
    for stmt in scope:
        if stmt is node:
            continue
        for sub in pysource.walk(stmt):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id in bound:
                return None
    if not runs_no_repository_code(ctx, node.body, imports):
        return None
    if any(warns(stmt) for stmt in handler.body):
        return "announced"
    if _third_party_imports_only(ctx, node.body):
        return "side-effect import"
    return None


def _reports(stmt: ast.stmt) -> bool:
    """A call that only shows text: logging, `warnings.warn`, `print`, `click.echo`."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    return is_logging_call(stmt.value) or callee(stmt.value) in _DISPLAY


def _local_target(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return True
    return isinstance(target, ast.Tuple) and all(isinstance(elt, ast.Name) for elt in target.elts)


def _report_statement(stmt: ast.stmt, shared: set[str]) -> bool:
    """Binds local names, shows text, passes or returns nothing, or branches on such statements."""
    if isinstance(stmt, ast.Assign):
        return all(_local_target(t) for t in stmt.targets) and not _bound_names([stmt]) & shared
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, ast.Constant) or _reports(stmt)
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Return):
        return stmt.value is None
    if isinstance(stmt, ast.If):
        return all(_report_statement(part, shared) for part in [*stmt.body, *stmt.orelse])
    return False


def _report_procedures(tree: ast.Module) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Top-level functions that hand back nothing and whose statements only bind local names,
    show text and branch on those, with at least one shown line."""
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for function in tree.body:
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) or function.decorator_list:
            continue
        # with no shared names a statement is a report statement at least as often: a cheap first test
        if not all(_report_statement(stmt, set()) for stmt in function.body):
            continue
        shared = pysource.shared_names(function)
        if (
            hands_back_nothing(function)
            and all(_report_statement(stmt, shared) for stmt in function.body)
            and any(
                _reports(stmt) for node in function.body for stmt in pysource.walk(node) if isinstance(stmt, ast.stmt)
            )
        ):
            found[function.name] = function
    return found


def report_only_results(tree: ast.Module) -> dict[str, str]:
    """Module-private top-level function name -> the report procedure that alone uses its result: every
    mention of the name in the file is the callee of a call inside report procedures (at least one)."""
    procedures = _report_procedures(tree)
    private = {
        stmt.name
        for stmt in tree.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name.startswith("_")
    }
    inside: dict[str, set[str]] = {name: set() for name in private}
    called: set[int] = set()
    for name, procedure in procedures.items():
        for node in pysource.walk(procedure):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in private:
                inside[node.func.id].add(name)
                called.add(id(node.func))
    if not called:
        return {}
    mentioned_elsewhere = {
        node.id
        for node in pysource.nodes(tree)
        if isinstance(node, ast.Name) and node.id in private and id(node) not in called
    }
    return {name: min(users) for name, users in inside.items() if users and name not in mentioned_elsewhere}


def substitutes_constant(handler: ast.ExceptHandler) -> bool:
    """The handler only assigns constants to plain names, passes or reports."""
    for stmt in handler.body:
        if isinstance(stmt, ast.Assign):
            if not (all(isinstance(t, ast.Name) for t in stmt.targets) and isinstance(stmt.value, ast.Constant)):
                return False
        elif not (isinstance(stmt, ast.Pass) or _reports(stmt)):
            return False
    return True


def enclosing_function(tree: ast.Module, node: ast.stmt) -> str | None:
    """The top-level function that holds `node` in its own code (not in a nested function or class)."""
    return _own_statements(tree).get(node)


@pysource.PerTree
def _own_statements(tree: ast.AST) -> dict[ast.stmt, str]:
    """Each statement in the own code of a top-level function of `tree` (a nested function or class
    statement itself, not what it holds) -> the function's name (the first such function's, in
    file order), read once per tree for `enclosing_function`. Statements stand only in statement
    lists (no expression, lambda included, holds one)."""
    found: dict[ast.stmt, str] = {}
    for function in getattr(tree, "body", []):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        pending: list[ast.stmt] = list(function.body)
        while pending:
            current = pending.pop()
            found.setdefault(current, function.name)
            if isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            for field in ("body", "orelse", "finalbody"):
                children = getattr(current, field, None)
                if isinstance(children, list):
                    pending.extend(children)
            for clause in [*getattr(current, "handlers", ()), *getattr(current, "cases", ())]:
                pending.extend(clause.body)
    return found


def replaced_argument(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The parameter the try body converts in place and the handler rebinds to a constant instead,
    when the function holding the try reads it after the try (round 13, TGI's grammar fallback:
    `schema = build_regex_from_schema(schema)`, then `schema = "(.*?)"`); None otherwise. A
    reported fallback to a constant is a stated default for a value the function makes; one put
    where the caller's converted input should be goes on to answer a request the caller did not
    make (a JSON schema becomes "anything"), and the caller is told nothing: the log is where the
    function runs. Near miss: a parameter the try does not bind, such as an option the handler
    switches (`save_as_external_data = True` when the size probe fails): the function's own route."""
    constants = [
        target.id
        for stmt in handler.body
        if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
        for target in stmt.targets
        if isinstance(target, ast.Name)
    ]
    converted = _bound_names(node.body)
    constants = [name for name in constants if name in converted]
    if not constants:
        return None
    function = innermost_function(tree, node)
    if function is None:
        return None
    arguments = function.args
    parameters = {
        arg.arg
        for arg in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        if arg is not None
    }
    end = node.end_lineno or node.lineno
    read_after = {
        sub.id
        for sub in pysource.walk(function)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.lineno > end
    }
    return next((name for name in constants if name in parameters and name in read_after), None)


def placeholder_entry(stmt: ast.stmt, try_body: list[ast.stmt]) -> bool:
    """`name[<constant>] = <constant>` where the try body assigns that same entry (round 13, Olive's
    `metadata["model_hash"] = "unknown"`): a constant default put where the try puts its result, as
    `name = <constant>` is for a plain name."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Subscript)
        and isinstance(stmt.targets[0].value, ast.Name)
        and isinstance(stmt.targets[0].slice, ast.Constant)
        and isinstance(stmt.value, ast.Constant)
    ):
        return False
    entry = ast.dump(stmt.targets[0])
    return any(
        isinstance(sub, ast.Assign) and any(ast.dump(target) == entry for target in sub.targets)
        for part in try_body
        for sub in pysource.walk(part)
    )
