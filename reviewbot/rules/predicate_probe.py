"""A yes/no probe that answers "no" when its question fails (round 24 of the precision benchmark).

`def is_b70(device=0) -> bool: try: name = torch.xpu.get_device_properties(device).name except
Exception: return False` (auto-round), `def is_available(): _available = False; try: _available =
runtime.getDeviceCount() > 0 except Exception: pass` (CuPy), `try: is_capturing =
torch.npu.is_current_stream_capturing() except Exception: is_capturing = False` (ktransformers): the
function, or the call the try makes, answers a yes/no question by its name (`is_*`, `has_*`,
`can_*`, `supports_*`, `*_available`, `*_enabled`, ...), and
the handler answers `False`, the "not there" of that question: no device of that kind, not
compiling, not capturing. Callers use such an answer to pick a path, and a probe that raised would
break them on exactly the machines where the answer is "no". What is left is the width: a bug in the
probe or a broken installation reads as "no" too, without a trace, so the finding is a `P3` nit
(catch the failure that means "not there", or log the reason), not the `P2` of a hidden fallback.

`negative_answer` asks, of a catch-all handler that does not re-raise:

- the try has no `else:` or `finally:`, and its body is one statement (an assignment, a `return`
  or a call standing alone) after any imports: one question asked;
- the handler, after any logging calls, either `return False` in a predicate function; or binds
  `False` to the name the try's statement binds, which holds a predicate's answer (the function is a
  predicate, or the try's value is a call of a predicate-named callee); or passes, the statement
  right before the try binding that name to `False` already; or (a nested probe) ends in a try of
  the same kind whose every handler answers "no" the same way: another way of asking the question
  (`torch.compiler.is_compiling()`, else `torch._dynamo.is_compiling()`, else `False`).

Near misses, still the swallow: a predicate whose handler answers `True` (a failure read as "yes"
fails open), a function not named as a predicate (`def shutdown(self) -> bool` answering `False` for
"failed" reports an action, it asks nothing), a try of more than one statement, a handler that
computes or binds anything but the constant.
"""

from __future__ import annotations

import ast
import re

from reviewbot import pysource
from reviewbot.rules.common import callee, innermost_function, is_logging_call, statement_blocks

# first and last words of a name that asks a yes/no question
_ASKS = frozenset(["is", "has", "have", "can", "supports", "should"])
_STATES = frozenset(["available", "supported", "enabled", "installed", "exists", "present"])
_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def predicate_name(name: str) -> bool:
    """`is_b70`, `_has_triton`, `supportsFp8`, `cuda_available`, `is_current_stream_capturing`: a
    name whose first word asks (`is`, `has`, `can`, ...) or whose last word states a presence
    (`available`, `enabled`, `installed`, ...)."""
    words = [word.lower() for word in _WORDS.split(name) if word]
    return bool(words) and (words[0] in _ASKS or words[-1] in _STATES)


def _is_false(expr: ast.expr | None) -> bool:
    return isinstance(expr, ast.Constant) and expr.value is False


def _question(body: list[ast.stmt]) -> ast.stmt | None:
    """The one statement of a try body after its imports: an assignment to one plain name, a
    `return` of a value or a call standing alone."""
    asked = [stmt for stmt in body if not isinstance(stmt, (ast.Import, ast.ImportFrom))]
    if len(asked) != 1:
        return None
    stmt = asked[0]
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt
    if isinstance(stmt, ast.Return) and stmt.value is not None:
        return stmt
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return stmt
    return None


def _asked_by_call(value: ast.expr) -> str | None:
    """The callee, when the value is a call of one named as a predicate
    (`torch.npu.is_current_stream_capturing()`)."""
    if not isinstance(value, ast.Call):
        return None
    return ast.unparse(value.func) if predicate_name(callee(value)) else None


def _before(function: ast.AST, node: ast.stmt) -> ast.stmt | None:
    """The statement right before `node` in the block of `function` that holds it, if any."""
    for holder in (function, *pysource.statements(function)):
        for block in statement_blocks(holder):
            for index, stmt in enumerate(block):
                if stmt is node:
                    return block[index - 1] if index else None
    return None


def _binds_false(stmt: ast.stmt | None, name: str) -> bool:
    return (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and stmt.targets[0].id == name
        and _is_false(stmt.value)
    )


def _answers_no(
    function: ast.FunctionDef | ast.AsyncFunctionDef,
    node: ast.Try | ast.TryStar,
    handler: ast.ExceptHandler,
) -> str | None:
    """The predicate whose "no" the handler answers, or None (see `negative_answer`)."""
    if node.orelse or node.finalbody or not handler.body:
        return None
    question = _question(node.body)
    if question is None:
        return None
    *logs, last = handler.body
    if not all(isinstance(stmt, ast.Expr) and is_logging_call(stmt.value) for stmt in logs):
        return None
    own = function.name if predicate_name(function.name) else None
    if isinstance(last, ast.Return):
        return own if _is_false(last.value) else None
    if isinstance(last, (ast.Try, ast.TryStar)):
        # another way of asking the same question, itself answering "no" on failure
        answers = {_answers_no(function, last, inner) for inner in last.handlers}
        return answers.pop() if len(answers) == 1 else None
    if not isinstance(question, ast.Assign):
        return None
    target = question.targets[0]
    assert isinstance(target, ast.Name)
    asked = own or _asked_by_call(question.value)
    if asked is None:
        return None
    if isinstance(last, ast.Pass) or (isinstance(last, ast.Expr) and is_logging_call(last.value)):
        return asked if _binds_false(_before(function, node), target.id) else None
    return asked if _binds_false(last, target.id) else None


def negative_answer(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The name of the predicate (the enclosing function, else the try's callee) whose "no" the
    handler answers for every failure of the try's one question (see the module docstring); None
    when the handler is not such an answer."""
    function = innermost_function(tree, node)
    return None if function is None else _answers_no(function, node, handler)
