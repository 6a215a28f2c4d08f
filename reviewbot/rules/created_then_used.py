"""A creation whose failure the next use of the created thing shows (round 24 of the precision
benchmark).

```
try:
    create_repo(repo_name, repo_type="model", private=False)
except:
    print("repo {repo_name} already exists!")
...
for file in files:
    api.upload_file(path_or_fileobj=..., repo_id=repo_name, revision=branch_name)
```

The try is one call statement whose name says it creates something (a word `create`, or `mkdir`,
`makedirs`), its value unused; the handler only passes or reports (nothing bound, nothing handed
back, the code after the try goes on). A call after the try, on the way on from it (later in its
block or in a block around it) and outside any try, hands one of the names the creation was given
(`repo_name`, a path) to another call as an argument, and nothing rebinds that name in between. The
handler is the idempotent creation ("already exists"): when the thing was not created for another
reason (authentication, a bad name, a full disk), that use fails loudly with its own error, so no
run goes on without it (gpt-neox's upload script, whose repository and branch creation print
"already exists" for any failure). What is left is a `P3`: the catch-all takes every error for the
expected one and its message may guess the cause (`exist_ok=True` is the narrow way):
`broad-except.used-after-create`.

Near misses: a try that binds or returns the creation's value, a handler that binds a substitute
or leaves (`return`, `continue`), a creation whose names no later call receives, a later use that
stands in another try or only in a report (`print(f"... {name}")`), a name rebound before the use.
"""

from __future__ import annotations

import ast
import re

from reviewbot import pysource
from reviewbot.rules.common import callee, is_logging_call, shown_level

_CREATES = re.compile(r"(?:^|_)create(?:_|$)|^create|^(?:mkdir|makedirs|mkdirs)$", re.IGNORECASE)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
# calls that only build or show text from a name, and fail for no missing resource
_TEXT_CALLS = frozenset(["str", "repr", "format", "len", "join", "print"])


def _creation(node: ast.Try | ast.TryStar) -> ast.Call | None:
    """The try's one statement when it is a call, unused, whose name says it creates something."""
    if len(node.body) != 1 or node.orelse or node.finalbody:
        return None
    stmt = node.body[0]
    if not (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)):
        return None
    return stmt.value if _CREATES.search(callee(stmt.value)) else None


def _only_reports(handler: ast.ExceptHandler) -> bool:
    return all(
        isinstance(stmt, ast.Pass)
        or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and shown_level(stmt.value) is not None)
        for stmt in handler.body
    )


def _given_names(call: ast.Call) -> set[str]:
    """The plain names the call is handed as arguments, positional or keyword."""
    values = [*call.args, *(keyword.value for keyword in call.keywords)]
    return {value.id for value in values if isinstance(value, ast.Name)}


def _way_on(tree: ast.Module, node: ast.stmt) -> list[ast.stmt] | None:
    """The statements after `node` in its block and after each statement around it in theirs, in the
    order they run (the module's or a function's body at the top); None when `node` is not found."""

    def find(block: list[ast.stmt], around: list[list[ast.stmt]]) -> list[ast.stmt] | None:
        for index, stmt in enumerate(block):
            rest = [block[index + 1 :], *around]
            if stmt is node:
                return [later for part in rest for later in part]
            if isinstance(stmt, _SCOPES) and not (stmt.lineno <= node.lineno <= (stmt.end_lineno or stmt.lineno)):
                continue
            if isinstance(stmt, _SCOPES):
                # the way on ends with the function or class that holds the try
                found = find(stmt.body, [])
                if found is not None:
                    return found
                continue
            for field in pysource.STATEMENT_LISTS:
                held = getattr(stmt, field, None)
                if not isinstance(held, list):
                    continue
                blocks = [clause.body for clause in held] if field in ("handlers", "cases") else [held]
                for inner in blocks:
                    found = find(inner, rest)
                    if found is not None:
                        return found
        return None

    return find(tree.body, [])


def _unguarded_calls(stmts: list[ast.stmt]) -> list[ast.Call]:
    """The calls of `stmts` outside any try body, handler and nested scope."""
    found: list[ast.Call] = []
    pending: list[ast.AST] = list(stmts)
    while pending:
        current = pending.pop()
        if isinstance(current, (ast.Try, ast.TryStar, *_SCOPES)):
            continue
        if isinstance(current, ast.Call):
            found.append(current)
        pending.extend(pysource.children(current))
    return found


def _rebinds(stmts: list[ast.stmt], names: set[str]) -> set[str]:
    return {
        sub.id
        for stmt in stmts
        for sub in pysource.walk(stmt)
        if isinstance(sub, ast.Name) and sub.id in names and isinstance(sub.ctx, (ast.Store, ast.Del))
    }


def used_after_create(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> str | None:
    """The created name a later unguarded call uses, when the try is a creation whose handler only
    reports (see the module docstring); None otherwise."""
    creation = _creation(node)
    if creation is None or not handler.body or not _only_reports(handler):
        return None
    names = _given_names(creation)
    if not names:
        return None
    later = _way_on(tree, node)
    if not later:
        return None
    names -= _rebinds(later, names)
    for call in _unguarded_calls(later):
        if is_logging_call(call) or shown_level(call) is not None or callee(call) in _TEXT_CALLS:
            continue
        used = _given_names(call) & names
        if used:
            return min(used)
    return None
