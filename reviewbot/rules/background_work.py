"""Work started on another thread whose handle the starter drops (round 27 of the precision benchmark:
axlearn's trainer terminated on an executor after the restart was acknowledged, xinference's
llama.cpp request run on an executor while the caller reads a queue).

`pool.submit(f, ...)`, `loop.run_in_executor(pool, f, ...)` and `Thread(target=f, ...).start()`,
each a statement of its own, start `f` elsewhere and keep nothing of it: no future is read, no
thread joined. What `f` returns or raises reaches no one, and the code that started it has gone on
(it answered a request, or returned a stream that waits on a queue). A catch-all in `f` whose handler
only reports the error is then the only place the failure is seen, as a log line on a background
thread; the code that owns the outcome never learns of it, so it is no reported fallback. A kept
future (`futures = [pool.submit(f, x) for x in xs]`, `{pool.submit(f, x): x for x in xs}`, `await
loop.run_in_executor(...)`) is read by its starter: not dropped. Functions are matched by the name
they are handed by (`f`, `self.f`), in the same file.

When the statement after the try puts a value on a channel on which the same function puts
failures elsewhere (`q.put(_Done)` where a callback puts `q.put(_Error(msg))`), the handler sends
the channel's reader the end instead of the failure it can carry: the reader takes the failure for
a normal end (an empty stream). The finding names that statement (`end_on_error_channel`), and the
engine reports it on an unchanged handler when the base lacks it (`guarded_code.harm_outside`): a
change that gives the channel its errors makes the handler's fall-through wrong.
"""

from __future__ import annotations

import ast
import re

from reviewbot import pysource
from reviewbot.rules.common import callee, innermost_function, last_name


def _started(call: ast.Call) -> ast.expr | None:
    """The function a statement-level call starts on another thread, or None: the first argument of
    `.submit(f, ...)`, the second of `.run_in_executor(pool, f, ...)`, the `target=` of
    `Thread(...)` in `Thread(target=f).start()`."""
    name = callee(call)
    if name == "submit" and isinstance(call.func, ast.Attribute) and call.args:
        return call.args[0]
    if name == "run_in_executor" and len(call.args) >= 2:
        return call.args[1]
    if name == "start" and isinstance(call.func, ast.Attribute) and not call.args:
        thread = call.func.value
        if isinstance(thread, ast.Call) and callee(thread) == "Thread":
            return next((keyword.value for keyword in thread.keywords if keyword.arg == "target"), None)
    return None


def dropped_starts(tree: ast.Module) -> frozenset[str]:
    """The names of the functions the file starts on another thread in a statement that keeps
    nothing of it (an expression statement: its value, the future, is dropped)."""
    found: set[str] = set()
    for node in pysource.nodes(tree):
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)):
            continue
        target = _started(node.value)
        name = last_name(target) if target is not None else ""
        if name:
            found.add(name)
    return frozenset(found)


def in_dropped_start(tree: ast.Module, handler: ast.ExceptHandler, dropped: frozenset[str]) -> str | None:
    """The name of the function holding `handler` (the innermost one) when the file starts it with
    its handle dropped (`dropped_starts`), else None."""
    if not dropped:
        return None
    function = innermost_function(tree, handler.body[0])
    if function is None or function.name not in dropped:
        return None
    return function.name


# what a reader waits on: a queue's or a pipe's hand-over
_PUTS = frozenset(["put", "put_nowait", "send"])
_FAILURE_PARTS = frozenset(["error", "err", "failure", "failed", "exception", "exc"])


def _says_failure(value: ast.expr) -> bool:
    """`value` is built by a call whose name says failure (`_Error(msg)`, `ErrorItem(...)`)."""
    if not isinstance(value, ast.Call):
        return False
    parts = {part.lower() for part in re.split(r"_|(?<=[a-z])(?=[A-Z])", callee(value)) if part}
    return bool(parts & _FAILURE_PARTS)


def end_on_error_channel(tree: ast.Module, handler: ast.ExceptHandler, after: ast.stmt | None) -> str | None:
    """The statement after the handler's try, as written, when it puts a value on a channel
    (`q.put(_Done)`) on which the function holding the handler (nested functions included) puts a
    failure elsewhere (`q.put(_Error(msg))`): the reader of that channel can tell a failure from the
    end, and this handler, falling through, sends the end. None otherwise."""
    if not (isinstance(after, ast.Expr) and isinstance(after.value, ast.Call)):
        return None
    end = after.value
    if callee(end) not in _PUTS or not isinstance(end.func, ast.Attribute):
        return None
    channel = ast.unparse(end.func.value)
    function = innermost_function(tree, handler.body[0])
    if function is None:
        return None
    for node in pysource.walk(function):
        if (
            isinstance(node, ast.Call)
            and node is not end
            and callee(node) in _PUTS
            and isinstance(node.func, ast.Attribute)
            and ast.unparse(node.func.value) == channel
            and any(_says_failure(arg) for arg in node.args)
        ):
            return ast.unparse(after.value)
    return None
