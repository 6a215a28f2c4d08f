"""A probe whose failure is announced where its flag is read (round 24 of the precision benchmark,
optimum-habana's PEFT base model check).

`try: list_repo_files(base_name); is_remote = True` / `except Exception: is_remote = False`, then
`if is_local or is_remote: <load the adapter's base> else: logger.warning("the base model ... does
not exist ...; using --model_name_or_path instead"); <load that>`: the try is one operation and a
flag saying it worked, the handler only sets the flag the other way, and the statement that runs
after the try is the one `if` that reads the flag, whose branch for the handler's value starts with
a warning. The failure is announced where it changes what the program does, as `broad_except`'s
guarded probe accepts a warning right after the try; the warning only stands one statement further
in. `broad_except` reads it with its probes: nothing.

`warned_flag_probe` asks: the try has no `else:` or `finally:`, its body is one statement that calls
something and then `flag = True` (or `False`); the handler binds the same flag to the other constant,
its other statements logging calls; the statement run after the try (`after`) is an `if` whose test
is the flag, `not flag`, or an `and`/`or` with one of those as an operand; the branch the handler's
value leads to (the body when that operand is then true, the `else:` otherwise) starts with a
warning (`common.warns`: `warnings.warn`, logging at warning level or above); and the function (or
module) reads the flag nowhere else. Near misses: a branch that starts with anything else (an
info-level log, the fallback itself), a flag read again later, a try of two operations.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import innermost_function, is_logging_call, warns


def _flag(stmt: ast.stmt) -> tuple[str, bool] | None:
    """(name, value) for `name = True` / `name = False`."""
    if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
        return None
    if not (isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, bool)):
        return None
    return stmt.targets[0].id, stmt.value.value


def _operand_truth(test: ast.expr, name: str, value: bool) -> bool | None:
    """What the test's operand reading `name` (`name` or `not name`, the whole test or a direct
    operand of an `and`/`or`) is when `name` holds `value`; None when no operand reads it so."""
    operands = test.values if isinstance(test, ast.BoolOp) else [test]
    for operand in operands:
        if isinstance(operand, ast.Name) and operand.id == name:
            return value
        if (
            isinstance(operand, ast.UnaryOp)
            and isinstance(operand.op, ast.Not)
            and isinstance(operand.operand, ast.Name)
            and operand.operand.id == name
        ):
            return not value
    return None


def warned_flag_probe(
    tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler, after: ast.stmt | None
) -> bool:
    """The try probes one operation into a flag, and the `if` after it warns on the branch the
    handler's value leads to (see the module docstring); `after`: the statement run after the try."""
    if node.orelse or node.finalbody or len(node.body) != 2 or not isinstance(after, ast.If):
        return False
    if not any(isinstance(sub, ast.Call) for sub in pysource.walk(node.body[0])):
        return False
    tried = _flag(node.body[1])
    bindings = [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]
    fallback = _flag(bindings[0]) if len(bindings) == 1 else None
    if tried is None or fallback is None or tried[0] != fallback[0] or tried[1] == fallback[1]:
        return False
    name, value = fallback
    truth = _operand_truth(after.test, name, value)
    if truth is None:
        return False
    branch = after.body if truth else after.orelse
    if not (branch and warns(branch[0])):
        return False
    function = innermost_function(tree, node)
    scope: ast.AST = tree if function is None else function
    in_test = {id(sub) for sub in pysource.walk(after.test)}
    return all(
        id(sub) in in_test
        for sub in pysource.walk(scope)
        if isinstance(sub, ast.Name) and sub.id == name and isinstance(sub.ctx, ast.Load)
    )
