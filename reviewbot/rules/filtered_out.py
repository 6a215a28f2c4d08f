"""An element whose processing failed, dropped by the filter the function serves (round 24 of the
precision benchmark).

```
def doc2len(doc) -> int:
    try:
        return len(tokenizer.apply_chat_template(doc[prompt_key], ...))
    except Exception:
        print("Error processing one of the samples, skipping...")
        traceback.print_exc()
        return self.max_prompt_length + 1

dataframe = dataframe.filter(lambda doc: doc2len(doc) <= self.max_prompt_length, ...)
```

The function holding the try is used only as the predicate of a filter: every read of its name in
the file is a call compared with a bound (`f(x) <= limit`) inside a `lambda` handed to a call named
`filter`. The handler prints the traceback (`traceback.print_exc()`, `logger.exception`,
`exc_info=`), otherwise only reports, and returns a value on the rejecting side of that comparison
(`limit + 1` for `<=`, `limit` for `<`, `limit - 1` for `>=`, infinity for `<` and `<=`). A failing
element is dropped from the data, as the function's answer says, and each drop is shown with its
traceback where it happens (verl's over-long-prompt filter, whose commit makes dropping malformed
samples the feature). What is left is a `P3`: the catch-all also drops elements for a bug of the
function, and a systematic failure drops every element, shown only as per-element tracebacks
before an empty result (`broad-except.filtered-out`).

Near misses: a handler that prints a message without the traceback, a value on the keeping side
(`return 0` for `<= limit`: the failed element is kept, with a made-up answer), the function also
called elsewhere, a comparison with another bound than the one the handler returns past.
"""

from __future__ import annotations

import ast
import math

from reviewbot import pysource
from reviewbot.rules.common import (
    TRACEBACK_PRINTS,
    callee,
    carries_traceback,
    innermost_function,
    is_logging_call,
    same_node,
)


def _shows_traceback(stmt: ast.stmt) -> bool:
    """`traceback.print_exc()`, or a logging call that carries the traceback (`carries_traceback`)."""
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    call = stmt.value
    return callee(call) in TRACEBACK_PRINTS or (is_logging_call(call) and carries_traceback(call))


def _number(expr: ast.expr) -> float | None:
    if isinstance(expr, ast.Constant) and type(expr.value) in (int, float):
        return float(expr.value)
    return None


def _infinite(expr: ast.expr) -> bool:
    """`math.inf`, `float("inf")`."""
    if isinstance(expr, ast.Attribute) and expr.attr == "inf":
        return True
    return (
        isinstance(expr, ast.Call)
        and isinstance(expr.func, ast.Name)
        and expr.func.id == "float"
        and len(expr.args) == 1
        and isinstance(expr.args[0], ast.Constant)
        and str(expr.args[0].value).lower() in ("inf", "infinity")
    )


def _offset(value: ast.expr, bound: ast.expr) -> float | None:
    """How far `value` is from `bound`: 0 for the same expression, `c` for `bound + c`, `-c` for
    `bound - c` (`c` a number); infinity for an infinite constant; None otherwise."""
    if _infinite(value):
        return math.inf
    if same_node(value, bound):
        return 0.0
    if isinstance(value, ast.BinOp) and isinstance(value.op, (ast.Add, ast.Sub)) and same_node(value.left, bound):
        step = _number(value.right)
        if step is not None:
            return step if isinstance(value.op, ast.Add) else -step
    return None


def _rejects(compare: ast.Compare, call: ast.Call, returned: ast.expr) -> bool:
    """`compare` is `call <op> bound` (or `bound <op> call`) and `returned` in place of the call makes
    it false."""
    if len(compare.ops) != 1:
        return False
    op, (right,) = compare.ops[0], compare.comparators
    if compare.left is call:
        bound = right
    elif right is call:
        bound = compare.left
        flipped = {ast.Lt: ast.Gt, ast.LtE: ast.GtE, ast.Gt: ast.Lt, ast.GtE: ast.LtE}
        op = flipped.get(type(op), type(op))()
    else:
        return False
    offset = _offset(returned, bound)
    if offset is None:
        return False
    if isinstance(op, ast.LtE):
        return offset > 0
    if isinstance(op, ast.Lt):
        return offset >= 0
    if isinstance(op, ast.GtE):
        return offset < 0 and not math.isinf(offset)
    if isinstance(op, ast.Gt):
        return offset <= 0 and not math.isinf(offset)
    return False


def _filter_predicates(tree: ast.Module) -> dict[int, ast.Compare]:
    """id of each call node standing as one side of a comparison that is the body of a `lambda`
    handed to a call named `filter` -> that comparison."""
    found: dict[int, ast.Compare] = {}
    for node in pysource.nodes(tree):
        if not (isinstance(node, ast.Call) and callee(node) == "filter"):
            continue
        for argument in [*node.args, *(keyword.value for keyword in node.keywords)]:
            if isinstance(argument, ast.Lambda) and isinstance(argument.body, ast.Compare):
                compare = argument.body
                for side in [compare.left, *compare.comparators]:
                    if isinstance(side, ast.Call):
                        found[id(side)] = compare
    return found


def filtered_out(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler shows the traceback and returns what makes the filter its function serves drop the
    element (see the module docstring)."""
    *reports, last = handler.body
    if not (isinstance(last, ast.Return) and last.value is not None):
        return False
    if not any(_shows_traceback(stmt) for stmt in reports):
        return False
    if not all(
        _shows_traceback(stmt) or (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value)) for stmt in reports
    ):
        return False
    function = innermost_function(tree, node)
    if function is None:
        return False
    predicates = _filter_predicates(tree)
    uses = [
        sub
        for sub in pysource.nodes(tree)
        if isinstance(sub, ast.Name) and sub.id == function.name and isinstance(sub.ctx, ast.Load)
    ]
    if not uses:
        return False
    calls = {
        id(sub.func): sub
        for sub in pysource.nodes(tree)
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
    }
    for use in uses:
        call = calls.get(id(use))
        if call is None or id(call) not in predicates:
            return False
        if not _rejects(predicates[id(call)], call, last.value):
            return False
    return True
