"""The reviewed repository's own exception classes, from an AST scan of its Python files.

    index = index_exceptions(root)          # root: a checkout (worktree) of one revision
    index = index_revision(git, rev)         # the same, read from git's object store
    index.subclasses_of("RuntimeError")      # the repository's classes a `except RuntimeError` catches
    index.get("CacheMissError")              # one class by simple or qualified name, or None
    index.handlers_of("XUnsupportedError")   # the `except` clauses naming a type, and whether they re-raise
    index.raised_in("CacheMissError")        # the modules with a `raise CacheMissError...`

A class is an exception class when it (transitively) subclasses a builtin exception
(`builtins.BaseException` and every builtin below it). Bases are resolved by their last name
segment (`torch.fx.Error` counts as `Error`): first against the repository's own classes, then
against the builtins; a base defined by a third-party package (`torch.OutOfMemoryError`) is kept in
`bases` but not followed, so a class deriving only from it is not indexed. Classes nested in
functions are skipped (they cannot be raised across modules); classes nested in classes are
indexed under their dotted `qualname`. Files that do not parse, and the directories named in
`SKIP_DIRS`, are skipped. Nothing is imported or executed. What the scan takes from a file does not
depend on its path (`file_entry`); a review keeps it in the repository's facts cache
(`reviewbot.index_cache`) under the digest of the file's git blob id and of the scanner's code, so a
later review reads and parses only the files that changed in between.

The index also lists every `except` clause of the revision by the simple names it catches
(`handlers_of`), so a rule can tell whether a type some handler converts into is caught elsewhere
(one frame up, to fall back), with the names each clause's try body calls; `reaching(names)` follows
the revision's calls backwards (by simple name, from the calls each function's body makes) so such a clause counts only
when its try body can run the converting function. A handler *re-raises* when a statement directly in its body is a
bare `raise` or `raise <the caught name>` (`reraises_same`).

Two classes with the same simple name in different modules are both kept; `subclasses_of` and
`get` by simple name then consider both (the scan cannot tell which one an import means).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import hashlib
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from reviewbot import gitrepo, pysource
from reviewbot.gitrepo import GitRepo
from reviewbot.index_cache import FactsCache

logger = logging.getLogger(__name__)

# an import of torch or of a module that is a torch binding by its name: a path component `torch` or
# `pytorch` (`safetensors.torch`, `lightning.pytorch`), or the package `pytorch_lightning` (round
# 23: NeMo's export API imports only `lightning.pytorch`, whose trainer runs torch)
_TORCH_IMPORT = re.compile(r"^\s*(?:import|from)\s+(?:\w+\.)*(?:torch|pytorch|pytorch_lightning)\b", re.MULTILINE)

SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", "build", "dist", ".tox"})

# how many calls up `ExceptionIndex.reaching` follows
CALL_DEPTH = 8

BUILTIN_EXCEPTIONS: dict[str, type[BaseException]] = {
    name: obj for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
}


@dataclasses.dataclass(frozen=True)
class ExceptionClass:
    """One exception class of the repository.

    `name`: the simple class name; `qualname`: dotted within its module (`Outer.Inner`); `module`:
    dotted module path derived from `path` (`pkg.sub.mod`, `pkg` for `pkg/__init__.py`); `path`:
    POSIX path relative to the scanned root; `line`: 1-based line of the `class` statement; `bases`:
    the base expressions as written (`("torch.fx.Error", "CacheError")`).
    """

    name: str
    qualname: str
    module: str
    path: str
    line: int
    bases: tuple[str, ...]

    @property
    def full_name(self) -> str:
        """`module.qualname`, the name to show in a finding."""
        return f"{self.module}.{self.qualname}" if self.module else self.qualname


@dataclasses.dataclass(frozen=True)
class CatchSite:
    """One `except` clause: `path` (relative, POSIX), `line` of the `except`, `caught` (last name
    segment of each caught type, empty for a bare `except:`), `reraises` (see `reraises_same`),
    `try_lines` (first and last line of its try body) and `body_calls` (`call_names` of the try
    body: the simple names it calls or passes as callbacks)."""

    path: str
    line: int
    caught: tuple[str, ...]
    reraises: bool
    try_lines: tuple[int, int] = (0, 0)
    body_calls: frozenset[str] = frozenset()


def reraises_same(handler: ast.ExceptHandler) -> bool:
    """A statement directly in the handler's body passes the caught exception on unchanged:
    `raise` or `raise <name>` for `except ... as <name>` (a raise under a condition does not count)."""
    for stmt in handler.body:
        if isinstance(stmt, ast.Raise):
            if stmt.exc is None:
                return True
            if handler.name and isinstance(stmt.exc, ast.Name) and stmt.exc.id == handler.name:
                return True
    return False


def call_names(nodes: list[ast.stmt] | list[ast.AST]) -> frozenset[str]:
    """The simple names `nodes` call (`f()`, `obj.f()`: `f`; a class call names the class) or pass
    to a call as an argument (`pool.submit(f)`, `Thread(target=self.f)`: `f`, a callback that may
    run there)."""
    out: set[str] = set()
    for node in nodes:
        for sub in pysource.walk(node):
            if not isinstance(sub, ast.Call):
                continue
            for expr in (sub.func, *sub.args, *(k.value for k in sub.keywords)):
                name = _base_name(expr)
                if name is not None:
                    out.add(name)
    return frozenset(out)


def caught_names(handler: ast.ExceptHandler) -> list[str] | None:
    """Last name segment of every type an `except` clause names; None for a bare `except:`."""
    if handler.type is None:
        return None
    elts = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    names = []
    for elt in elts:
        if isinstance(elt, ast.Name):
            names.append(elt.id)
        elif isinstance(elt, ast.Attribute):
            names.append(elt.attr)
    return names


@dataclasses.dataclass(frozen=True)
class ExceptionIndex:
    """The exception classes of one revision and their resolved builtin ancestors."""

    classes: tuple[ExceptionClass, ...]
    # full_name -> names of the builtin exceptions it derives from (transitively, including their bases)
    _builtin_ancestors: dict[str, frozenset[str]]
    # full_name -> full names of repository classes it derives from (transitively)
    _repo_ancestors: dict[str, frozenset[str]]
    # simple caught name -> the except clauses naming it
    _handlers: dict[str, tuple[CatchSite, ...]] = dataclasses.field(default_factory=dict)
    # simple name -> modules with a `raise <name>` / `raise <name>(...)` statement
    _raised_in: dict[str, frozenset[str]] = dataclasses.field(default_factory=dict)
    # (name, `call_names` of its body, `_always_raises`) of every function and method, for the call
    # graph `reaching` and `always_raises` build on first use
    _functions: tuple[tuple[str, frozenset[str], bool], ...] = dataclasses.field(default=(), repr=False, compare=False)
    # some scanned file imports torch (or a torch binding, `_TORCH_IMPORT`): without that, no code of
    # the revision can raise torch's `OutOfMemoryError` or Dynamo's errors (third-party code the
    # revision calls included, as far as it is reached through torch)
    torch_imported: bool = False
    # how many Python files were scanned (those that parse)
    files: int = 0

    @functools.cached_property
    def _callers(self) -> dict[str, frozenset[str]]:
        """simple name -> simple names of the functions whose bodies call it (`call_names`)."""
        callers: dict[str, set[str]] = {}
        for name, calls, _ in self._functions:
            for called in calls:
                callers.setdefault(called, set()).add(name)
        return {name: frozenset(found) for name, found in callers.items()}

    @functools.cached_property
    def _raising(self) -> dict[str, bool]:
        """simple function name -> whether every definition of that name always raises."""
        out: dict[str, bool] = {}
        for name, _, raises in self._functions:
            out[name] = out.get(name, True) and raises
        return out

    def always_raises(self, name: str) -> bool:
        """The revision defines a function or method of simple name `name`, and every such definition
        ends in a `raise` with no `return` or `yield` before it (a helper that builds and raises an
        error: calling it converts, it never returns)."""
        return self._raising.get(name, False)

    def reaching(self, names: set[str], depth: int = CALL_DEPTH) -> frozenset[str]:
        """`names` and the simple names of the functions that call one of them, transitively up to
        `depth` calls, matched by simple name (a method `f` of any class counts as `f`): every
        function from which one of `names` may run. The call graph is built on the first call."""
        found = set(names)
        frontier = set(names)
        for _ in range(depth):
            frontier = {c for name in frontier for c in self._callers.get(name, ())} - found
            if not frontier:
                break
            found |= frontier
        return frozenset(found)

    def raised_in(self, name: str) -> list[str]:
        """Modules (dotted, as `ExceptionClass.module`) holding a `raise` of the class `name` (matched
        by its last segment; `raise X(...)`, `raise X`, `raise mod.X(...)`), sorted."""
        return sorted(self._raised_in.get(name.rsplit(".", 1)[-1], ()))

    def ancestors_of(self, name: str) -> list[ExceptionClass]:
        """The repository classes the class `name` (simple, qualified or `module.qualname`) derives
        from, transitively, in path and line order; empty for builtins and unknown names."""
        own = {c.full_name for c in self.classes if name in (c.name, c.qualname, c.full_name)}
        bases = set().union(*(self._repo_ancestors[n] for n in own)) if own else set()
        return [c for c in self.classes if c.full_name in bases]

    def handlers_of(self, name: str) -> list[CatchSite]:
        """The `except` clauses of the revision that name `name` (simple or dotted; matched by its
        last segment), in path and line order. Clauses naming only a base class are not included."""
        return list(self._handlers.get(name.rsplit(".", 1)[-1], ()))

    def get(self, name: str) -> ExceptionClass | None:
        """The class named `name` (simple name, qualname or `module.qualname`); None when absent.
        With several classes of one simple name, the first in path order."""
        for cls in self.classes:
            if name in (cls.name, cls.qualname, cls.full_name):
                return cls
        return None

    def subclasses_of(self, name: str) -> list[ExceptionClass]:
        """The repository's classes an `except <name>` catches, excluding `name` itself, in
        path, then line order.

        `name` is a builtin exception (`RuntimeError`, `Exception`, `OSError`) or one of the
        repository's own classes (simple name, qualname or `module.qualname`); a dotted name is
        matched by its last segment when it is not a repository class (`builtins.RuntimeError`).
        Unknown names give an empty list.
        """
        if not name:
            raise ValueError("subclasses_of needs a class name")
        own = {c.full_name for c in self.classes if name in (c.name, c.qualname, c.full_name)}
        if own:
            return [c for c in self.classes if self._repo_ancestors[c.full_name] & own]
        simple = name.rsplit(".", 1)[-1]
        if simple not in BUILTIN_EXCEPTIONS:
            return []
        return [c for c in self.classes if simple in self._builtin_ancestors[c.full_name]]

    def __len__(self) -> int:
        return len(self.classes)


def _always_raises(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """The body's last statement is a `raise` and nothing in it (nested functions aside) returns or yields."""
    if not node.body or not isinstance(node.body[-1], ast.Raise):
        return False
    pending: list[ast.AST] = list(node.body)
    while pending:
        sub = pending.pop()
        if isinstance(sub, (ast.Return, ast.Yield, ast.YieldFrom)):
            return False
        if not isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(sub))
    return True


def module_name(path: str) -> str:
    """The dotted module of a repository-relative `.py` path (`pkg/sub/mod.py` -> `pkg.sub.mod`,
    `pkg/__init__.py` -> `pkg`), as in `ExceptionClass.module`."""
    return _module_name(Path(path))


def _module_name(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _skipped(rel: str) -> bool:
    return any(part in SKIP_DIRS for part in rel.split("/")[:-1])


def _classes(tree: ast.Module) -> Iterator[tuple[str, ast.ClassDef]]:
    """(qualname, node) of module-level classes and classes nested in them."""

    def visit(body: list[ast.stmt], prefix: str) -> Iterator[tuple[str, ast.ClassDef]]:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = f"{prefix}{node.name}"
                yield qualname, node
                yield from visit(node.body, qualname + ".")
            elif isinstance(node, (ast.If, ast.Try)):
                # classes defined under `if TYPE_CHECKING:` / `try: ... except ImportError:` still count
                yield from visit(node.body, prefix)
                yield from visit(node.orelse, prefix)
                for handler in getattr(node, "handlers", []):
                    yield from visit(handler.body, prefix)

    yield from visit(tree.body, "")


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in `body` at any depth (inside functions, classes, `try` clauses, `match`
    cases); walks statements only, which is several times cheaper than `ast.walk` over a module."""
    for stmt in body:
        yield stmt
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            for child in getattr(stmt, field, None) or ():
                if isinstance(child, (ast.ExceptHandler, ast.match_case)):
                    yield from _statements(child.body)
                elif isinstance(child, ast.stmt):
                    yield from _statements([child])


def _base_name(expr: ast.expr) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    return None


def index_exceptions(root: Path) -> ExceptionIndex:
    """Scan every `.py` file under `root` (a checkout of one revision) for exception classes.

    `root` must be an existing directory. Cost: one `ast.parse` per file, no imports.
    """
    root = Path(root)
    if not root.is_dir():
        raise ValueError(f"index_exceptions: {root} is not a directory")
    sources: dict[str, str] = {}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if not _skipped(rel) and path.is_file():
            sources[rel] = path.read_text(encoding="utf-8", errors="replace")
    return index_sources(sources)


def index_revision(
    git: GitRepo, rev: str, trees: pysource.Trees | None = None, cache: FactsCache | None = None
) -> ExceptionIndex:
    """`index_exceptions` of revision `rev` of `git`, read from the object store (no checkout);
    `trees`: the review's parsed sources, to reuse. `cache`: the repository's facts cache, keyed by
    each file's git blob id (`blob_digest`, which `git ls-tree` lists without reading a blob): a
    file whose entry it holds is neither read nor parsed, and the entries computed are stored in it
    (a file that does not read as text, binary or not a path git can read, is read again on the
    next review and never stored, so no entry depends on the path it was read at)."""
    trees = trees if trees is not None else pysource.Trees()
    blobs = {rel: oid for rel, oid in git.list_blobs(rev) if rel.endswith(".py") and not _skipped(rel)}
    digests = {rel: blob_digest(oid) for rel, oid in blobs.items()} if cache is not None else {}
    known = cache.get(set(digests.values())) if cache is not None else {}
    entries: dict[str, list] = {}
    computed: dict[str, list] = {}
    for rel in sorted(blobs):
        digest = digests.get(rel)
        if digest in known:
            entries[rel] = known[digest]
            continue
        text = git.read(rev, rel)
        if text is None:
            continue
        entries[rel] = file_entry(text, rel, trees)
        if digest is not None:
            computed[digest] = entries[rel]
    if cache is not None:
        cache.put(computed)
    return _index(entries)


@functools.cache
def _scanner_digest() -> bytes:
    """What the facts of a file depend on besides its content: this module's and `pysource`'s code,
    `gitrepo`'s (which decodes a blob into text) and the Python version whose parser reads it."""
    digest = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for module_file in (__file__, pysource.__file__, gitrepo.__file__):
        digest.update(Path(module_file).read_bytes())
    return digest.digest()


def blob_digest(oid: str) -> str:
    """The cache key of one file's entry: its git blob id (which names its content) and the
    scanner's code."""
    return hashlib.sha256(_scanner_digest() + b"git blob " + oid.encode("ascii")).hexdigest()


def file_entry(text: str, filename: str, trees: pysource.Trees) -> list:
    """What the index keeps of one file (JSON-ready, for `reviewbot.index_cache`): [`file_facts`,
    whether it imports torch], the second read from the text even where it does not parse."""
    return [file_facts(text, filename, trees), _TORCH_IMPORT.search(text) is not None]


def file_facts(text: str, filename: str, trees: pysource.Trees) -> dict[str, list] | None:
    """What the index takes from one file, independent of its path (JSON-ready, for
    `reviewbot.index_cache`): `classes` ([qualname, name, line, bases as written, their last name
    segments]), `sites` ([except line, caught names, re-raises, [try body's first, last line], the try
    body's `call_names`]), `raised` (the names a `raise` names) and `functions` ([name, `call_names`
    of its body, `_always_raises`]); None when the file does not parse."""
    tree = trees.parse(text, filename=filename)
    if tree is None:
        return None
    sites: list[list] = []
    raised: set[str] = set()
    functions: list[list] = []
    for node in _statements(tree.body):
        if isinstance(node, (ast.Try, ast.TryStar)):
            body_calls = sorted(call_names(node.body))
            lines = [node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno]
            for handler in node.handlers:
                caught = caught_names(handler) or []
                sites.append([handler.lineno, caught, reraises_same(handler), lines, body_calls])
        elif isinstance(node, ast.Raise) and node.exc is not None:
            raised_name = _base_name(node.exc.func if isinstance(node.exc, ast.Call) else node.exc)
            if raised_name is not None:
                raised.add(raised_name)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append([node.name, sorted(call_names(node.body)), _always_raises(node)])
    classes = [
        [qualname, node.name, node.lineno, [ast.unparse(b) for b in node.bases], [_base_name(b) for b in node.bases]]
        for qualname, node in _classes(tree)
        if node.bases
    ]
    return {"classes": classes, "sites": sites, "raised": sorted(raised), "functions": functions}


def index_sources(sources: Mapping[str, str], trees: pysource.Trees | None = None) -> ExceptionIndex:
    """The index of `sources` (POSIX path relative to the repository root -> file text). `trees`:
    the review's parsed sources (read-only, shared with the rest of the review); a fresh one by
    default."""
    trees = trees if trees is not None else pysource.Trees()
    return _index({rel: file_entry(sources[rel], rel, trees) for rel in sorted(sources)})


def _index(entries: Mapping[str, list]) -> ExceptionIndex:
    """The index of the files' `file_entry`s (POSIX path relative to the repository root -> entry),
    read in path order."""
    candidates: list[tuple[ExceptionClass, tuple[str | None, ...]]] = []
    handlers: dict[str, list[CatchSite]] = {}
    raised: dict[str, set[str]] = {}
    functions: list[tuple[str, frozenset[str], bool]] = []
    files = 0
    for rel_text in sorted(entries):
        facts = entries[rel_text][0]
        if facts is None:
            logger.debug("exception index: %s does not parse; skipped", rel_text)
            continue
        files += 1
        module = _module_name(Path(rel_text))
        for line, caught, reraises, (first, last), body_calls in facts["sites"]:
            site = CatchSite(rel_text, line, tuple(caught), reraises, (first, last), frozenset(body_calls))
            for name in caught:
                handlers.setdefault(name, []).append(site)
        for name in facts["raised"]:
            raised.setdefault(name, set()).add(module)
        functions.extend((name, frozenset(calls), raises) for name, calls, raises in facts["functions"])
        for qualname, name, line, bases, base_names in facts["classes"]:
            cls = ExceptionClass(
                name=name, qualname=qualname, module=module, path=rel_text, line=line, bases=tuple(bases)
            )
            candidates.append((cls, tuple(base_names)))

    by_simple: dict[str, list[str]] = {}
    for cls, _ in candidates:
        by_simple.setdefault(cls.name, []).append(cls.full_name)
    base_names = {cls.full_name: names for cls, names in candidates}

    builtin_memo: dict[str, frozenset[str]] = {}
    repo_memo: dict[str, frozenset[str]] = {}

    def resolve(full_name: str, seen: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
        if full_name in builtin_memo:
            return builtin_memo[full_name], repo_memo[full_name]
        found_builtins: set[str] = set()
        found_repo: set[str] = set()
        for base in base_names[full_name]:
            if base is None:
                continue
            own = [b for b in by_simple.get(base, []) if b not in seen and b != full_name]
            for target in own:
                b_builtins, b_repo = resolve(target, seen | {full_name})
                found_builtins |= b_builtins
                found_repo |= b_repo | {target}
            if not own and base in BUILTIN_EXCEPTIONS:
                found_builtins |= {k.__name__ for k in BUILTIN_EXCEPTIONS[base].__mro__ if k is not object}
        builtin_memo[full_name] = frozenset(found_builtins)
        repo_memo[full_name] = frozenset(found_repo)
        return builtin_memo[full_name], repo_memo[full_name]

    classes: list[ExceptionClass] = []
    for cls, _ in candidates:
        if resolve(cls.full_name, frozenset())[0]:
            classes.append(cls)
    kept = {c.full_name for c in classes}
    return ExceptionIndex(
        classes=tuple(classes),
        _builtin_ancestors={name: builtin_memo[name] for name in kept},
        _repo_ancestors={name: repo_memo[name] & kept for name in kept},
        _handlers={name: tuple(sorted(sites, key=lambda c: (c.path, c.line))) for name, sites in handlers.items()},
        _raised_in={name: frozenset(modules) for name, modules in raised.items()},
        _functions=tuple(functions),
        files=files,
        torch_imported=any(torch for _, torch in entries.values()),
    )
