"""A procedure that by its name only tries, its failure logged (round 24 of the precision benchmark).

`def _try_bind_numa(self): ... try: import numa; ...; schedule.run_on_nodes(numa_id);
memory.set_membind_nodes(numa_id) except Exception: logger.info("failed to bind process to numa
node"); return` (xtuner's trainer): the function's name says it attempts the step (`try_*`,
`maybe_*`, `attempt_*`), it hands back nothing, and the handler logs the failure and returns. The
caller goes on the same whether the step happened or not, which is what the name promises; a
performance hint such as a NUMA binding is lost, no value is substituted. It is the docstring class
of `broad_except` ("best effort", "falls back") said by the name. What is left is a nit (`P3`):
the catch-all also takes a bug of the step, and a log line without the exception says nothing of
which failure it was.

`named_attempt` asks: the innermost function holding the try is named with a first word `try`,
`maybe` or `attempt` (leading underscores aside) and hands back nothing (`hands_back_nothing`); the
try stands directly in its body; and the handler only logs (at least once), passes or returns
nothing. Near misses, still the swallow: a function of another name (`bind_numa`), an attempt that
returns a value (the caller reads what the handler leaves), a silent handler, a handler that binds a
substitute.
"""

from __future__ import annotations

import ast
import re

from reviewbot.rules.common import hands_back_nothing, innermost_function, is_logging_call

_ATTEMPTS = frozenset(["try", "maybe", "attempt"])
_WORDS = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")


def _attempt_name(name: str) -> bool:
    words = [word.lower() for word in _WORDS.split(name) if word]
    return len(words) > 1 and words[0] in _ATTEMPTS


def _logs_or_returns(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Expr) and is_logging_call(stmt.value):
        return True
    if isinstance(stmt, ast.Pass):
        return True
    return isinstance(stmt, ast.Return) and (stmt.value is None or ast.unparse(stmt.value) == "None")


def named_attempt(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The function's name when it says it only tries and the handler logs and leaves (see the module
    docstring); None otherwise."""
    function = innermost_function(tree, node)
    if function is None or not _attempt_name(function.name) or not any(stmt is node for stmt in function.body):
        return None
    if not hands_back_nothing(function):
        return None
    if not all(_logs_or_returns(stmt) for stmt in handler.body):
        return None
    if not any(isinstance(stmt, ast.Expr) and is_logging_call(stmt.value) for stmt in handler.body):
        return None
    return function.name
