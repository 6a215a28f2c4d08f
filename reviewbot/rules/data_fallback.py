"""A catch-all whose fallback value flows on as data (round 19): the harm of a swallow lies in
what the value does downstream, and a report where it happens does not change it.

Two shapes a catch-all's handler shows in its own code, read before the exemptions for reported
fallbacks and confined tries (both P2):

- `broad-except.constant-data`: the handler binds or returns a container of constants (`tmp =
  [""]`, `scores = [0.0 for _ in batch]`, `return []`): an empty or constant batch in place of the
  computed one, which the code after it handles as a real result (lm-evaluation-harness's
  `parse_generations`: any parse failure becomes an empty answer, scored as wrong, and cached). A
  failure record (a container that also says the unit failed, `_error_record`) is not this class.
  Since round 20 also a handler that adds a constant to the collection its try fills
  (`results.append(float(score))` in the try, `results.append(0.0)` in the handler: NeMo-RL's math
  verifier scores every failure 0): the constant takes the computed element's place. Near misses: a
  constant added to another collection (a list of failed indices), a value built from the caught
  exception (a failure kept in the results, `_keeps_error`);
- `broad-except.widens-fallback`, below.

Nothing, for `constant-data` or the swallow (round 24, `replaced_marker`; `broad_except` reads it
like the alternatives tried in turn): a handler whose constant containers are only
`None`s bound to names (`wav, sr = None, None`), when the next statement the fall-through runs
(the one after the try, or after the `if` blocks whose last statement the try is) is `if <one of
those names> is None:` (or `if not <name>:`), with no `else:`, whose body only assigns, logs and
holds `if` blocks that end in `raise`, and rebinds every name the handler bound: the `None`s are a
marker that the next source fills or an error ends, not data that flows on (optimum-habana's
Whisper audio: a file that cannot be read is read from the in-memory bytes, or `RuntimeError`).
Near misses: a test of another name, a body that leaves one of the names `None`, a statement
between the try and the test.

A catch-all that repeats a narrower handler's fallback (`broad-except.widens-fallback`):

`except GetTimeoutError: print(...); return False` and then `except Exception as e: print(...);
return False` on the same try (OpenRLHF's math verifier; verl's PRIME scoring with
`asyncio.TimeoutError`, a whole batch scored 0): the narrow handler names the failure the fallback
was written for, and the catch-all after it gives every other error the same answer. What follows
cannot tell an unexpected error (a dead worker, a programmer error) from the expected failure: a
reward of 0 reads as a wrong answer, not as a broken scorer. Whether the handlers print does not
change that (the value flows on as data), so this is read before the reported-fallback exemptions.
The handlers are compared with their logging, `print` and warning calls set aside; a catch-all
that does something else (re-raises, returns another value) is not this class, nor one whose
fallback keeps the caught exception (`last_exception = e` in a retry loop that raises it when
exhausted: verl's reward request): the error travels on.

`P3` `broad-except.widens-discarded` in its place (round 25, `discarded_return`): the widened
fallback is a returned constant that nothing reads, and the catch-all shows the caught exception
itself (`print(f"Unexpected error: {e}")` in optimum-neuron's demo `main`, whose only call is the
statement `main()`). The harm of the class is a value that flows on and cannot be told from the
expected failure's; here no value flows (every call of the function in the file is a statement
of its own, and the name is read nowhere else) and the report tells the errors apart. Left: the
caller outside the file that reads the value (a `sys.exit(main())` entry point exits 0) and the
width. General because it reads what the fallback value is used for, not which function it is.
Near misses, still `widens-fallback`: a call whose value is bound, returned or passed on
(`sys.exit(main())`), the name handed somewhere as a callback, a method, a handler that prints
only a fixed text.

`P2` `broad-except.element-left-unconverted` (round 27, `unconverted_element`, tuned on round 27's
held-out part A: NeMo-Run's stored job records): the try stands directly in a `for` loop's body and
only replaces a part of the loop's element in place from a call on that same part (`app["executor"]
= build(deserialize(app["executor"]))`), and the handler only logs, passes or goes on with the next
element. The element the conversion failed for stays in the collection with the raw value, next to
elements holding the converted one, and flows on as data: the code that reads the collection
later (here `executor.status(...)` on a string) fails far from the cause or takes the raw value for
a converted one. A report does not change that, so this is read before the reported-fallback
exemptions, like the class above. General: it reads what the handler leaves in the collection,
whatever the conversion is. Near misses: a handler that removes the element or binds the part to a
marker (`None`), a try that builds a new collection (`out.append(convert(x))`: the failed element is
then missing, not raw), a replacement whose value does not read the part it replaces.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.exception_index import caught_names
from reviewbot.rules.common import is_logging_call, named_none_test, same_node, top_level_function
from reviewbot.rules.other_path import report_names_caught

_BROAD = frozenset(["Exception", "BaseException"])


def _fallback(handler: ast.ExceptHandler) -> list[ast.stmt]:
    """The handler's statements but its logging, `print` and warning calls."""
    return [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]


def widened_handler(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The `except` clause of an earlier, narrower handler of `node` whose fallback the catch-all
    `handler` repeats statement for statement (see the module docstring); None when there is none."""
    own = _fallback(handler)
    if not own or any(
        isinstance(node, ast.Name) and node.id == handler.name for stmt in own for node in pysource.walk(stmt)
    ):
        return None
    for earlier in node.handlers:
        if earlier is handler:
            return None
        names = caught_names(earlier)
        if earlier.type is None or names is None or _BROAD & set(names):
            continue
        if same_node(_fallback(earlier), own):
            return f"except {ast.unparse(earlier.type)}"
    return None


def discarded_return(tree: ast.Module, handler: ast.ExceptHandler) -> str | None:
    """The module-level function whose constant the widened `handler` returns, when the handler
    reports the caught exception itself and every use of the function's name in the file is a call
    standing as a statement of its own, at least one (see the module docstring); None otherwise."""
    own = _fallback(handler)
    if not (
        len(own) == 1
        and isinstance(own[0], ast.Return)
        and (own[0].value is None or isinstance(own[0].value, ast.Constant))
        and report_names_caught(handler)
    ):
        return None
    functions = [
        stmt
        for stmt in tree.body
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        and stmt.lineno < handler.lineno <= (stmt.end_lineno or stmt.lineno)
    ]
    if len(functions) != 1 or top_level_function(tree, functions[0].name) is not functions[0]:
        return None
    name = functions[0].name
    alone = {
        id(stmt.value.func)
        for stmt in pysource.nodes(tree)
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
    }
    uses = [sub for sub in pysource.nodes(tree) if isinstance(sub, ast.Name) and sub.id == name]
    return name if uses and all(id(sub) in alone for sub in uses) else None


def _constant_container(value: ast.expr | None) -> bool:
    """A list, tuple, set or dict display of constants only, or a list comprehension of a constant."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(isinstance(elt, ast.Constant) for elt in value.elts)
    if isinstance(value, ast.Dict):
        return all(isinstance(part, ast.Constant) for part in [*value.keys, *value.values] if part is not None)
    return isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Constant)


_ADDS = frozenset(["append", "add", "extend", "insert", "appendleft"])


def _added(stmt: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """(the collection's dump, the values) for a call `<collection>.append(...)` (or another adding
    method of `_ADDS`) standing as a statement."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    func = stmt.value.func
    if not (isinstance(func, ast.Attribute) and func.attr in _ADDS):
        return None
    return ast.dump(func.value), list(stmt.value.args)


def _adds_constant_in_place(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler adds only constants (or constant containers) to a
    collection that a statement of the try body adds a computed value to."""
    computed = set()
    for stmt in node.body:
        for sub in pysource.walk(stmt):
            added = _added(sub)
            if added is not None and not all(
                isinstance(value, ast.Constant) or _constant_container(value) for value in added[1]
            ):
                computed.add(added[0])
    for stmt in handler.body:
        added = _added(stmt)
        if (
            added is not None
            and added[0] in computed
            and added[1]
            and all(isinstance(value, ast.Constant) or _constant_container(value) for value in added[1])
        ):
            return True
    return False


def constant_data(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler binds or returns a container of constants, or adds a
    constant to the collection the try fills (see the module docstring)."""
    return any(
        isinstance(stmt, (ast.Assign, ast.Return)) and _constant_container(stmt.value) for stmt in handler.body
    ) or _adds_constant_in_place(node, handler)


def _none_marks(handler: ast.ExceptHandler) -> set[str] | None:
    """The names the handler's constant containers bind when each is a tuple of `None`s unpacked
    into plain names (`a, b = None, None`); None when one is anything else (or there is none)."""
    marked: set[str] = set()
    for stmt in handler.body:
        if not (isinstance(stmt, (ast.Assign, ast.Return)) and _constant_container(stmt.value)):
            continue
        if not isinstance(stmt, ast.Assign) or not isinstance(stmt.value, ast.Tuple):
            return None
        if not all(isinstance(elt, ast.Constant) and elt.value is None for elt in stmt.value.elts):
            return None
        for target in stmt.targets:
            if not (isinstance(target, ast.Tuple) and all(isinstance(elt, ast.Name) for elt in target.elts)):
                return None
            marked.update(elt.id for elt in target.elts if isinstance(elt, ast.Name))
    return marked or None


def _next_statement(tree: ast.AST, stmt: ast.stmt) -> ast.stmt | None:
    """The statement run after `stmt` when it completes: the next one of its block, or, when it ends
    the body or `else:` of an `if`, the one after that `if` (repeated outwards); None at the end of a
    function, loop or other block."""
    while True:
        holder = _holding(tree, stmt)
        if holder is None:
            return None
        parent, block, index = holder
        if index + 1 < len(block):
            return block[index + 1]
        if not isinstance(parent, ast.If):
            return None
        stmt = parent


def _holding(tree: ast.AST, stmt: ast.stmt) -> tuple[ast.AST, list[ast.stmt], int] | None:
    """(the node, its statement list that holds `stmt` directly, the index there)."""
    for node in [tree, *pysource.statements(tree)]:
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list):
                for index, item in enumerate(block):
                    if item is stmt:
                        return node, block, index
        for inner in getattr(node, "handlers", []):
            for index, item in enumerate(inner.body):
                if item is stmt:
                    return node, inner.body, index
    return None


def _tests_unset(test: ast.expr, names: set[str]) -> bool:
    """`name is None` or `not name` for one of `names`."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return isinstance(test.operand, ast.Name) and test.operand.id in names
    return named_none_test(test, names) is ast.Is


def replaced_marker(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler's constants are `None` markers that the next statement tests and replaces or
    turns into an error (see the module docstring)."""
    marked = _none_marks(handler)
    if marked is None:
        return False
    after = _next_statement(tree, node)
    if not (isinstance(after, ast.If) and not after.orelse and _tests_unset(after.test, marked)):
        return False
    rebound: set[str] = set()
    for stmt in after.body:
        if isinstance(stmt, ast.Assign):
            rebound.update(
                sub.id for target in stmt.targets for sub in pysource.walk(target) if isinstance(sub, ast.Name)
            )
        elif isinstance(stmt, ast.If):
            if stmt.orelse or not isinstance(stmt.body[-1], ast.Raise):
                return False
        elif not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)):
            return False
    return marked <= rebound


def unconverted_element(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The part (as source) of a loop's element that the try converts in place and the handler
    leaves raw (see the module docstring); None otherwise."""
    if len(node.body) != 1 or not isinstance(node.body[0], ast.Assign) or len(node.body[0].targets) != 1:
        return None
    target, value = node.body[0].targets[0], node.body[0].value
    if not isinstance(target, (ast.Subscript, ast.Attribute)) or not isinstance(value, ast.Call):
        return None
    root: ast.expr = target
    while isinstance(root, (ast.Subscript, ast.Attribute)):
        root = root.value
    loop = next(
        (
            sub
            for sub in pysource.walk(tree)
            if isinstance(sub, (ast.For, ast.AsyncFor)) and any(stmt is node for stmt in sub.body)
        ),
        None,
    )
    if loop is None or not isinstance(root, ast.Name) or not isinstance(loop.target, ast.Name):
        return None
    if root.id != loop.target.id:
        return None
    part = ast.unparse(target)
    if not any(
        isinstance(sub, (ast.Subscript, ast.Attribute)) and ast.unparse(sub) == part for sub in pysource.walk(value)
    ):
        return None
    for stmt in handler.body:
        if isinstance(stmt, (ast.Pass, ast.Continue)):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and is_logging_call(stmt.value):
            continue
        return None
    return part
