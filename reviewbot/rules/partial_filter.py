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
`errno`, its text, `isinstance(e, ...)`), with no `else:` and no `raise` in its branch. The test says
the handler was written for the errors it matches; every other error the clause's type takes (a
403, a throttled request, a full disk) leaves the handler without a word and the code after the try
runs as if the try had succeeded. A filter that meant to let the others through ends in `raise`
(`else: raise`, or `raise` after the `if`), as the usual shape `if e.errno != errno.EEXIST: raise`
does. `P2` `broad-except.filter-falls-through`. General: it reads the handler's own shape, whatever
the exception type or the status tested. Near misses: `else: raise` or a `raise` after the `if`; an
`else:` that reports; an `if` whose branch raises (the inverted filter, which passes the match); a
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
    """The test of the handler's one `if`, with no `else:` and no `raise`, that reads the caught
    exception; None for any other handler."""
    if handler.name is None or len(handler.body) != 1:
        return None
    stmt = handler.body[0]
    if not isinstance(stmt, ast.If) or stmt.orelse:
        return None
    if not any(isinstance(sub, ast.Name) and sub.id == handler.name for sub in pysource.walk(stmt.test)):
        return None
    if any(isinstance(sub, ast.Raise) for branch in stmt.body for sub in pysource.walk(branch)):
        return None
    return ast.unparse(stmt.test)
