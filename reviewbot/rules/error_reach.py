"""Where a caught error still goes after a handler that does not re-raise it at once, read by
`broad_except` before it reports a handler (round 13 of the precision benchmark: the evidence of harm
of a swallow is an error that reaches no one; these handlers pass it on by another way).

- *a deferred re-raise* (`deferred_reraise`): the handler only keeps the caught exception in a name
  (`error = e`, logging allowed), and a statement after the try in the same block raises that name,
  directly or under `if error is not None:` (or `if error:`), with nothing in between that leaves the
  block or rebinds the name (llm-foundry's data preparation: the error waits until every rank has
  passed the barrier, then is raised). Near misses: the kept error only logged later, raised under a
  condition that tests something else (`if error is not None and rank == 0:`), a `return` before
  the raise.
- *a retry whose exhaustion fails* (`retry_fails_when_exhausted`): the try stands directly in a
  bounded loop (a `for`, or a `while` whose test holds a comparison), a success leaves it (the try
  body ends with `break`/`return`, or sets a flag the `while` test reads), the handler reports the
  caught exception and otherwise only cleans up, waits or moves on, and the exhaustion fails: the
  loop's `else:`, or for a flag the `if` reading it right after the loop, reaches a `raise` or an
  exit with a failing status (`exit(-1)`, `sys.exit(1)`). Every failure is shown and the last ends
  the run (fairscale's MNIST download). It widens the bounded retry that re-raises from its handler
  and the alternatives tried in turn whose exhaustion raises. Near misses: an unbounded `while
  True`, an exhaustion that only logs, a handler that does not name the error.
- *the same call under another name* (`same_call_other_name`): a try of one statement calling
  `f(args)` whose handler is one statement calling the same `f` with the same arguments except
  string constants that name what is looked up (another weight name, `f"{prefix}.embedding"` for
  `f"{prefix}.embeddings"`), binding the result the same way: alternatives tried in turn, unrolled;
  the handler's call is not guarded, so whatever made the first fail other than the missing name
  (an OOM, a bad input) fails again there and propagates, and nothing is substituted that the
  callee would not load (TGI's Mamba weight names). Near misses: a device or dtype among the
  changed constants (`"cuda"` to `"cpu"`: the OOM fallback the rule exists for), an argument that
  is not a constant (`x` to `x.cpu()`), another function.
- *alternatives tried in turn, unrolled* (`unrolled_alternatives`, round 16): the handler only logs
  and binds one name to `None`, the statement right after the try tests that name (`if tokenizer is
  not None:`), and the function, whose body holds the try directly, ends in `raise` and returns no
  `None` after the try: the next source answers (a model config's pad id) or the function raises,
  as in the loop form `broad_except` reads (`_alternatives_tries`); nothing is handed back that no
  alternative gave (torchrl's reward model). Near misses: a function that ends in a `return`
  (ms-swift's vLLM overrides: a `None` config drops them silently), a `return None` after the try.
- *an unset attribute every caller checks* (`checked_attribute`, round 23): a method whose body is
  the try, the try's first statement binding `self.<attribute>` to a call (its other statements
  call only logging, a few builtins and methods of loop variables, so no later failure leaves the
  attribute set), the handler only logging; every call of the method in the file is a statement
  followed directly by a check of the attribute: an `assert` reading it, or an `if` reading it whose
  body ends in such an `assert` or a `raise`. The failure reaches each caller as the attribute left
  unset, and each caller makes it good (NeMo's TensorRT plan load: `if self.engine is None:` build
  the engine, load again, `assert self.engine is not None`) or fails loudly. Near misses: a call
  with no check after it, a check whose branch ends otherwise (a `return`), a handler that binds a
  substitute, a try that calls the repository's code after the binding.

Each gives nothing, for `broad-except` and `runtime-error-fallback` alike (the third only for `except
RuntimeError` until round 16, when a torchrl version lookup under the nightly distribution's name
showed the catch-all's case is the same); the tests, with their near misses, are in
`tests/reviewbot/engine/test_engine_exception_round13.py`, `test_engine_exception_round16.py` and
`test_engine_round23.py`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.rules.common import (
    callee,
    innermost_function,
    is_logging_call,
    named_none_test,
    paired_calls,
    statement_blocks,
)

# calls a retry's handler may make besides logging: clean up what the failed attempt left, or wait
_CLEANUPS = frozenset(["rmtree", "remove", "unlink", "rmdir", "removedirs", "sleep"])
# calls that end the process with the status they are given
_EXITS = frozenset(["exit", "_exit", "quit"])

# builtins that build or inspect values and run no code of a library's
_BUILTIN_NAMES = frozenset(
    ["len", "isinstance", "str", "int", "float", "bool", "dict", "list", "tuple", "set", "range", "enumerate", "zip"]
)
# a string constant that names a device (a move to another device is the OOM fallback itself)
_DEVICE = re.compile(r"^\W*(cpu|cuda|meta|mps|xpu|npu|hpu|xla|tpu|gpu)(:\d+)?\W*$", re.IGNORECASE)
# keywords whose change is a change of device or precision, not of a name
_DEVICE_KEYWORDS = frozenset(["device", "dtype", "map_location", "device_map", "torch_dtype"])


def _own_nodes(node: ast.AST) -> Iterator[ast.AST]:
    """`node` and the nodes below it, not entering nested functions, lambdas or classes."""
    pending: list[ast.AST] = [node]
    while pending:
        current = pending.pop()
        yield current
        if not isinstance(current, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(pysource.children(current))


def _span(item: ast.AST) -> tuple[int, int]:
    """The first and last line of a statement, a handler or a `match` case (which has no position of
    its own: its pattern's and its body's)."""
    if isinstance(item, ast.match_case):
        return item.pattern.lineno, _span(item.body[-1])[1]
    start = getattr(item, "lineno", 0)
    return start, getattr(item, "end_lineno", None) or start


def block_holding(tree: ast.AST, stmt: ast.stmt) -> tuple[ast.AST, list[ast.stmt], int] | None:
    """(the node, the statement list of it that holds `stmt` directly, `stmt`'s index there), found by
    descending from `tree` into the statement whose lines hold `stmt`'s."""
    parent = tree
    while True:
        inner = None
        for field in pysource.STATEMENT_LISTS:
            block = getattr(parent, field, None)
            if not isinstance(block, list):
                continue
            for index, item in enumerate(block):
                if item is stmt:
                    return parent, block, index
                start, end = _span(item)
                if inner is None and start <= stmt.lineno <= end:
                    inner = item
        if inner is None:
            return None
        parent = inner


def _reads(expr: ast.AST, names: set[str]) -> bool:
    return any(isinstance(sub, ast.Name) and sub.id in names for sub in pysource.walk(expr))


def _logs(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)


def _kept_names(handler: ast.ExceptHandler) -> set[str]:
    """The plain names the handler binds the caught exception to, when it does nothing else but log
    or pass; empty otherwise."""
    kept: set[str] = set()
    for stmt in handler.body:
        if (
            isinstance(stmt, ast.Assign)
            and isinstance(stmt.value, ast.Name)
            and stmt.value.id == handler.name
            and all(isinstance(target, ast.Name) for target in stmt.targets)
        ):
            kept.update(target.id for target in stmt.targets if isinstance(target, ast.Name))
        elif not (isinstance(stmt, ast.Pass) or _logs(stmt)):
            return set()
    return kept


def _raises_kept(stmt: ast.stmt, kept: set[str]) -> bool:
    """`raise k`, or `if k:` / `if k is not None:` whose body raises `k` directly."""

    def raises(item: ast.stmt) -> bool:
        return isinstance(item, ast.Raise) and isinstance(item.exc, ast.Name) and item.exc.id in kept

    if raises(stmt):
        return True
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    tests_kept = (isinstance(test, ast.Name) and test.id in kept) or named_none_test(test, kept) is ast.IsNot
    return tests_kept and any(raises(item) for item in stmt.body)


def _leaves_or_rebinds(stmt: ast.stmt, kept: set[str]) -> bool:
    """`stmt` may leave the block (`return`, `break`, `continue`, `raise`) or rebinds a kept name."""
    for sub in _own_nodes(stmt):
        if isinstance(sub, (ast.Return, ast.Break, ast.Continue, ast.Raise)):
            return True
        if isinstance(sub, ast.Name) and sub.id in kept and isinstance(sub.ctx, (ast.Store, ast.Del)):
            return True
    return False


def deferred_reraise(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler keeps the caught exception in a name that a later statement of the try's block
    raises (see the module docstring); `tree`: the module holding `node`."""
    if handler.name is None:
        return False
    kept = _kept_names(handler)
    if not kept:
        return False
    found = block_holding(tree, node)
    if found is None:
        return False
    _, block, index = found
    for stmt in block[index + 1 :]:
        if _raises_kept(stmt, kept):
            return True
        if _leaves_or_rebinds(stmt, kept):
            return False
    return False


def _fails(block: list[ast.stmt]) -> bool:
    """`block`, past logging and assignments, reaches a `raise` or an exit with a failing status."""
    for stmt in block:
        if isinstance(stmt, ast.Raise):
            return True
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and callee(stmt.value) in _EXITS:
            args = stmt.value.args
            return len(args) == 1 and not (isinstance(args[0], ast.Constant) and args[0].value in (0, None, False))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)) or _logs(stmt):
            continue
        return False
    return False


def _success_flag(node: ast.Try | ast.TryStar, loop: ast.While) -> str | None:
    """The name the try body's last statement sets to a constant, when the `while` test reads it."""
    last = node.body[-1]
    if not (
        isinstance(last, ast.Assign)
        and len(last.targets) == 1
        and isinstance(last.targets[0], ast.Name)
        and isinstance(last.value, ast.Constant)
    ):
        return None
    flag = last.targets[0].id
    return flag if _reads(loop.test, {flag}) else None


def _retry_handler(handler: ast.ExceptHandler, flag: str | None) -> bool:
    """The handler logs the caught exception, and otherwise only logs, passes, continues, binds
    plain names other than `flag`, cleans up or waits; it neither returns nor breaks."""
    name = handler.name
    if name is None:
        return False
    reported = False
    for stmt in handler.body:
        if _logs(stmt):
            assert isinstance(stmt, ast.Expr)
            reported = reported or _reads(stmt.value, {name})
        elif isinstance(stmt, ast.Assign):
            targets = [target.id if isinstance(target, ast.Name) else None for target in stmt.targets]
            if None in targets or flag in targets:
                return False
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            if callee(stmt.value) not in _CLEANUPS:
                return False
        elif not isinstance(stmt, (ast.Pass, ast.Continue)):
            return False
    return reported


def retry_fails_when_exhausted(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try is a retry of a bounded loop whose exhaustion fails (see the module docstring)."""
    if not _retry_handler(handler, None):
        return False
    found = block_holding(tree, node)
    if found is None:
        return False
    loop = found[0]
    if not isinstance(loop, (ast.For, ast.AsyncFor, ast.While)) or found[1] is not loop.body:
        return False
    flag = _success_flag(node, loop) if isinstance(loop, ast.While) else None
    leaves = any(block and isinstance(block[-1], (ast.Break, ast.Return)) for block in (node.body, node.orelse))
    if not (leaves or flag) or not _retry_handler(handler, flag):
        return False
    if isinstance(loop, ast.While) and not any(isinstance(sub, ast.Compare) for sub in pysource.walk(loop.test)):
        return False
    if loop.orelse:
        return _fails(loop.orelse)
    if flag is None:
        return False
    outer = block_holding(tree, loop)
    if outer is None:
        return False
    _, block, index = outer
    after = block[index + 1] if index + 1 < len(block) else None
    return isinstance(after, ast.If) and _reads(after.test, {flag}) and _fails(after.body)


def _names_alike(first: ast.expr, second: ast.expr) -> bool:
    """Two string constants, or two f-strings with the same formatted values, whose constant text
    names no device."""
    if isinstance(first, ast.Constant) and isinstance(second, ast.Constant):
        texts = [first.value, second.value]
        return all(isinstance(text, str) and not _DEVICE.match(text) for text in texts)
    if not (isinstance(first, ast.JoinedStr) and isinstance(second, ast.JoinedStr)):
        return False
    if len(first.values) != len(second.values):
        return False
    return all(
        ast.dump(a) == ast.dump(b) or _names_alike(a, b) for a, b in zip(first.values, second.values, strict=True)
    )


def same_call_other_name(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler's one statement is the try's one call again, its arguments the same but for
    string constants that name what is looked up (see the module docstring)."""
    calls = paired_calls(node, handler)
    if calls is None:
        return False
    first, second = calls
    if ast.dump(first.func) != ast.dump(second.func) or len(first.args) != len(second.args):
        return False
    if [k.arg for k in first.keywords] != [k.arg for k in second.keywords]:
        return False
    pairs = [
        *((None, a, b) for a, b in zip(first.args, second.args, strict=True)),
        *((k.arg, k.value, j.value) for k, j in zip(first.keywords, second.keywords, strict=True)),
    ]
    return all(
        ast.dump(a) == ast.dump(b) or (keyword not in _DEVICE_KEYWORDS and _names_alike(a, b))
        for keyword, a, b in pairs
    )


def unrolled_alternatives(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """Alternatives tried in turn, unrolled, whose exhaustion raises (see the module docstring): the
    try stands directly in a function's body, which ends in `raise <exception>`; the handler only
    logs and binds one name to `None`; the statement right after the try tests that name (`if name is
    not None:`, `if name:`), and no `return` of the function from the try on hands back `None`."""
    bindings = [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
    if len(bindings) != 1:
        return False
    binding = bindings[0]
    if not (
        isinstance(binding, ast.Assign)
        and len(binding.targets) == 1
        and isinstance(binding.targets[0], ast.Name)
        and isinstance(binding.value, ast.Constant)
        and binding.value.value is None
    ):
        return False
    name = binding.targets[0].id
    function = next(
        (
            stmt
            for stmt in pysource.statements(tree)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(s is node for s in stmt.body)
        ),
        None,
    )
    if function is None or not (isinstance(function.body[-1], ast.Raise) and function.body[-1].exc is not None):
        return False
    rest = function.body[[id(s) for s in function.body].index(id(node)) + 1 :]
    if not (rest and isinstance(rest[0], ast.If) and _tests_name(rest[0].test, name)):
        return False
    return not any(
        isinstance(sub, ast.Return)
        and (sub.value is None or (isinstance(sub.value, ast.Constant) and sub.value.value is None))
        for stmt in rest
        for sub in _own_nodes(stmt)
    )


def _tests_name(test: ast.expr, name: str) -> bool:
    """`name`, `name is not None` or `name is None`."""
    if isinstance(test, ast.Name):
        return test.id == name
    return named_none_test(test, (name,)) is not None


def _reads_attribute(node: ast.AST, attribute: str) -> bool:
    """`node` reads `self.<attribute>`."""
    return any(
        isinstance(sub, ast.Attribute)
        and sub.attr == attribute
        and isinstance(sub.value, ast.Name)
        and sub.value.id == "self"
        and isinstance(sub.ctx, ast.Load)
        for sub in pysource.walk(node)
    )


def _checks(stmt: ast.stmt, attribute: str) -> bool:
    """`assert <reads self.attribute>`, or an `if` whose test reads it and whose body ends in such an
    `assert` or in a `raise`: the unset attribute is made good or fails loudly."""
    if isinstance(stmt, ast.Assert):
        return _reads_attribute(stmt.test, attribute)
    if not (isinstance(stmt, ast.If) and _reads_attribute(stmt.test, attribute)):
        return False
    last = stmt.body[-1]
    return isinstance(last, ast.Raise) or (isinstance(last, ast.Assert) and _reads_attribute(last.test, attribute))


def _quiet_call(call: ast.Call, loop_names: set[str]) -> bool:
    """A logging call, a builtin's, or a method of a loop variable (`name.startswith(...)`): no code of
    the repository or of a library runs."""
    func = call.func
    if is_logging_call(call):
        return True
    if isinstance(func, ast.Name):
        return func.id in _BUILTIN_NAMES
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in loop_names


def checked_attribute(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A failure left as an unset attribute that every caller tests (see the module docstring): the
    method's body (a docstring aside) is the try, whose first statement binds `self.<attribute>` to a
    call and whose other statements call only builtins, logging and methods of loop variables; the
    handler only logs; and every call of the method in the file is a statement followed directly by
    a check of `self.<attribute>` (`_checks`)."""
    if (
        node.orelse
        or node.finalbody
        or not all(isinstance(stmt, ast.Expr) and is_logging_call(stmt.value) for stmt in handler.body)
    ):
        return False
    first = node.body[0]
    if not (
        isinstance(first, ast.Assign)
        and len(first.targets) == 1
        and isinstance(first.targets[0], ast.Attribute)
        and isinstance(first.targets[0].value, ast.Name)
        and first.targets[0].value.id == "self"
        and isinstance(first.value, ast.Call)
    ):
        return False
    attribute = first.targets[0].attr
    rest = node.body[1:]
    loop_names = {
        sub.id
        for stmt in rest
        for loop in pysource.walk(stmt)
        if isinstance(loop, ast.For)
        for sub in pysource.walk(loop.target)
        if isinstance(sub, ast.Name)
    }
    if not all(
        _quiet_call(sub, loop_names) for stmt in rest for sub in pysource.walk(stmt) if isinstance(sub, ast.Call)
    ):
        return False
    method = innermost_function(tree, node)
    if method is None or not method.args.args or method.args.args[0].arg != "self":
        return False
    body = method.body[1:] if ast.get_docstring(method) is not None else method.body
    if body != [node]:
        return False
    checked = 0
    for block in _blocks(tree):
        for index, stmt in enumerate(block):
            if isinstance(stmt, ast.Expr) and _calls_method(stmt.value, method.name):
                if index + 1 == len(block) or not _checks(block[index + 1], attribute):
                    return False
                checked += 1
    calls = sum(1 for sub in pysource.nodes(tree) if _calls_method(sub, method.name))
    return checked > 0 and checked == calls


def _calls_method(node: ast.AST, name: str) -> bool:
    """`self.<name>(...)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == name
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
    )


def _blocks(tree: ast.Module) -> Iterator[list[ast.stmt]]:
    """Every statement list of `tree`."""
    yield tree.body
    for stmt in pysource.statements(tree):
        yield from statement_blocks(stmt)
