"""A version shim: an import whose fallback binds the same names to equivalents (round 25 of the
precision benchmark).

```
try:
    from torch.linalg import LinAlgError
except:
    LinAlgError = RuntimeError
```

The try holds only absolute imports of modules outside the repository, and the handler only binds
every name they bind, and nothing else, to a value at hand (a name or an attribute of one, no call:
`LinAlgError = RuntimeError`, `Literal = typing_extensions.Literal`) or imports those names from
elsewhere (`from typing_extensions import Literal`). Whichever way runs, the code after it finds the
same names with the same meaning: an older library without the name, or a layout that moved it,
takes the stand-in the author chose in code (brevitas's `LinAlgError` on a PyTorch before 1.13).
No code of the repository runs in the try, and no value flows on in place of a result.

The criterion is general: it reads what the fallback is for (the same names, bound again for an
older or other version), not which library or name it is. `broad_except` leaves such a handler
alone under `except Exception`; a bare `except:` or `except BaseException:` is `P3`
`broad-except.shim-catches-exit`, like the confined try's: it also takes Ctrl+C and `sys.exit()`
for the failed import. Near misses, still read by the other classes: a handler that binds a flag or
`None` (an optional dependency, `_optional_dependency`), binds only some of the names, calls
something (`LinAlgError = make_error()`), or does anything else; an import of the repository's own
modules (a relative import, or a top-level name that is a folder of the file's path: a broken build
is a bug the stand-in hides).
"""

from __future__ import annotations

import ast

from reviewbot.rules.common import bound_by_import


def _at_hand(value: ast.expr) -> bool:
    while isinstance(value, ast.Attribute):
        value = value.value
    return isinstance(value, ast.Name)


def _outside(stmt: ast.stmt, folders: set[str]) -> bool:
    """An absolute import of modules none of whose top-level names is a folder of the file's path."""
    if isinstance(stmt, ast.ImportFrom):
        return not stmt.level and (stmt.module or "").split(".")[0] not in folders
    return isinstance(stmt, ast.Import) and all(alias.name.split(".")[0] not in folders for alias in stmt.names)


def version_shim(path: str, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> list[str] | None:
    """The names the shim binds (sorted) when `node`'s body only imports modules outside the repository
    (`path`: the file's path in it) and `handler` binds exactly those names again to values at hand
    or by other imports (see the module docstring); None otherwise."""
    if node.orelse or node.finalbody or not node.body or not handler.body:
        return None
    folders = set(path.split("/")[:-1])
    imported: set[str] = set()
    for stmt in node.body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom)) or not _outside(stmt, folders):
            return None
        imported |= bound_by_import(stmt)
    rebound: set[str] = set()
    for stmt in handler.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)) and _outside(stmt, folders):
            rebound |= bound_by_import(stmt)
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and _at_hand(stmt.value)
        ):
            rebound.add(stmt.targets[0].id)
        else:
            return None
    return sorted(imported) if rebound == imported else None
