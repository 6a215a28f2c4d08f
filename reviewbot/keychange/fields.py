"""Whether a hashed config class's hash sees one of its fields, read statically (no code runs).

The class's hashing methods (a name containing `hash`, `key`, `digest` or `fingerprint`) are read
together with the same-module functions and `self` methods they call (two levels deep), so
`hash` calling `_hashed_fields(self)` is read as one. Such code either

- walks the fields generically (`dataclasses.fields`/`asdict`/`astuple`, `vars`, `__dict__`,
  `__getstate__`, pydantic's `model_dump`/`model_dump_json`/`model_fields`, `self.dict()`,
  `self.json()`, `json.dumps` of those; `repr(self)`, `str(self)` or `f"{self!r}"` of a dataclass
  whose `__repr__` the decorator writes, a field declared `field(repr=False)` excepted): every
  field is covered, except one the walk excludes by
  name (an `exclude=` argument, `del d["f"]`, `d.pop("f")`, a `!=`/`not in` test against the
  name), one it filters on field metadata when the field is declared with a false metadata value
  (`field(metadata={"hash": False})`, directly or through a same-module helper), and a pydantic
  field declared `Field(exclude=True)`; an `in`/`==` test against names keeps only those names;
- or names fields explicitly (`self.f`, `"f"`): only those are covered.

A class without a hashing method is hashed whole by the key function (covered). A key function of
the closure that walks a parameter annotated with the class generically covers every field too.
"""

from __future__ import annotations

import ast
import dataclasses
import re

from reviewbot.keychange.closure import ClosureItem, ModuleIndex, ModuleInfo, find_member

_HASHING_NAME = re.compile(r"hash|key|digest|fingerprint", re.IGNORECASE)
# names and attributes that walk every field of the object they get
_WALK_CALLS = {"fields", "asdict", "astuple", "vars"}
_WALK_ATTRS = {
    "__dict__",
    "__getstate__",
    "__dataclass_fields__",
    "model_dump",
    "model_dump_json",
    "model_fields",
    "__fields__",
}
# attributes that walk every field only on the object itself (`self.dict()`; `json.dumps` is not one)
_SELF_WALK_ATTRS = {"dict", "json"}
_INCLUSIVE_OPTIONS = {"exclude_defaults", "exclude_unset", "exclude_none"}
_DEPTH = 2


@dataclasses.dataclass(frozen=True)
class Coverage:
    """`seen`: the key sees the field. `excluded`: not seen because the code leaves it out on
    purpose (by name or by its declaration), not because it was forgotten. `evidence`: why.
    `assumed`: no code says how the object is hashed (no hashing method): a guess the probe may
    overrule."""

    seen: bool
    excluded: bool
    evidence: str
    assumed: bool = False


def _strings(node: ast.AST, mod: ModuleInfo | None = None) -> set[str]:
    """String constants in `node`; with `mod`, a bare name of a module constant reads that constant."""
    target = mod.defs.get(node.id) if mod is not None and isinstance(node, ast.Name) else None
    if isinstance(target, (ast.Assign, ast.AnnAssign)):
        return _strings(target.value) if target.value is not None else set()
    return {s.value for s in ast.walk(node) if isinstance(s, ast.Constant) and isinstance(s.value, str)}


def _receiver_is(node: ast.AST, names: set[str]) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in names


def walks_object(node: ast.AST, names: set[str]) -> str | None:
    """The generic walk `node` applies to one of `names` (`asdict(cfg)`, `cfg.model_dump`), or None."""
    if isinstance(node, ast.Call):
        func = node.func
        called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if called in _WALK_CALLS and any(isinstance(a, ast.Name) and a.id in names for a in node.args):
            return called
    if isinstance(node, ast.Attribute) and (node.attr in _WALK_ATTRS or node.attr in _SELF_WALK_ATTRS):
        return node.attr if _receiver_is(node, names) else None
    return None


def _text_of(node: ast.AST, names: set[str]) -> str | None:
    """`repr` for `repr(self)` and `f"{self!r}"`, `str` for `str(self)` and `f"{self}"`: the object's
    text, which walks every field when the class's `__repr__` is a dataclass's (`_generated_text`)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("repr", "str")
        and len(node.args) == 1
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id in names
    ):
        return node.func.id
    if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name) and node.value.id in names:
        return "repr" if node.conversion == ord("r") else "str" if node.conversion in (-1, ord("s")) else None
    return None


def _generated_text(cls: ast.ClassDef, walk: str) -> bool:
    """The class is a dataclass whose `__repr__` the decorator writes (no `repr=False`, no
    `__repr__` of its own) and, for `str`, without a `__str__` of its own: its text lists every
    field declared with `repr=True` (the default)."""
    own = {n.name for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for decorator in cls.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call is not None else decorator
        if ast.unparse(target) not in ("dataclass", "dataclasses.dataclass"):
            continue
        generated = not any(
            k.arg == "repr" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in (call.keywords if call is not None else [])
        )
        return generated and "__repr__" not in own and (walk == "repr" or "__str__" not in own)
    return False


def _hidden_from_repr(decl: ast.AnnAssign | None) -> bool:
    """The field is declared `field(repr=False)`."""
    value = decl.value if decl is not None else None
    return isinstance(value, ast.Call) and any(
        k.arg == "repr" and isinstance(k.value, ast.Constant) and k.value.value is False for k in value.keywords
    )


@dataclasses.dataclass
class _Reading:
    """What a body of hashing code does with fields."""

    mod: ModuleInfo
    walks: list[str] = dataclasses.field(default_factory=list)
    excluded_names: set[str] = dataclasses.field(default_factory=set)
    only_names: set[str] | None = None
    metadata_filter: bool = False
    named: set[str] = dataclasses.field(default_factory=set)

    def read(self, node: ast.AST, selves: set[str]) -> None:
        for sub in ast.walk(node):
            walk = walks_object(sub, selves) or _text_of(sub, selves)
            if walk is None and isinstance(sub, ast.Attribute) and sub.attr in _WALK_ATTRS:
                walk = sub.attr  # `value.__dict__` of a nested object: still a generic walk
            if walk is not None:
                self.walks.append(walk)
            if isinstance(sub, ast.Call):
                self._call(sub)
            elif isinstance(sub, ast.Attribute):
                if sub.attr == "metadata":
                    self.metadata_filter = True
                if isinstance(sub.value, ast.Name) and sub.value.id in selves:
                    self.named.add(sub.attr)
            elif isinstance(sub, ast.Delete):
                for target in sub.targets:
                    if isinstance(target, ast.Subscript):
                        self.excluded_names |= _strings(target.slice, self.mod)
            elif isinstance(sub, ast.comprehension):
                for test in sub.ifs:
                    self._filter(test, keep_when_true=True)
            elif isinstance(sub, ast.If) and sub.body and isinstance(sub.body[-1], ast.Continue):
                self._filter(sub.test, keep_when_true=False)
            elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
                self.named.add(sub.value)

    def _call(self, call: ast.Call) -> None:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "pop" and call.args:
            self.excluded_names |= _strings(call.args[0], self.mod)
        for keyword in call.keywords:
            if keyword.arg == "exclude":
                self.excluded_names |= _strings(keyword.value, self.mod)

    def _filter(self, test: ast.expr, *, keep_when_true: bool) -> None:
        """A test that keeps (comprehension `if`) or skips (`if ...: continue`) a field by name."""
        if not isinstance(test, ast.Compare) or len(test.ops) != 1:
            return
        names = _strings(test.comparators[0], self.mod) or _strings(test.left, self.mod)
        if not names:
            return
        positive = isinstance(test.ops[0], (ast.In, ast.Eq))
        if not positive and not isinstance(test.ops[0], (ast.NotIn, ast.NotEq)):
            return
        if positive == keep_when_true:
            self.only_names = (self.only_names or set()) | names
        else:
            self.excluded_names |= names


def _functions_called(
    mod: ModuleInfo, cls: ast.ClassDef, node: ast.AST
) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Module functions called by name and `self.` methods of `cls` called inside `node`, and the
    class's own `__repr__` (`__str__`) where `node` takes the object's text (`repr(self)`)."""
    methods = {n.name: n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    for sub in ast.walk(node):
        target: ast.stmt | None = None
        text = _text_of(sub, {"self"})
        if text is not None:  # the object's text: its own `__str__`/`__repr__` when it writes one
            target = methods.get("__str__") if text == "str" else None
            target = target or methods.get("__repr__")
        elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            target = mod.defs.get(sub.func.id)
        elif isinstance(sub, (ast.Call, ast.Attribute)):
            attr = sub.func if isinstance(sub, ast.Call) else sub
            if _receiver_is(attr, {"self"}) and isinstance(attr, ast.Attribute):
                target = methods.get(attr.attr)
        if isinstance(target, (ast.FunctionDef, ast.AsyncFunctionDef)) and target not in out:
            out.append(target)
    return out


def _self_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """`self` and every parameter: a helper's parameters stand for the object it was given."""
    args = function.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} | {"self"}


def _read_hashing(mod: ModuleInfo, cls: ast.ClassDef, method: ast.FunctionDef | ast.AsyncFunctionDef) -> _Reading:
    reading = _Reading(mod)
    todo, seen = [method], [method]
    for _ in range(_DEPTH + 1):
        nxt: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
        for function in todo:
            for stmt in function.body:
                reading.read(stmt, _self_names(function))
            for callee in _functions_called(mod, cls, function):
                if callee not in seen:
                    seen.append(callee)
                    nxt.append(callee)
        todo = nxt
    return reading


def _declaration(cls: ast.ClassDef, field: str) -> ast.AnnAssign | None:
    for stmt in cls.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == field:
            return stmt
    return None


def _false_metadata(node: ast.AST) -> bool:
    """A `metadata=` argument holding a dict with a false constant value somewhere in `node`."""
    for sub in ast.walk(node):
        if not isinstance(sub, ast.Call):
            continue
        for keyword in sub.keywords:
            if keyword.arg == "metadata" and isinstance(keyword.value, ast.Dict):
                values = keyword.value.values
                if any(isinstance(v, ast.Constant) and v.value in (False, None, 0) for v in values):
                    return True
    return False


def _declared_excluded(mod: ModuleInfo, decl: ast.AnnAssign | None) -> tuple[bool, bool]:
    """(declared with false metadata, declared `exclude=True`) for a field's declaration, following
    a same-module helper that builds the `dataclasses.field(...)` (`_no_hash(...)`)."""
    value = decl.value if decl is not None else None
    if not isinstance(value, ast.Call):
        return False, False
    excluded = any(
        k.arg == "exclude" and isinstance(k.value, ast.Constant) and k.value.value is True for k in value.keywords
    )
    metadata = _false_metadata(value)
    if not metadata and isinstance(value.func, ast.Name):
        helper = mod.defs.get(value.func.id)
        metadata = isinstance(helper, (ast.FunctionDef, ast.AsyncFunctionDef)) and _false_metadata(helper)
    return metadata, excluded


def _walk_verdict(reading: _Reading, method: str, field: str, metadata: bool, pyd_excluded: bool) -> Coverage:
    walk = reading.walks[0]
    if field in reading.excluded_names:
        return Coverage(False, True, f"`{method}` walks all fields (`{walk}`) but excludes `{field}` by name")
    if reading.only_names is not None and field not in reading.only_names:
        return Coverage(False, False, f"`{method}` walks the fields (`{walk}`) but keeps only those it names")
    if reading.metadata_filter and metadata:
        return Coverage(False, True, f"`{method}` skips fields by their metadata, and `{field}` is declared so")
    if pyd_excluded and walk in ("model_dump", "model_dump_json"):
        return Coverage(False, True, f"`{field}` is declared `exclude=True`, which `{walk}` leaves out")
    return Coverage(True, False, f"`{method}` hashes the whole object (`{walk}`), so every field")


def _key_function_walks(index: ModuleIndex, closure: dict[str, ClosureItem], class_name: str, field: str) -> str | None:
    """Name of a key function (or method, from a `Class.method` root) of the closure that walks a
    parameter annotated with the class generically without excluding `field`."""
    for item in closure.values():
        if item.kind not in ("function", "method"):
            continue
        mod_name, _, func_name = item.name.rpartition(".")
        if item.kind == "method":
            mod_name, _, cls_name = mod_name.rpartition(".")
        mod = index.module(mod_name)
        if mod is None:
            continue
        if item.kind == "method":
            member = find_member(index, mod, cls_name, func_name)
            node = member[2] if member is not None else None
        else:
            node = mod.defs.get(func_name)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        args = node.args
        typed = {
            a.arg
            for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
            if a.annotation is not None and re.search(rf"\b{re.escape(class_name)}\b", ast.unparse(a.annotation))
        }
        for stmt in node.body if typed else []:
            if any(walks_object(sub, typed) for sub in ast.walk(stmt)):
                reading = _Reading(mod)
                reading.read(stmt, typed)
                if field not in reading.excluded_names:
                    return func_name
    return None


def field_coverage(index: ModuleIndex, item: ClosureItem, field: str, closure: dict[str, ClosureItem]) -> Coverage:
    """Whether the hash of the class `item` (a closure item of kind `class`) sees `field`."""
    mod_name, _, cls_name = item.name.rpartition(".")
    mod = index.module(mod_name)
    cls = mod.defs.get(cls_name) if mod else None
    assert mod is not None and isinstance(cls, ast.ClassDef), item.name
    methods = [
        n for n in cls.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and _HASHING_NAME.search(n.name)
    ]
    if not methods:
        return Coverage(True, False, "no hashing method; the object is hashed whole", assumed=True)
    metadata, pyd_excluded = _declared_excluded(mod, _declaration(cls, field))
    explicit: Coverage | None = None
    for method in methods:
        reading = _read_hashing(mod, cls, method)
        text_walks = [walk for walk in reading.walks if walk in ("repr", "str")]
        if text_walks and len(text_walks) == len(reading.walks):
            if not _generated_text(cls, text_walks[0]):
                reading.walks.clear()  # a hand-written `__repr__`: what it shows is not known here
            elif _hidden_from_repr(_declaration(cls, field)):
                return Coverage(
                    False, True, f"`{method.name}` hashes the dataclass's repr, which `{field}` is declared out of"
                )
        if reading.walks:
            return _walk_verdict(reading, method.name, field, metadata, pyd_excluded)
        if field in reading.named and field not in reading.excluded_names:
            return Coverage(True, False, f"`{method.name}` names it")
        explicit = explicit or Coverage(
            False, False, f"`{method.name}` names the hashed fields explicitly and `{field}` is not among them"
        )
    walker = _key_function_walks(index, closure, cls_name, field)
    if walker is not None:
        return Coverage(True, False, f"the key function `{walker}` hashes the whole `{cls_name}`")
    assert explicit is not None
    return explicit
