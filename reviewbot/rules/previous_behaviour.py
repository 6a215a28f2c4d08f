"""A catch-all whose fallback is what the base revision did, read by `broad_except` before it reports
a handler (round 16 of the precision benchmark): the change put new code in front of old code, and
when the new code fails the program runs the old code, as before the change. The worst case of the
swallow is the previous behaviour, not a substitute the caller takes for a result.

Read from the handler's file at the base revision (`FileContext.changed_trees("base")`, the same
path); a file the change adds has no base version, so nothing here applies to it. Code counts as the
base's when it stands there as it is (`ast.dump`, positions aside), wherever it stood: moved code is
old code. A bare `except:` or `except BaseException:` is never one of these (Ctrl+C went through
before). In both shapes no statement of the try body that calls anything stands in the base version
(`_new`: the try is the new code, not the old one wrapped):

- *a flag whose off branch is the base's code* (`flag_selects_base`): the try ends by binding a name
  to `True` or `False`; the handler binds the same name to the other one (logging allowed); every
  read of the name in the try's scope (its function, or the module) is the whole test of an `if`
  (`if flag:`, `if not flag:`), and the branch the handler's value selects is empty or calls only
  what the base version calls (each call `ast.dump`-equal to one there:
  `serialize_state_dict(state_dict)`). An import probe choosing a new format falls back to the old
  one (xtuner's `FlattenedTensorBucket` probes). Near misses: the flag also passed to a call, an off
  branch that calls something new.
- *the base's code in the handler* (`base_code_in_handler`): each statement of the handler but log
  calls and `pass` stands in the base version as it is, one at least with a call: the change put a
  new way in front of the old one and kept the old one as the fallback (xformers' address exchange:
  a private store API, then the `all_gather_object` the base used). Near miss: one handler statement
  changed. Since round 24 a statement reading `self` counts as the base's only when the class
  whose method holds the try is defined in the base version (`_new_class_self`): in a class the
  change adds, `self._default(*args)` is a new object's call, not the old route (optimum-intel's
  generation wrapper, a problem the class hid).

- *a new gate in front of the base's code* (`gate_before_base`, round 20): the try stands directly
  in a function's body and only decides whether to leave it early (imports, assignments to plain
  names, `if <test>: return` with no value), the handler only logs or passes and falls through, and
  every statement after the try in that body stands in the base version as it is (at least one;
  a module constant read by name counts as the constant it names, `_module_constants`): a
  failing gate runs the function as the base revision ran it (TVM's Metal tag registration, which a
  new LLVM probe may skip). Near misses: a statement after the try changed, a handler that returns,
  a try that also does work (a call standing alone), a name the try binds read after it.

- *a key left unset whose default is the base's code* (`unset_key_selects_base`, round 24): the try
  ends by putting a new value under a constant key of a mapping (`kwargs["generation_config"] =
  GenerationConfig.from_pretrained(...)`), its other statements only bind plain names, the handler
  only logs or passes, and every read of that key in the changed files at head is `.get("key",
  default)` (or `.pop`) whose default holds calls, each `ast.dump`-equal to a call of the changed
  files' base versions (`GenerationConfig.from_model_config(config)`, what the base's constructor
  computed): a failed load leaves the key unset and the reader computes what the base did
  (optimum-intel's generation-config loads). Near misses: a read `d["key"]` or `"key" in d`, a
  default the base did not compute, a handler that binds a substitute.

Round 21 reads two more things from the base (tests in `test_engine_exception_round21.py`):

- *the base's code under a bare handler* (`base_code_catching_exit`): the shape of
  `base_code_in_handler` with a bare `except:` or `except BaseException:`. The fallback is the old
  behaviour, so it is no swallow; Ctrl+C or `sys.exit()` during the new route also takes the old
  one, which the base let through: `broad_except` reports it as P3
  `broad-except.base-fallback-catches-exit` (ktransformers' weight transpose from before the change,
  behind a new `view`). Near miss: a bare handler whose fallback changed stays the swallow.
- *the same fallback at the base* (`fallback_at_base`): the base held the same try body, in a
  function of the same name, under a catch-all at least as wide whose fallback (log calls aside) is
  the head handler's. The data fallbacks (`broad-except.widens-fallback`, `constant-data`) claim
  the catch-all makes every error of the try that value; at the base every error already got it,
  and the change split a narrow case off or changed the report (axolotl's prompt-strategy loader,
  now logging at error level): nothing. Near misses: another value at the base, a try that changed
  (which `reviewbot.rules.guarded_code` reads for an unchanged handler).

Each of the round-16 and round-20 shapes gives nothing (the tests, with their near misses, are in
`tests/reviewbot/engine/test_engine_exception_round16.py`, the gate's in
`test_engine_exception_round20.py`). Left out, each on purpose:

- a new step skipped (the try wholly new, the handler only logging and returning): "as before the
  change" holds, but the step's work is lost (a compile or a save skipped with a warning), which the
  rules report (`handler_reach.nothing_substituted`); by its shape xtuner's NUMA binding, a
  performance hint, is such a step, and its finding stays (tried in round 16 with guards against a
  try that raises on purpose or returns a result: it still took the test corpus's compile step and
  quiet loop turn, which the project's rules call swallows);
- a fallback that is the base's *error* path (the try wraps the base's statement and the handler
  computes an alternative, ms-swift's raw `config.json` read): before the change that failure was
  raised, so the handler is new behaviour;
- a limit no diff shows: where the change exists to fix the base's behaviour, falling back to it
  brings the bug back (trl's OpenReward tools, a tuning case whose problems stay missed).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.exception_index import caught_names
from reviewbot.rules.common import FileContext, innermost_function, is_logging_call, same_node

_CATCH_ALL = frozenset(["Exception", "BaseException"])
_BLOCKS = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.If,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.With,
    ast.AsyncWith,
    ast.Try,
    ast.TryStar,
    ast.Match,
)


def _simple_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements of `body` at any depth that hold no statement list (not a def, `if`, loop, ...)."""
    for stmt in body:
        if not isinstance(stmt, _BLOCKS):
            yield stmt
        for inner in pysource.statements(stmt):
            if not isinstance(inner, _BLOCKS):
                yield inner


def _calls(node: ast.AST) -> bool:
    return any(isinstance(sub, ast.Call) for sub in pysource.walk(node))


@pysource.PerTree
def _base_statements(tree: ast.AST) -> frozenset[str]:
    """The dumps of a base tree's simple statements (those that hold no statement list), read once per
    tree."""
    return frozenset(ast.dump(stmt) for stmt in pysource.statements(tree) if not isinstance(stmt, _BLOCKS))


@pysource.PerTree
def _base_calls(tree: ast.AST) -> frozenset[str]:
    """The dumps of a base tree's calls, read once per tree."""
    return frozenset(ast.dump(node) for node in pysource.nodes(tree) if isinstance(node, ast.Call))


@pysource.PerTree
def _base_blocks(tree: ast.AST) -> dict[type, list[ast.stmt]]:
    """A base tree's compound statements but defs and classes (a handler's fallback is no
    definition), by class, read once per tree; compared with `same_node`, which gives up at the
    first difference, not dumped (a compound statement's dump holds its whole body)."""
    found: dict[type, list[ast.stmt]] = {}
    for stmt in pysource.statements(tree):
        if isinstance(stmt, _BLOCKS) and not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.setdefault(type(stmt), []).append(stmt)
    return found


def _base(ctx: FileContext) -> ast.Module | None:
    """The file's base version; None for a base-revision context or a file the change adds."""
    if ctx.revision != "head":
        return None
    return next((tree for path, tree in ctx.changed_trees("base") if path == ctx.path), None)


def _new(body: list[ast.stmt], base_statements: frozenset[str]) -> bool:
    """No statement of `body` that calls anything stands in the base version (`base_statements`:
    `_base_statements` of it)."""
    return not any(_calls(stmt) and ast.dump(stmt) in base_statements for stmt in _simple_statements(body))


def _catches_exit(handler: ast.ExceptHandler) -> bool:
    """A bare `except:` or one naming `BaseException`: it also takes Ctrl+C and `SystemExit`, which the
    base revision let through."""
    names = caught_names(handler)
    return names is None or "BaseException" in names


def _flag_binding(stmt: ast.stmt) -> tuple[str, bool] | None:
    """(name, value) for `name = True` / `name = False`."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    value = stmt.value
    if not (isinstance(value, ast.Constant) and isinstance(value.value, bool)):
        return None
    return stmt.targets[0].id, value.value


def _tested_flag(test: ast.expr, name: str) -> bool | None:
    """True for `if name:`, False for `if not name:`, None for any other test."""
    if isinstance(test, ast.Name) and test.id == name:
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        inner = test.operand
        if isinstance(inner, ast.Name) and inner.id == name:
            return False
    return None


def flag_selects_base(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try sets a flag that the handler sets the other way, and the branches that value selects run
    only what the base version ran (see the module docstring)."""
    base = _base(ctx)
    if base is None or node.orelse or node.finalbody or not node.body or _catches_exit(handler):
        return False
    statements, calls = _base_statements(base), _base_calls(base)
    tried = _flag_binding(node.body[-1])
    bindings = [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
    fallback = _flag_binding(bindings[0]) if len(bindings) == 1 else None
    if tried is None or fallback is None or tried[0] != fallback[0] or tried[1] == fallback[1]:
        return False
    if not _new(node.body, statements):
        return False
    name, value = fallback
    function = innermost_function(ctx.tree, node)
    scope: ast.AST = ctx.tree if function is None else function
    reads = 0
    for stmt in pysource.statements(scope):
        if not isinstance(stmt, ast.If):
            continue
        truthy = _tested_flag(stmt.test, name)
        if truthy is None:
            continue
        reads += 1
        chosen = stmt.body if truthy == value else stmt.orelse
        if any(
            ast.dump(sub) not in calls for each in chosen for sub in pysource.walk(each) if isinstance(sub, ast.Call)
        ):
            return False
    loads = sum(
        1
        for sub in pysource.walk(scope)
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load)
    )
    return reads > 0 and loads == reads


def base_code_in_handler(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try runs only code the change added, and the handler runs the base's code: each of its
    statements but log calls and `pass` stands in the base version as it is, and one at least calls
    something (see the module docstring)."""
    return not _catches_exit(handler) and _base_code_kept(ctx, node, handler)


def base_code_catching_exit(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """`base_code_in_handler` but for a bare `except:` or `except BaseException:` (round 21): the
    fallback is the base's code, and what the change adds besides the new route is that Ctrl+C or
    `sys.exit()` during it also takes the old route."""
    return _catches_exit(handler) and _base_code_kept(ctx, node, handler)


def _base_code_kept(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try's body and `else:` hold no call statement of the base version, and each statement of
    the handler but log calls and `pass` stands there as it is, one at least with a call."""
    base = _base(ctx)
    if base is None or node.finalbody:
        return False
    if not _new([*node.body, *node.orelse], _base_statements(base)):
        return False
    kept = [
        stmt
        for stmt in handler.body
        if not isinstance(stmt, ast.Pass) and not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))
    ]
    if not any(_calls(stmt) for stmt in kept):
        return False
    if _new_class_self(ctx.tree, base, node, kept):
        return False
    simple, blocks = _base_statements(base), _base_blocks(base)
    return all(
        any(same_node(stmt, other) for other in blocks.get(type(stmt), []))
        if isinstance(stmt, _BLOCKS)
        else ast.dump(stmt) in simple
        for stmt in kept
    )


def _new_class_self(tree: ast.Module, base: ast.Module, node: ast.stmt, kept: list[ast.stmt]) -> bool:
    """A statement of `kept` reads `self` while the class whose method holds `node` is not defined
    in the base version (by name, round 24): `self` is then an object the change introduced, so the
    statement, though its text stands in the base (in another class), is no code the base ran here
    (optimum-intel's new generation wrapper, whose catch-all reruns `self._default(...)` as an older
    wrapper class does)."""
    if not any(isinstance(sub, ast.Name) and sub.id == "self" for stmt in kept for sub in pysource.walk(stmt)):
        return False
    owner = None
    for candidate in pysource.nodes(tree):
        if (
            isinstance(candidate, ast.ClassDef)
            and candidate.lineno < node.lineno <= (candidate.end_lineno or candidate.lineno)
            and (owner is None or candidate.lineno > owner.lineno)
        ):
            owner = candidate
    if owner is None:
        return False
    return not any(isinstance(other, ast.ClassDef) and other.name == owner.name for other in pysource.nodes(base))


def fallback_at_base(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The base version holds the same try body (`same_node`) in a function of the same name (or at
    module level, as the try stands) under a catch-all at least as wide as `handler` whose fallback,
    its statements but log calls, is `handler`'s (round 21): at the base every error of the try
    already took this fallback, and the change only split a narrower case off or added a report.
    Read for the data fallbacks (`reviewbot.rules.data_fallback`), whose claim is that the change
    makes every error of the try this value: `broad_except` then reports nothing on the handler."""
    base = _base(ctx)
    if base is None:
        return False
    function = innermost_function(ctx.tree, node)
    where = None if function is None else function.name
    own = [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
    blocks = _base_blocks(base)
    for other in [*blocks.get(ast.Try, []), *blocks.get(ast.TryStar, [])]:
        assert isinstance(other, (ast.Try, ast.TryStar))
        if not same_node(other.body, node.body):
            continue
        holder = innermost_function(base, other)
        if (None if holder is None else holder.name) != where:
            continue
        for earlier in other.handlers:
            names = caught_names(earlier)
            wide = earlier.type is None or names is None or bool(_CATCH_ALL & set(names))
            kept = [stmt for stmt in earlier.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
            if wide and (_catches_exit(earlier) or not _catches_exit(handler)) and same_node(kept, own):
                return True
    return False


def _key_store(stmt: ast.stmt) -> str | None:
    """The key of `name["key"] = value`."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Subscript)):
        return None
    target = stmt.targets[0]
    key = target.slice
    if isinstance(target.value, ast.Name) and isinstance(key, ast.Constant) and isinstance(key.value, str):
        return key.value
    return None


def _key_reads(trees: tuple[tuple[str, ast.Module], ...], key: str) -> list[ast.expr] | None:
    """The defaults of every read of `key` in `trees`, each a `.get(key, default)` or `.pop(key,
    default)`; None when some other read of it (`d[key]`, `key in d`) stands there."""
    defaults: list[ast.expr] = []
    for _, tree in trees:
        for sub in pysource.nodes(tree):
            if isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load):
                if isinstance(sub.slice, ast.Constant) and sub.slice.value == key:
                    return None
            elif isinstance(sub, ast.Compare):
                if isinstance(sub.left, ast.Constant) and sub.left.value == key:
                    return None
            elif (
                isinstance(sub, ast.Call)
                and isinstance(sub.func, ast.Attribute)
                and sub.func.attr in ("get", "pop")
                and sub.args
                and isinstance(sub.args[0], ast.Constant)
                and sub.args[0].value == key
            ):
                if len(sub.args) != 2 or sub.keywords:
                    return None
                defaults.append(sub.args[1])
    return defaults


def unset_key_selects_base(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try ends by putting a new value under a constant key of a mapping (`kwargs["k"] = value`),
    the handler only logs or passes, and every read of that key in the changed files is a
    `.get("k", default)` (or `.pop`) whose default calls only what the base version calls (round
    24, see the module docstring)."""
    base = _base(ctx)
    if base is None or node.orelse or node.finalbody or _catches_exit(handler) or not node.body:
        return False
    if not all(
        isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))
        for stmt in handler.body
    ):
        return False
    key = _key_store(node.body[-1])
    if key is None or not all(_binds_names(stmt) for stmt in node.body[:-1]):
        return False
    if not _new(node.body, _base_statements(base)):
        return False
    defaults = _key_reads(ctx.changed_trees("head"), key)
    if not defaults:
        return False
    base_calls = frozenset().union(*(_base_calls(tree) for _, tree in ctx.changed_trees("base")))
    for default in defaults:
        calls = [ast.dump(sub) for sub in pysource.walk(default) if isinstance(sub, ast.Call)]
        if not calls or not all(call in base_calls for call in calls):
            return False
    return True


def _leaves_early(stmt: ast.stmt) -> bool:
    """`if <test>: return` (no value, no `else`): the statement can only end the function early."""
    return (
        isinstance(stmt, ast.If)
        and not stmt.orelse
        and len(stmt.body) == 1
        and isinstance(stmt.body[0], ast.Return)
        and (
            stmt.body[0].value is None
            or (isinstance(stmt.body[0].value, ast.Constant) and stmt.body[0].value.value is None)
        )
    )


def _binds_names(stmt: ast.stmt) -> bool:
    """An assignment to plain names only."""
    return isinstance(stmt, ast.Assign) and all(isinstance(target, ast.Name) for target in stmt.targets)


def gate_before_base(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try is a new gate that can only end its function early, the handler falls through, and the
    rest of the function is the base's code (see the module docstring)."""
    base = _base(ctx)
    if base is None or node.orelse or node.finalbody or _catches_exit(handler):
        return False
    function = innermost_function(ctx.tree, node)
    if function is None:
        return False
    index = next((i for i, stmt in enumerate(function.body) if stmt is node), None)
    rest = function.body[index + 1 :] if index is not None else []
    if not rest:
        return False
    if not all(
        isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))
        for stmt in handler.body
    ):
        return False
    body = node.body
    if not any(_leaves_early(stmt) for stmt in body) or not all(
        isinstance(stmt, (ast.Import, ast.ImportFrom)) or _binds_names(stmt) or _leaves_early(stmt) for stmt in body
    ):
        return False
    simple = _base_statements(base)
    if not _new(body, simple):
        return False
    bound = {
        sub.id
        for stmt in body
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store)
    } | {
        (alias.asname or alias.name).split(".")[0]
        for stmt in body
        if isinstance(stmt, (ast.Import, ast.ImportFrom))
        for alias in stmt.names
    }
    if any(isinstance(sub, ast.Name) and sub.id in bound for stmt in rest for sub in pysource.walk(stmt)):
        return False
    blocks = _base_blocks(base)
    constants = _module_constants(ctx.tree)

    def in_base(stmt: ast.stmt) -> bool:
        if isinstance(stmt, _BLOCKS):
            return any(same_node(stmt, other) for other in blocks.get(type(stmt), []))
        return ast.dump(stmt) in simple

    return all(in_base(stmt) or in_base(_ConstantsInlined(constants).visit(copy.deepcopy(stmt))) for stmt in rest)


def _module_constants(tree: ast.Module) -> dict[str, ast.Constant]:
    """Names the module binds once, at its top level, to a constant (`_HOST = "arm64-apple-macos"`)
    and nowhere else: a read of one is that constant, so code that names it reads as code that wrote
    it out."""
    bindings: dict[str, int] = {}
    for sub in pysource.walk(tree):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bindings[sub.id] = bindings.get(sub.id, 0) + 1
    found: dict[str, ast.Constant] = {}
    for stmt in tree.body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and bindings.get(stmt.targets[0].id) == 1
        ):
            found[stmt.targets[0].id] = stmt.value
    return found


class _ConstantsInlined(ast.NodeTransformer):
    """Replaces each read of a name of `constants` (`_module_constants`) with its constant."""

    def __init__(self, constants: dict[str, ast.Constant]) -> None:
        self._constants = constants

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load) and node.id in self._constants:
            return ast.Constant(value=self._constants[node.id].value)
        return node
