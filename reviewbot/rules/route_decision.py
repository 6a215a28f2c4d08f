"""A silent fallback that decides which route the code takes (round 25 of the precision benchmark).

```
try:
    neuron_config = NeuronConfig.from_pretrained(model_id, revision=revision)
except Exception:
    neuron_config = None
if neuron_config is not None:
    ...  # serve the exported model
else:
    ...  # export it first
```

The handler only binds plain names to `None` or `False`, and the statement right after the try is
an `if` whose test reads one of them (`name is None`, `name is not None`, `not name`, `name`, alone
or as an operand of `and`/`or`) and whose body or `else:` calls something other than a report
(logging, `print`, a warning): the fallback is no value
that flows on but a decision, and every failure of the try, not only the absence the constant
stands for (no such file, not that kind of model), takes the other route without a word
(optimum-neuron's `serve`, whose version-mismatch errors read as "not a Neuron model", and its
exporter, whose remote-code configs silently skip the custom-modeling route). `broad_except` words
its `broad-except.swallows` so (`broad-except.decides-route`, the same severity): the message
names the harm, not only the width.

General because it reads what the fallback value is used for (a branch taken on it), not a name
or a project. Near misses, worded as the plain swallow: a handler that logs or computes, a
statement between the try and the `if`, an `if` on another name, an `if` whose branches only report
(`if home is None: print("not found")`).
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import is_logging_call


def _constant_marks(handler: ast.ExceptHandler) -> set[str] | None:
    """The names the handler binds when it only binds plain names to `None` or `False`."""
    marked: set[str] = set()
    for stmt in handler.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Constant)
            and stmt.value.value in (None, False)
        ):
            return None
        marked.add(stmt.targets[0].id)
    return marked or None


def _operands(test: ast.expr) -> list[ast.expr]:
    operands = list(test.values) if isinstance(test, ast.BoolOp) else [test]
    return [operand.operand if isinstance(operand, ast.UnaryOp) else operand for operand in operands]


def _mark_read(operand: ast.expr, marked: set[str]) -> str | None:
    """The marked name `operand` tests (`name`, `name is None`, `name is not None`), or None."""
    if isinstance(operand, ast.Name):
        return operand.id if operand.id in marked else None
    if (
        isinstance(operand, ast.Compare)
        and isinstance(operand.left, ast.Name)
        and operand.left.id in marked
        and len(operand.ops) == 1
        and isinstance(operand.ops[0], (ast.Is, ast.IsNot))
        and isinstance(operand.comparators[0], ast.Constant)
        and operand.comparators[0].value is None
    ):
        return operand.left.id
    return None


def decides_route(handler: ast.ExceptHandler, after: ast.stmt | None) -> tuple[str, int] | None:
    """(the name, the line of the `if`) when the handler's constant decides the branch of the `if`
    right after the try (see the module docstring); None otherwise."""
    marked = _constant_marks(handler)
    if marked is None or not isinstance(after, ast.If):
        return None
    read = [name for name in (_mark_read(operand, marked) for operand in _operands(after.test)) if name]
    if not read:
        return None
    if not any(
        isinstance(sub, ast.Call) and not is_logging_call(sub)
        for stmt in (*after.body, *after.orelse)
        for sub in pysource.walk(stmt)
    ):
        return None  # a branch that only reports decides nothing
    return read[0], after.lineno
