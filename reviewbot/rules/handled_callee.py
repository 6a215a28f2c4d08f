"""A catch-all around a function that handles its own expected failures (round 25 of the precision
benchmark).

```
def read_memory_counter(base_path, category):
    try:
        total = int(read_sysfs_value(base_path / category / "total"))
    except (FileNotFoundError, PermissionError, ValueError):
        total = None
    ...
    return MemoryCounter(total=total, present=present, peak=peak)

for category in DEVICE_MEM_CATEGORIES:
    try:
        categories[category] = read_memory_counter(device_mem_path, category)
    except Exception:
        continue
```

The try is one statement whose only call is, by simple name, a module-level function of this file
(its arguments call nothing), and that function already turns the failures it expects into values:
it holds at least one try, every handler of its tries is narrow (no bare `except:`, `Exception` or
`BaseException`) and none raises, and every call it makes outside its tries' bodies goes to a
neutral builtin (`int`, `len`, ...) or constructs a class of this file that defines no `__init__`,
`__post_init__` or `__new__` (a dataclass or a plain record: building it runs no code of the file).
The failures the author foresaw are handled inside; what can still reach the outer catch-all is a
bug of that function, which it hides. That is `P3` `broad-except.handled-callee` (the width, a
defence in depth that hides programmer errors), not the `P2` of a fallback taken for a failure.

The criterion is general: it reads where the expected failures are already handled, not which
function or project it is. Near misses, still the swallow: a callee with a catch-all of its own or a
handler that raises, a callee that calls anything else outside its tries (an open, a request, a
method of an argument), a class with its own constructor, a try of more statements or calls.
"""

from __future__ import annotations

import ast

from reviewbot import pysource
from reviewbot.exception_index import caught_names
from reviewbot.rules.common import top_level_function

_BROAD = frozenset(["Exception", "BaseException"])
_CONSTRUCTORS = frozenset(["__init__", "__post_init__", "__new__"])


def _record_classes(tree: ast.Module) -> frozenset[str]:
    """Module-level classes of the file that define no constructor of their own."""
    return frozenset(
        stmt.name
        for stmt in tree.body
        if isinstance(stmt, ast.ClassDef)
        and not any(
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _CONSTRUCTORS
            for item in stmt.body
        )
    )


def _handles_own_failures(
    function: ast.FunctionDef | ast.AsyncFunctionDef, neutral: frozenset[str], records: frozenset[str]
) -> bool:
    tries = [node for node in pysource.walk(function) if isinstance(node, (ast.Try, ast.TryStar))]
    if not tries:
        return False
    guarded: set[int] = set()
    for node in tries:
        for handler in node.handlers:
            names = caught_names(handler)
            if names is None or _BROAD & set(names):
                return False
            if any(isinstance(sub, ast.Raise) for stmt in handler.body for sub in pysource.walk(stmt)):
                return False
        guarded.update(id(sub) for stmt in node.body for sub in pysource.walk(stmt))
    return all(
        isinstance(sub.func, ast.Name) and (sub.func.id in neutral or sub.func.id in records)
        for sub in pysource.walk(function)
        if isinstance(sub, ast.Call) and id(sub) not in guarded
    )


def handled_callee(tree: ast.Module, node: ast.Try | ast.TryStar, neutral: frozenset[str]) -> str | None:
    """The function of this file the try's one statement calls, when it handles its own expected
    failures (see the module docstring); `neutral`: the builtins whose calls count as no code run.
    None otherwise."""
    if len(node.body) != 1:
        return None
    calls = [sub for sub in pysource.walk(node.body[0]) if isinstance(sub, ast.Call)]
    if len(calls) != 1 or not isinstance(calls[0].func, ast.Name):
        return None
    function = top_level_function(tree, calls[0].func.id)
    if function is None or not _handles_own_failures(function, neutral, _record_classes(tree)):
        return None
    return function.name
