"""A failed read of a cache taken for a miss (round 22 of the precision benchmark).

`try: path = _cache_file_path(name); with open(path, "rb") as f: return dill.loads(f.read())` /
`except Exception: log.debug("%s is not cached, generating...", name)` (lm-evaluation-harness's
request cache) and `try: _ = self._load(self._cache_file); return False` / `except Exception:
os.remove(self._cache_file); return True` (Horovod's check cache): what the try reads is a cache, a
copy the code can compute again, and the handler answers "nothing cached" (or deletes the unreadable
entry). Whatever the catch-all takes, a corrupt file, a format from another version, a bug in the
reader, the cost is a recomputation, not a wrong result: the value the caller goes on with is
computed from the source, as on a first run. Nothing is reported.

`cache_miss` asks, of a catch-all handler in a function: the try's own statements (not nested defs)
name a cache (an identifier holding "cache": `_cache_file_path`, `self._cache_file`, `cache_dir`)
and read (`open(...)` without a write mode, a call whose name holds "load" or "read"), and write
nothing (no `open` for writing, no call whose name holds "dump", "save", "write", "put" or "store",
no assignment to an attribute or an item: a partial write into a cache is the harm a swallow
hides, diffusers' package map), every call's value bound or returned (a call standing alone is
made for its effect: `self.cache.load(rank)` warms a cache up, round 16's skipped step); the handler only logs, passes, removes files (`os.remove`,
`.unlink()`) and returns a constant or nothing, binding nothing; a handler that falls through ends
its function (the try is the function's last statement), so the caller gets `None`. Near misses: a
read of a file not named a cache (`config.json`), a try that also writes the cache, a handler that
computes a substitute (`return rebuild()`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.rules.common import callee, innermost_function, is_logging_call

_READS = ("load", "read")
_WRITES = ("dump", "save", "write", "put", "store")
_REMOVALS = frozenset(["remove", "unlink", "rmtree"])


def _own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of `body`, not entering nested functions, lambdas or classes."""
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(pysource.children(node))


def _identifier(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _open_mode(call: ast.Call) -> str:
    mode = call.args[1] if len(call.args) > 1 else next((k.value for k in call.keywords if k.arg == "mode"), None)
    return mode.value if isinstance(mode, ast.Constant) and isinstance(mode.value, str) else "r"


def _reads_cache(body: list[ast.stmt]) -> bool:
    names_cache = reads = False
    for node in _own_nodes(body):
        if "cache" in _identifier(node).lower():
            names_cache = True
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(not isinstance(sub, (ast.Name, ast.Tuple, ast.List, ast.Starred)) for sub in targets):
                return False
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and not is_logging_call(node.value):
            return False  # a call for its effect (`self.cache.load(rank)` warms the cache up)
        if not isinstance(node, ast.Call):
            continue
        name = callee(node).lower()
        if name == "open":
            if set(_open_mode(node)) & set("wax+"):
                return False
            reads = True
        elif any(word in name for word in _WRITES):
            return False
        elif any(word in name for word in _READS):
            reads = True
    return names_cache and reads


def _answers_miss(stmt: ast.stmt) -> bool:
    if isinstance(stmt, ast.Pass):
        return True
    if isinstance(stmt, ast.Return):
        return stmt.value is None or isinstance(stmt.value, ast.Constant)
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return is_logging_call(stmt.value) or callee(stmt.value) in _REMOVALS
    return False


def cache_miss(tree: ast.Module, node: ast.Try | ast.TryStar, handler: ast.ExceptHandler) -> bool:
    """The try reads a cache and the handler answers "nothing cached" (see the module docstring)."""
    if not handler.body or not all(_answers_miss(stmt) for stmt in handler.body):
        return False
    function = innermost_function(tree, node)
    if function is None or not _reads_cache(node.body):
        return False
    if isinstance(handler.body[-1], ast.Return):
        return True
    return function.body[-1] is node
