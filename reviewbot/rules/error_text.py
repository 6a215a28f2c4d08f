"""What a handler's tests of the caught exception's text say (round 22 of the precision benchmark).

A handler that compares the caught exception's message with a string constant (`if "quantile()
input tensor is too large" in str(exc):`, `if "CUDA" in str(ex):`) states in code which failure it
expects. Two readings of that test:

- `silent_filter`: a *message filter* (`broad_except._filters`: the branch the test does not take
  re-raises the caught exception) whose kept branch shows nothing: no `print`, no warning, no log
  call above debug level. The filter is as narrow as its message, so no programmer error passes
  it; but what the matched failure leaves undone (the try's statements after the failing one, the
  result it was to bind) is skipped or replaced without a word (axolotl's ReLoRA optimizer reset,
  which passes over tensors too large for `torch.quantile` and so leaves their optimizer state
  un-reset; nunchaku's LoRA merge, which truncates or drops the extra LoRA on a size mismatch with
  debug logs only). Whether that matters downstream is not read, so the finding is a `P2` that says
  it is unconfirmed. Near misses: a kept branch that reports (a warning, a log at info level or
  above, `print`); one that only binds constants (`batch_size = 1`: a stated setting, whose own
  failure is then loud, lm-evaluation-harness's batch-size probe); a matched message that says the
  effect is already in place (`"already registered"`, `"exists"`, `"duplicate"`: an idempotent
  step); a kept branch holding a `raise` (auto-round's dataset loader raises a clearer
  `RuntimeError` for "Dataset scripts are no longer supported"); a filter on a predicate call
  (`should_reduce_batch_size(e)`), which names no message;
- `names_device_error`: the test looks for `CUDA` or `out of memory` in the text, so the handler
  itself says torch's device errors reach it, even in a revision none of whose files imports torch
  (TorchServe's model loader, which answers every such `RuntimeError` with "out of memory" and logs
  nothing): the gate `ExceptionIndex.torch_imported` of `runtime-error-fallback` is then met by the
  handler's own words.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.exception_index import reraises_same
from reviewbot.rules.common import callee, is_logging_call, reads_name

# a matched message that says the step's effect is already there: passing over it is idempotence
_IN_PLACE = re.compile(r"\balready\b|\bexists?\b|\bduplicate", re.IGNORECASE)
# text of a torch device error (`CUDA error: ...`, `CUDA out of memory`, `... out of memory ...`)
_DEVICE_ERROR = re.compile(r"\bCUDA\b|out of memory")
_TEXT_COMPARISONS = (ast.In, ast.NotIn, ast.Eq, ast.NotEq)


def matched_texts(test: ast.expr, name: str) -> list[str]:
    """The string constants `test` compares with the text of the caught exception `name`: the other
    operand of an `in`, `not in`, `==` or `!=` comparison reads `name` (`"x" in str(e)`,
    `e.args[0] == "x"`); also the argument of `.startswith(...)`/`.endswith(...)` called on such a
    text."""
    texts: list[str] = []
    for sub in pysource.walk(test):
        if isinstance(sub, ast.Compare) and len(sub.ops) == 1 and isinstance(sub.ops[0], _TEXT_COMPARISONS):
            left, right = sub.left, sub.comparators[0]
            for constant, other in ((left, right), (right, left)):
                if isinstance(constant, ast.Constant) and isinstance(constant.value, str) and reads_name(other, name):
                    texts.append(constant.value)
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("startswith", "endswith")
            and reads_name(sub.func.value, name)
        ):
            texts.extend(arg.value for arg in sub.args if isinstance(arg, ast.Constant) and isinstance(arg.value, str))
    return texts


def _kept_branches(handler: ast.ExceptHandler) -> Iterator[tuple[list[str], list[ast.stmt]]]:
    """(matched texts, kept branch) of each message filter directly in the handler's body: an `if`
    whose test compares the caught exception's text and whose other branch re-raises it unchanged.
    `if <test>: <kept> else: raise`; negated, `if not <test>: raise` followed by the kept statements."""
    assert handler.name is not None
    for index, stmt in enumerate(handler.body):
        if not isinstance(stmt, ast.If):
            continue
        texts = matched_texts(stmt.test, handler.name)
        if not texts:
            continue
        negated = isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
        reraising = stmt.body if negated else stmt.orelse
        if not (reraising and reraises_same(ast.ExceptHandler(type=handler.type, name=handler.name, body=reraising))):
            continue
        yield texts, (handler.body[index + 1 :] if negated else stmt.body)


def _reports(body: list[ast.stmt]) -> bool:
    """A `print`, a warning or a log call above debug level anywhere in `body`."""
    return any(
        isinstance(sub, ast.Call) and is_logging_call(sub) and callee(sub) != "debug"
        for stmt in body
        for sub in pysource.walk(stmt)
    )


def _raises(body: list[ast.stmt]) -> bool:
    """A `raise` anywhere in `body`: the matched failure goes on (as a clearer error, say) on some path."""
    return any(isinstance(sub, ast.Raise) for stmt in body for sub in pysource.walk(stmt))


def _binds_constants(body: list[ast.stmt]) -> bool:
    """Every statement of `body` binds a constant (`batch_size = 1`), and there is one."""
    return bool(body) and all(
        isinstance(stmt, (ast.Assign, ast.AnnAssign)) and isinstance(stmt.value, ast.Constant) for stmt in body
    )


def silent_filter(handler: ast.ExceptHandler) -> str | None:
    """The message a silent filter of `handler` passes over (see the module docstring), or None."""
    if handler.name is None:
        return None
    for texts, kept in _kept_branches(handler):
        if any(_IN_PLACE.search(text) for text in texts):
            continue
        if _reports(kept) or _binds_constants(kept) or _raises(kept):
            continue
        return texts[0]
    return None


def names_device_error(handler: ast.ExceptHandler) -> bool:
    """A test in the handler compares the caught exception's text with one that names a torch
    device error (`"CUDA" in str(ex)`, `"out of memory" in str(e)`)."""
    if handler.name is None:
        return False
    name = handler.name
    return any(
        _DEVICE_ERROR.search(text)
        for stmt in handler.body
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.If)
        for text in matched_texts(sub.test, name)
    )
