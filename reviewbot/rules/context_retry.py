"""The same statement retried outside the context manager it first ran in, its own failure
propagated (round 24 of the precision benchmark).

`try: with torch.autocast(device, dtype): out = self.model(*args)` / `except RuntimeError: out =
self.model(*args)` (optimum-intel's IPEX model call): the try is one `with` statement holding one
statement, and the handler is that statement again, unguarded. What the context changed (a lower
precision, a mode the device may not support) is dropped; the computation and its inputs are the
same, so an error that does not come from the context (an out-of-memory error, a bad input, a
programmer error) fails again in the retry and reaches the caller, chained to the first. What the
unfiltered handler still costs is that a failing call runs twice, and that the retry is silent: a
`P3` nit, `runtime-error-fallback.context-retry`, like `device_retry`'s CPU retry, not the `P2` of
a fallback that hides any error.

`retried_outside_context` asks: the try's body is one `with` whose items bind no name (`as`), whose
body is one statement that calls something, and the handler's body is that statement (`ast.dump`
equal). Near misses: a handler that changes the statement (other arguments: another computation),
a `with ... as name` (the retry would read what the context bound), a try with more statements, a
handler that also does other work.
"""

from __future__ import annotations

import ast

from reviewbot import pysource


def retried_outside_context(node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The handler is the one statement of the try's one `with` again, outside it (see the module
    docstring)."""
    if len(node.body) != 1 or node.orelse or node.finalbody or len(handler.body) != 1:
        return False
    scope = node.body[0]
    if not isinstance(scope, (ast.With, ast.AsyncWith)) or len(scope.body) != 1:
        return False
    if any(item.optional_vars is not None for item in scope.items):
        return False
    inner = scope.body[0]
    if not any(isinstance(sub, ast.Call) for sub in pysource.walk(inner)):
        return False
    return ast.dump(inner) == ast.dump(handler.body[0])
