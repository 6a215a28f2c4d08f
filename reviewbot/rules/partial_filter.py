"""A narrow handler that tests which error it caught, handles the match and lets every other one
pass in silence (round 27 of the precision benchmark, tuned on round 27's held-out part A:
OLMo-core's S3 directory clear).

```
try:
    for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
        client.delete_object(Bucket=bucket, Key=o["Key"])
except ClientError as e:
    if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
        return
```

The handler's whole body is one `if` whose test reads the caught exception (its status, its
`errno`, its text, `isinstance(e, ...)`), with no `else:` and no `raise` in its branch; or an
`if`/`elif` chain, no final `else:`, whose tests all read it and of whose branches at least one
handles its match without `raise` (round 28's blind part A: lighteval's endpoint start-up handles a
409 by reusing the endpoint, re-raises two other texts and lets every other HTTP error through).
The test says the handler was written for the errors it matches; every other error the clause's type takes (a
403, a throttled request, a full disk) leaves the handler without a word and the code after the try
runs as if the try had succeeded. A filter that meant to let the others through ends in `raise`
(`else: raise`, or `raise` after the `if`), as the usual shape `if e.errno != errno.EEXIST: raise`
does. `P2` `broad-except.filter-falls-through`. General: it reads the handler's own shape, whatever
the exception type or the status tested. Near misses: `else: raise` or a `raise` after the `if`; an
`else:` that reports, or a chain ending in `else: raise`; an `if` whose branch raises (the inverted
filter, which passes the match), or a chain all of whose branches raise; a
handler whose base version (`dropped_raise.base_handler`: the same try body and caught types in a
function of the same name) already let the unmatched errors through, with another test (`if
is_oom(e):` written out as `if "out of memory" in str(e):`): the change did not make that fall-through.
A handler of the `RuntimeError` family is `runtime-error-fallback`'s, which reads its filters (an
out-of-memory test) and is not asked here.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.rules.common import FileContext
from reviewbot.rules.dropped_raise import base_handler


def falls_through_unmatched(ctx: FileContext, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The test (as source) of the handler's one `if`, when it picks the errors it handles and lets
    the others through in silence, and its base version did not (see the module docstring); None
    otherwise."""
    test = _unmatched_pass(handler)
    if test is None:
        return None
    earlier = base_handler(ctx, node, handler)
    return None if earlier is not None and _unmatched_pass(earlier) is not None else test


def _unmatched_pass(handler: ast.ExceptHandler) -> str | None:
    """The tests, joined with ``or``, of the handler's one `if` chain (`if` and its `elif`s, no
    final `else:`) when every test reads the caught exception and at least one branch handles its
    match without `raise`; None for any other handler."""
    if handler.name is None or len(handler.body) != 1:
        return None
    branches = _chain(handler.body[0])
    if branches is None:
        return None
    for test, _ in branches:
        if not any(isinstance(sub, ast.Name) and sub.id == handler.name for sub in pysource.walk(test)):
            return None
    if all(any(isinstance(sub, ast.Raise) for stmt in body for sub in pysource.walk(stmt)) for _, body in branches):
        return None
    return " or ".join(ast.unparse(test) for test, _ in branches)


def _chain(stmt: ast.stmt) -> list[tuple[ast.expr, list[ast.stmt]]] | None:
    """The (test, body) of each branch of an `if`/`elif` chain that has no final `else:`; None for
    any other statement or a chain that ends in `else:`."""
    branches = []
    while isinstance(stmt, ast.If):
        branches.append((stmt.test, stmt.body))
        if not stmt.orelse:
            return branches
        if len(stmt.orelse) != 1:
            return None
        stmt = stmt.orelse[0]
    return None
