"""Parsing the Python sources of a reviewed revision: anything its author wrote, so a file CPython
cannot turn into an AST is skipped (and reported by the caller), never the end of a review.

`parse(source)` parses once; `Trees` is one review's memo of `parse` by source text, so a blob
read at both revisions, or by several parts of the review, is parsed once; `walk(node)` is
`ast.walk` without its per-node generators (`children(node)`: `ast.iter_child_nodes`);
`nodes(tree)` is `walk(tree)` as a tuple, computed once per tree object for the passes that each
read a whole module (`PerTree`: any such per-tree memo); `statements(node)` walks statement lists
only."""

from __future__ import annotations

import ast
import gc
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Generic, Self, TypeVar

T = TypeVar("T")

_collector = threading.Lock()
_open_blocks = 0
_collector_was_on = False


def _pause_collector() -> None:
    global _open_blocks, _collector_was_on
    with _collector:
        if _open_blocks == 0:
            _collector_was_on = gc.isenabled()
            gc.disable()
        _open_blocks += 1


def _resume_collector() -> None:
    global _open_blocks
    with _collector:
        assert _open_blocks > 0, "a Trees block closed more often than opened"
        _open_blocks -= 1
        if _open_blocks == 0 and _collector_was_on:
            gc.enable()


def parse(source: str, filename: str = "<unknown>") -> ast.Module | None:
    """The module's AST, or None when CPython cannot build one: a syntax error, a NUL byte (a
    ValueError on Python 3.11), or nesting deeper than its parser takes (MemoryError for a parser
    stack overflow, RecursionError for deep expressions)."""
    try:
        return ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None


def parse_error(source: str, filename: str = "<unknown>") -> str:
    """Why `parse` gives None for `source`, in one line (`invalid syntax at line 311`); asserts that
    it does give None."""
    try:
        ast.parse(source, filename=filename)
    except SyntaxError as error:
        return f"{error.msg} at line {error.lineno}"
    except (ValueError, MemoryError, RecursionError) as error:
        return f"{type(error).__name__}: {error}"
    raise AssertionError(f"{filename} parses")


class Trees:
    """The ASTs of one review: `parse` of each distinct source text, computed once and shared.

    Owned by one review (`engine.run_review` opens one for its static stages and hands it to the
    exception index, the cache-key closure and the file rules) and dropped with it: never a
    process-wide cache, and not shared between threads. Every reader gets the same tree objects,
    so the trees are read-only by contract: no reader may change a node (the closure's `digest`
    takes docstrings out of a definition for one `ast.dump` and restores them before it returns).
    `filename` only names the file in a warning the parser gives; the first caller's name is kept.

    Used as a context manager (`with Trees() as trees:`), it pauses Python's cyclic garbage
    collector until the block ends, then drops its trees and restores the collector's previous
    state. The trees are millions of acyclic nodes that reference counting frees, and each
    automatic collection meanwhile would traverse them all for nothing (about half of a large
    repository's static review); dropped before the collector resumes, they cost it nothing.
    Cyclic garbage made meanwhile waits for the next collection. The collector is one per
    process: another thread does not get it during the block. Open blocks are counted process-wide
    (a worker runs reviews in several threads, whose blocks overlap in any order): the first to open
    records the collector's state and pauses it, the last to close restores that state.
    """

    def __init__(self) -> None:
        self._trees: dict[str, ast.Module | None] = {}

    def __enter__(self) -> Self:
        _pause_collector()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._trees.clear()
        _resume_collector()

    def parse(self, source: str, filename: str = "<unknown>") -> ast.Module | None:
        """`parse(source, filename)`, once per distinct `source` text."""
        if source not in self._trees:
            self._trees[source] = parse(source, filename)
        return self._trees[source]

    def __len__(self) -> int:
        return len(self._trees)


def children(node: ast.AST) -> list[ast.AST]:
    """`list(ast.iter_child_nodes(node))`, in its order, without its generators."""
    out: list[ast.AST] = []
    for name in node._fields:
        value = getattr(node, name, None)
        if isinstance(value, ast.AST):
            out.append(value)
        elif isinstance(value, list):
            out.extend([item for item in value if isinstance(item, ast.AST)])
    return out


def shared_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names `function` declares `global` or `nonlocal` anywhere in its body."""
    return {name for node in walk(function) if isinstance(node, (ast.Global, ast.Nonlocal)) for name in node.names}


def walk(node: ast.AST) -> Iterator[ast.AST]:
    """The nodes `ast.walk(node)` yields, in the same (breadth-first) order and as lazily, in about
    half its time: the children are read from `_fields` here, not through `ast.iter_child_nodes`."""
    node_type = ast.AST
    todo = deque([node])
    while todo:
        node = todo.popleft()
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, node_type):
                todo.append(value)
            elif isinstance(value, list):
                todo.extend([item for item in value if isinstance(item, node_type)])
        yield node


class PerTree(Generic[T]):
    """`compute(tree)` memoized per tree object while the tree lives (a weak key: dropping the tree
    drops its entry; `memo` holds them). The tree must not change afterwards, which `Trees` makes
    the contract of every parsed source, and the value must not refer to the tree, or its entry
    never goes. `compute` stays callable on its own as `fresh`."""

    def __init__(self, compute: Callable[[ast.AST], T]) -> None:
        self.fresh = compute
        self.memo: weakref.WeakKeyDictionary[ast.AST, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def __call__(self, tree: ast.AST) -> T:
        with self._lock:
            found = self.memo.get(tree)
        if found is None:
            found = self.fresh(tree)
            with self._lock:
                self.memo[tree] = found
        return found


@PerTree
def _below(tree: ast.AST) -> tuple[ast.AST, ...]:
    return tuple(walk(tree))[1:]  # without the tree itself: the entry must not hold its own key


def nodes(tree: ast.AST) -> tuple[ast.AST, ...]:
    """`tuple(walk(tree))`, computed once per tree object (`PerTree`). For whole modules that many
    passes read through: a subtree given here is kept as well, so per-node callers use `walk`."""
    return (tree, *_below(tree))


STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def statements(node: ast.AST) -> Iterator[ast.stmt]:
    """Every statement nested in `node` (not `node` itself), at any depth, depth first in source
    order: the statements of its statement lists (`body`, `orelse`, `finalbody`, those of `try`
    handlers and `match` cases), then theirs. Every def, class, `if` or `try` is among them (no
    expression holds a statement), and it is several times cheaper than `ast.walk`."""
    for field in STATEMENT_LISTS:
        children = getattr(node, field, None)
        if not isinstance(children, list):  # a lambda's or conditional expression's `body` is one expression
            continue
        for child in children:
            if isinstance(child, ast.stmt):
                yield child
            yield from statements(child)
