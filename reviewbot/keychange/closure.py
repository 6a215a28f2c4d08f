"""Static closure of the cache-key roots at one revision, read from git blobs (no code runs).

From each configured root (`pkg.mod.func`, `pkg.mod.Class` or `pkg.mod.Class.method`) the closure
follows the module-level names a definition references: functions it calls, classes, module
constants, and names imported from modules of the same repository (relative imports included).
Classes are taken whole (fields, methods, decorators). A method root is taken alone (kind `method`,
qualified `pkg.mod.Class.method`): the closure follows what its body calls, including the
class's own members reached through its first parameter (`self.helper()`, `cls.ATTR`) or the class
name (kind `method` or `attribute`), and never the class's other members. A member the class does
not define is looked up in its base classes from the same repository. Each item's digest is the `ast.dump` of its definition with docstrings
removed and positions ignored, so comments, docstrings and formatting never count as a change.
Names from outside the repository (torch, the standard library) end the walk. Modules are found at
the repository root or under a `src/` or `python/` source directory (`pkg.mod` is `pkg/mod.py`,
`src/pkg/mod.py` or `python/pkg/mod.py`, first found wins).
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
from collections.abc import Iterator

from reviewbot import pysource
from reviewbot.gitrepo import GitRepo


@dataclasses.dataclass(frozen=True)
class ClosureItem:
    name: str
    kind: str  # function | class | constant | method | attribute
    path: str
    line: int
    end_line: int
    digest: str
    fields: tuple[str, ...] = ()


@dataclasses.dataclass
class ModuleInfo:
    name: str
    path: str
    tree: ast.Module
    defs: dict[str, ast.stmt]
    imports: dict[str, tuple[str, str | None]]  # local name -> (module, attribute or None)


_Scope = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module


def _scopes(node: ast.AST) -> Iterator[_Scope]:
    """`node` and every def and class nested in it, at any depth (`pysource.statements`)."""
    for sub in (node, *pysource.statements(node)):
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            yield sub


def digest(node: ast.AST) -> str:
    """A digest of `node`'s AST without docstrings in it or any nested def/class. The docstrings
    are taken out of the tree for the dump and put back (no copy of the tree: a copy of every
    definition of a large module cost seconds), so `node` must not be read by another thread
    meanwhile; the tree is as before when this returns (see `pysource.Trees`)."""
    taken: list[tuple[_Scope, list[ast.stmt]]] = []
    for sub in _scopes(node):
        body = sub.body
        first = body[0] if body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            taken.append((sub, body))
            sub.body = body[1:] or [ast.Pass()]
    try:
        text = ast.dump(node, include_attributes=False)
    finally:
        for sub, body in taken:
            sub.body = body
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def class_fields(node: ast.ClassDef) -> tuple[str, ...]:
    return tuple(
        stmt.target.id
        for stmt in node.body
        if isinstance(stmt, ast.AnnAssign)
        and isinstance(stmt.target, ast.Name)
        and not (isinstance(stmt.annotation, ast.Name) and stmt.annotation.id == "ClassVar")
        and not (isinstance(stmt.annotation, ast.Subscript) and "ClassVar" in ast.unparse(stmt.annotation.value))
    )


SOURCE_DIRS = ("", "src/", "python/")


def _module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements of a module body, preceded by the imports inside its `if` and `try` blocks
    (`if TYPE_CHECKING:` imports, `try: import x except ImportError: ...`): read in this order, a
    top-level statement wins over a conditional import of the same name."""
    nested: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            inner = [*stmt.body, *stmt.orelse]
        elif isinstance(stmt, ast.Try):
            inner = [*stmt.body, *(s for h in stmt.handlers for s in h.body), *stmt.orelse]
        else:
            continue
        nested += [s for s in _module_level(inner) if isinstance(s, (ast.Import, ast.ImportFrom))]
    return [*nested, *body]


class ModuleIndex:
    """Modules of one revision, parsed on demand."""

    def __init__(self, git: GitRepo, rev: str, trees: pysource.Trees | None = None) -> None:
        """`trees`: the review's parsed sources (read-only, shared: see `pysource.Trees`), so a
        module whose blob is the same at both revisions is parsed once; a fresh one by default."""
        self.git = git
        self.rev = rev
        self.trees = trees if trees is not None else pysource.Trees()
        self.files = set(git.list_files(rev))
        self._modules: dict[str, ModuleInfo | None] = {}
        # id of a node of a parsed module -> the node (kept alive here, so its id is not reused) and
        # its digest, its references; shared with the indexes `at` makes, where an unchanged module
        # is the same tree
        self._digests: dict[int, tuple[ast.stmt, str]] = {}
        self._references: dict[int, tuple[ast.stmt, list[list[str]]]] = {}

    def at(self, rev: str) -> ModuleIndex:
        """The index of revision `rev` of the same repository, sharing this one's `trees` and its
        per-definition results: a module whose blob is the same at both revisions is parsed,
        digested and read for references once."""
        other = ModuleIndex(self.git, rev, self.trees)
        other._digests, other._references = self._digests, self._references
        return other

    def digest(self, node: ast.stmt) -> str:
        """`digest(node)` of a definition of one of the parsed modules, computed once."""
        if id(node) not in self._digests:
            self._digests[id(node)] = (node, digest(node))
        return self._digests[id(node)][1]

    def references(self, node: ast.stmt) -> list[list[str]]:
        """`_referenced_names(node)` of a definition of one of the parsed modules, computed once
        (the caller must not change the lists)."""
        if id(node) not in self._references:
            self._references[id(node)] = (node, _referenced_names(node))
        return self._references[id(node)][1]

    def module_path(self, module: str) -> str | None:
        base = module.replace(".", "/")
        for prefix in SOURCE_DIRS:
            for cand in (f"{prefix}{base}.py", f"{prefix}{base}/__init__.py"):
                if cand in self.files:
                    return cand
        return None

    def module(self, name: str) -> ModuleInfo | None:
        if name not in self._modules:
            self._modules[name] = self._load(name)
        return self._modules[name]

    def _load(self, name: str) -> ModuleInfo | None:
        path = self.module_path(name)
        if path is None:
            return None
        text = self.git.read(self.rev, path)
        if text is None:
            return None
        tree = self.trees.parse(text, filename=path)
        if tree is None:
            return None
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
        defs: dict[str, ast.stmt] = {}
        imports: dict[str, tuple[str, str | None]] = {}
        for stmt in _module_level(tree.body):
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defs[stmt.name] = stmt
            elif isinstance(stmt, ast.Assign):
                for target in stmt.targets:
                    if isinstance(target, ast.Name):
                        defs[target.id] = stmt
            elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                defs[stmt.target.id] = stmt
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    if alias.asname:
                        imports[alias.asname] = (alias.name, None)
                    else:
                        top = alias.name.split(".")[0]
                        imports[top] = (top, None)
            elif isinstance(stmt, ast.ImportFrom):
                mod = stmt.module or ""
                if stmt.level:
                    parts = package.split(".")
                    parts = parts[: len(parts) - (stmt.level - 1)] if stmt.level > 1 else parts
                    mod = ".".join(p for p in [*parts, mod] if p)
                for alias in stmt.names:
                    imports[alias.asname or alias.name] = (mod, alias.name)
        return ModuleInfo(name, path, tree, defs, imports)

    def resolve(self, dotted: str) -> tuple[ModuleInfo, list[str]] | None:
        """Split `dotted` into the longest module prefix that exists and the attribute path."""
        parts = dotted.split(".")
        for i in range(len(parts), 0, -1):
            mod = self.module(".".join(parts[:i]))
            if mod is not None:
                return mod, parts[i:]
        return None


def _referenced_names(node: ast.AST) -> list[list[str]]:
    """Attribute chains (`a.b.c` -> ['a','b','c']) and bare names read inside `node`."""
    chains: list[list[str]] = []
    for sub in pysource.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            chains.append([sub.id])
        elif isinstance(sub, ast.Attribute):
            attrs, base = unwind_attributes(sub)
            if isinstance(base, ast.Name):
                chains.append([base.id, *reversed(attrs)])
    return chains


MAX_BASE_DEPTH = 8


def lookup_definition(index: ModuleIndex, mod: ModuleInfo, name: str, depth: int = 0) -> tuple[ModuleInfo, str] | None:
    """Where module-level `name` of `mod` is defined in the repository (through imports), or None."""
    if name in mod.defs:
        return mod, name
    if name not in mod.imports or depth > MAX_BASE_DEPTH:
        return None
    target = _follow_import(index, mod.imports[name], [])
    return lookup_definition(index, target[0], target[1], depth + 1) if target is not None else None


def find_member(
    index: ModuleIndex, mod: ModuleInfo, cls_name: str, member: str, depth: int = 0
) -> tuple[ModuleInfo, str, ast.stmt] | None:
    """The statement defining `member` in class `cls_name` of `mod` (method, assigned or annotated
    attribute), looked up in the repository's base classes when the class lacks it; with the module
    and class that define it. None when nothing in the repository defines it."""
    cls = mod.defs.get(cls_name)
    if not isinstance(cls, ast.ClassDef) or depth > MAX_BASE_DEPTH:
        return None
    for stmt in cls.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == member:
            return mod, cls_name, stmt
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == member for t in stmt.targets):
            return mod, cls_name, stmt
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == member:
            return mod, cls_name, stmt
    for base in cls.bases:
        attrs, inner = unwind_attributes(base)
        if not isinstance(inner, ast.Name):
            continue
        if attrs:
            imp = mod.imports.get(inner.id)
            target = _follow_import(index, imp, list(reversed(attrs))) if imp is not None else None
            target = lookup_definition(index, target[0], target[1]) if target is not None else None
        else:
            target = lookup_definition(index, mod, inner.id)
        if target is not None:
            found = find_member(index, target[0], target[1], member, depth + 1)
            if found is not None:
                return found
    return None


def resolve_root(index: ModuleIndex, root: str) -> tuple[ModuleInfo, str, str | None] | None:
    """A configured root as (module, module-level name, member or None); None when `root` names
    nothing at this revision. `pkg.mod.name` is a module-level definition (or a name the module
    imports from the repository); `pkg.mod.Class.member` a member of that class or its bases."""
    found = index.resolve(root)
    if found is None or not found[1] or len(found[1]) > 2:
        return None
    mod, attrs = found
    target = lookup_definition(index, mod, attrs[0])
    if target is None:
        return None
    if len(attrs) == 1:
        return target[0], target[1], None
    return (target[0], target[1], attrs[1]) if find_member(index, target[0], target[1], attrs[1]) else None


def _self_name(node: ast.stmt) -> str | None:
    """The first parameter of a method (`self`, `cls`), None for a static method or an attribute."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in node.decorator_list):
        return None
    params = [*node.args.posonlyargs, *node.args.args]
    return params[0].arg if params else None


def compute_closure(
    git: GitRepo, rev: str, roots: tuple[str, ...] | list[str], index: ModuleIndex | None = None
) -> dict[str, ClosureItem]:
    """Qualified name -> item for everything the roots reach at `rev`. Missing roots are skipped
    (`resolve_root` tells which). `index`: modules of `rev` already parsed, to reuse."""
    assert index is None or index.rev == rev
    index = index or ModuleIndex(git, rev)
    items: dict[str, ClosureItem] = {}
    todo: list[tuple[ModuleInfo, str, str | None]] = []
    for root in roots:
        found = resolve_root(index, root)
        if found is not None:
            todo.append(found)
    while todo:
        mod, name, member = todo.pop()
        if member is not None:
            _add_member(index, items, todo, mod, name, member)
            continue
        qual = f"{mod.name}.{name}"
        if qual in items:
            continue
        if name not in mod.defs:
            if name in mod.imports:
                target = _follow_import(index, mod.imports[name], [])
                if target is not None:
                    todo.append((*target, None))
            continue
        node = mod.defs[name]
        if isinstance(node, ast.ClassDef):
            kind, fields = "class", class_fields(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            kind, fields = "function", ()
        else:
            kind, fields = "constant", ()
        items[qual] = _item(index, qual, kind, mod.path, node, fields)
        for chain in index.references(node):
            _follow_chain(index, todo, mod, chain, skip=name)
    return items


def _item(
    index: ModuleIndex, qual: str, kind: str, path: str, node: ast.stmt, fields: tuple[str, ...] = ()
) -> ClosureItem:
    start = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return ClosureItem(qual, kind, path, start, node.end_lineno or node.lineno, index.digest(node), fields)


def _follow_chain(
    index: ModuleIndex, todo: list[tuple[ModuleInfo, str, str | None]], mod: ModuleInfo, chain: list[str], skip: str
) -> None:
    """Queue the module-level definition (or repository import) that `chain` starts with."""
    head = chain[0]
    if head in mod.defs and head != skip:
        todo.append((mod, head, None))
    elif head in mod.imports:
        target = _follow_import(index, mod.imports[head], chain[1:])
        if target is not None:
            todo.append((*target, None))


def annotation_classes(
    index: ModuleIndex, mod: ModuleInfo, annotation: ast.expr | None
) -> list[tuple[ModuleInfo, ast.ClassDef]]:
    """The repository classes named in a type annotation (or a called name) read in `mod`."""
    out: list[tuple[ModuleInfo, ast.ClassDef]] = []
    if annotation is None:
        return out
    for sub in pysource.walk(annotation):
        name = sub.id if isinstance(sub, ast.Name) else sub.value if isinstance(sub, ast.Constant) else None
        if not isinstance(name, str) or not name.isidentifier():
            continue
        target = lookup_definition(index, mod, name)
        if target is not None and isinstance(target[0].defs.get(target[1]), ast.ClassDef):
            out.append((target[0], target[0].defs[target[1]]))
    return out


def attribute_types(
    index: ModuleIndex, mod: ModuleInfo, cls: ast.ClassDef
) -> dict[str, list[tuple[ModuleInfo, ast.ClassDef]]]:
    """Attribute name -> repository classes it holds, read statically: class-level annotations,
    and in any method `self.x: T`, `self.x = param` (an annotated parameter) or `self.x = T(...)`."""
    types: dict[str, list[tuple[ModuleInfo, ast.ClassDef]]] = {}
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            types.setdefault(stmt.target.id, []).extend(annotation_classes(index, mod, stmt.annotation))
        self_name = _self_name(stmt)
        if self_name is None:
            continue
        assert isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef))
        params = {a.arg: a.annotation for a in [*stmt.args.posonlyargs, *stmt.args.args, *stmt.args.kwonlyargs]}
        for sub in pysource.walk(stmt):
            target = sub.target if isinstance(sub, ast.AnnAssign) else None
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                target = sub.targets[0]
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == self_name
            ):
                continue
            found = types.setdefault(target.attr, [])
            if isinstance(sub, ast.AnnAssign):
                found.extend(annotation_classes(index, mod, sub.annotation))
            elif isinstance(sub.value, ast.Name) and sub.value.id in params:
                found.extend(annotation_classes(index, mod, params[sub.value.id]))
            elif isinstance(sub.value, ast.Call) and isinstance(sub.value.func, ast.Name):
                found.extend(annotation_classes(index, mod, sub.value.func))
    return types


def _outer_chains(node: ast.AST, names: set[str]) -> list[list[str]]:
    """Whole attribute chains (`self.a.b`, not also `self.a`) whose base is one of `names`."""
    inner = {id(sub.value) for sub in pysource.walk(node) if isinstance(sub, ast.Attribute)}
    chains: list[list[str]] = []
    for sub in pysource.walk(node):
        if isinstance(sub, ast.Attribute) and id(sub) not in inner:
            attrs, base = unwind_attributes(sub)
            if isinstance(base, ast.Name) and base.id in names:
                chains.append([base.id, *reversed(attrs)])
    return chains


def _add_member(
    index: ModuleIndex,
    items: dict[str, ClosureItem],
    todo: list[tuple[ModuleInfo, str, str | None]],
    mod: ModuleInfo,
    cls_name: str,
    member: str,
) -> None:
    """Add member `member` of class `cls_name` alone and queue what it references: members of the
    class through its first parameter or the class name (dispatched on `cls_name`, so a subclass's
    override counts); through an attribute of a known repository class (`attribute_types`), that
    class's member (`self.compiler.hash()`: `Compiler.hash`), or the whole class when the object is
    used otherwise (`asdict(self.config)`, or a member the repository does not define); the whole
    class itself for a member it neither defines nor assigns (`self.model_dump()`); other names as
    module-level definitions of the defining module."""
    found = find_member(index, mod, cls_name, member)
    if found is None:
        return
    owner_mod, owner_cls, node = found
    qual = f"{owner_mod.name}.{owner_cls}.{member}"
    if qual in items:
        return
    kind = "method" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else "attribute"
    items[qual] = _item(index, qual, kind, owner_mod.path, node)
    own = {n for n in (_self_name(node), cls_name, owner_cls) if n}
    for chain in index.references(node):
        if chain[0] not in own:
            _follow_chain(index, todo, owner_mod, chain, skip="")
    cls = mod.defs.get(cls_name)
    assert isinstance(cls, ast.ClassDef)
    types: dict[str, list[tuple[ModuleInfo, ast.ClassDef]]] | None = None
    for chain in _outer_chains(node, own):
        if len(chain) < 2 or chain[1] == member:
            continue
        if find_member(index, mod, cls_name, chain[1]) is not None:
            todo.append((mod, cls_name, chain[1]))
            continue
        types = attribute_types(index, mod, cls) if types is None else types
        if chain[0] != cls_name and chain[1] not in types:
            # neither defined nor assigned by the class: inherited from outside the repository
            # (`self.model_dump()`, `self.__dict__`), which sees the whole object
            todo.append((mod, cls_name, None))
        for held_mod, held in types.get(chain[1], []):
            if len(chain) > 2 and find_member(index, held_mod, held.name, chain[2]) is not None:
                todo.append((held_mod, held.name, chain[2]))
            else:
                todo.append((held_mod, held.name, None))


def _follow_import(index: ModuleIndex, imp: tuple[str, str | None], rest: list[str]) -> tuple[ModuleInfo, str] | None:
    module, attr = imp
    if attr is not None:
        sub = index.module(f"{module}.{attr}")
        if sub is not None:
            return (sub, rest[0]) if rest else None
        mod = index.module(module)
        return (mod, attr) if mod is not None else None
    # `import a.b` then `a.b.func`: find the longest module along the chain.
    chain = [module, *rest]
    for i in range(len(chain), 0, -1):
        mod = index.module(".".join(chain[:i]))
        if mod is not None:
            return (mod, chain[i]) if i < len(chain) else None
    return None


def factor_sites(
    git: GitRepo, rev: str, roots: tuple[str, ...] | list[str], index: ModuleIndex | None = None
) -> dict[str, tuple[str, int]]:
    """Factor name -> (path, line) where the first function or method root names it, read statically: string
    keys of dict literals it returns or assigns, `x["name"] = ...` assignments and `dict(name=...)`
    keywords, in order. Empty when no function root exists. `index`: modules of `rev` already parsed, to reuse."""
    assert index is None or index.rev == rev
    index = index or ModuleIndex(git, rev)
    for root in roots:
        found = resolve_root(index, root)
        if found is None:
            continue
        mod, name, member = found
        if member is None:
            node: ast.stmt | None = mod.defs.get(name)
        else:
            owner = find_member(index, mod, name, member)
            assert owner is not None  # resolve_root found it
            mod, _, node = owner
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        sites: dict[str, tuple[str, int]] = {}
        for sub in pysource.walk(node):
            keys: list[ast.expr | None] = []
            if isinstance(sub, ast.Dict):
                keys = list(sub.keys)
            elif isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Store):
                keys = [sub.slice]
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name) and sub.func.id == "dict":
                for kw in sub.keywords:
                    if kw.arg:
                        sites.setdefault(kw.arg, (mod.path, kw.lineno))
            for key in keys:
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    sites.setdefault(key.value, (mod.path, key.lineno))
        return sites
    return {}


def factor_names(
    git: GitRepo, rev: str, roots: tuple[str, ...] | list[str], index: ModuleIndex | None = None
) -> list[str]:
    """The factor names of `factor_sites`, in order."""
    return list(factor_sites(git, rev, roots, index))


def unwind_attributes(node: ast.AST) -> tuple[list[str], ast.AST]:
    """The attribute names of ``a.b.c`` from the outermost (``c``) inwards, and the innermost
    node that is not an attribute access (``a``'s ``Name``, or a call, subscript, ...)."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return attrs, node


def resolvable_roots(
    git: GitRepo, rev: str, roots: tuple[str, ...] | list[str], index: ModuleIndex | None = None
) -> list[str]:
    """The roots that name something at `rev` (see `resolve_root`), in order. `index`: modules of
    `rev` already parsed, to reuse."""
    assert index is None or index.rev == rev
    index = index or ModuleIndex(git, rev)
    return [root for root in roots if resolve_root(index, root) is not None]
