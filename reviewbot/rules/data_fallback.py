"""A catch-all whose fallback value flows on as data (round 19): the harm of a swallow lies in
what the value does downstream, and a report where it happens does not change it.

Two shapes a catch-all's handler shows in its own code, read before the exemptions for reported
fallbacks and confined tries (both P2):

- `broad-except.constant-data`: the handler binds or returns a container of constants (`tmp =
  [""]`, `scores = [0.0 for _ in batch]`, `return []`): an empty or constant batch in place of the
  computed one, which the code after it handles as a real result (lm-evaluation-harness's
  `parse_generations`: any parse failure becomes an empty answer, scored as wrong, and cached). A
  failure record (a container that also says the unit failed, `_error_record`) is not this class;
- `broad-except.widens-fallback`, below.

A catch-all that repeats a narrower handler's fallback (`broad-except.widens-fallback`):

`except GetTimeoutError: print(...); return False` and then `except Exception as e: print(...);
return False` on the same try (OpenRLHF's math verifier; verl's PRIME scoring with
`asyncio.TimeoutError`, a whole batch scored 0): the narrow handler names the failure the fallback
was written for, and the catch-all after it gives every other error the same answer. What follows
cannot tell an unexpected error (a dead worker, a programmer error) from the expected failure: a
reward of 0 reads as a wrong answer, not as a broken scorer. Whether the handlers print does not
change that (the value flows on as data), so this is read before the reported-fallback exemptions.
The handlers are compared with their logging, `print` and warning calls set aside; a catch-all
that does something else (re-raises, returns another value) is not this class, nor one whose
fallback keeps the caught exception (`last_exception = e` in a retry loop that raises it when
exhausted: verl's reward request): the error travels on.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.exception_index import caught_names
from reviewbot.rules.common import is_logging_call, same_node

_BROAD = frozenset(["Exception", "BaseException"])


def _fallback(handler: ast.ExceptHandler) -> list[ast.stmt]:
    """The handler's statements but its logging, `print` and warning calls."""
    return [stmt for stmt in handler.body if not (isinstance(stmt, ast.Expr) and is_logging_call(stmt.value))]


def widened_handler(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The `except` clause of an earlier, narrower handler of `node` whose fallback the catch-all
    `handler` repeats statement for statement (see the module docstring); None when there is none."""
    own = _fallback(handler)
    if not own or any(
        isinstance(node, ast.Name) and node.id == handler.name for stmt in own for node in pysource.walk(stmt)
    ):
        return None
    for earlier in node.handlers:
        if earlier is handler:
            return None
        names = caught_names(earlier)
        if earlier.type is None or names is None or _BROAD & set(names):
            continue
        if same_node(_fallback(earlier), own):
            return f"except {ast.unparse(earlier.type)}"
    return None


def _constant_container(value: ast.expr | None) -> bool:
    """A list, tuple, set or dict display of constants only, or a list comprehension of a constant."""
    if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
        return all(isinstance(elt, ast.Constant) for elt in value.elts)
    if isinstance(value, ast.Dict):
        return all(isinstance(part, ast.Constant) for part in [*value.keys, *value.values] if part is not None)
    return isinstance(value, ast.ListComp) and isinstance(value.elt, ast.Constant)


def constant_data(handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler binds or returns a container of constants (see the module
    docstring)."""
    return any(isinstance(stmt, (ast.Assign, ast.Return)) and _constant_container(stmt.value) for stmt in handler.body)
