"""Cache-key change detection between two revisions: static closure diff, then the probe.

Public API (used by the review engine, the service and the release notes):

    detect_key_change(repo, base_ref, head_ref, config, *, probe=None, progress=...) -> KeyChange

1. Static: the closure of `config.key_roots` (see `closure.py`) is computed at both revisions and
   compared item by item, ignoring docstrings, comments and formatting.
2. Probe: `config.probe.command` runs in worktrees of both revisions (see `probe.py`); the factors
   and key of each reference case are compared. `probe=None` runs it only when step 1 found a
   change (or a field was added to a hashed config class); `True` always; `False` never.

`KeyChange.status` is `confirmed` (the probe saw a different key for at least one reference case),
`unconfirmed` (the static diff changed but the probe did not run, failed, or saw the same keys) or
`unchanged`. `introduced` is True when the roots exist only at head (no probe then: there was no
key to compare with). `KeyChange.confirmed` is what the service labels `cache: invalidates` and what the
release notes warn about. `new_fields` lists fields added to hashed config classes (the roots that
are classes), with `ignored=True` when the key does not see them.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reviewbot import logger
from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.closure import ClosureItem, ModuleIndex, compute_closure, factor_names
from reviewbot.keychange.probe import ProbeRun, run_probe
from reviewbot.repo_config import RepoConfig

CONFIRMED = "confirmed"
UNCONFIRMED = "unconfirmed"
UNCHANGED = "unchanged"


@dataclasses.dataclass(frozen=True)
class ClosureChange:
    """`change`: added | removed | modified. Location is at head (base for removed items)."""

    name: str
    kind: str
    change: str
    path: str
    line: int
    end_line: int


@dataclasses.dataclass(frozen=True)
class CaseKeys:
    """One reference case of the probe: keys and factors at base and head (None when absent)."""

    case: str
    old_key: str | None
    new_key: str | None
    old_factors: dict[str, str]
    new_factors: dict[str, str]

    @property
    def changed(self) -> bool:
        return self.old_key != self.new_key

    @property
    def factors_changed(self) -> list[str]:
        names = list(dict.fromkeys([*self.old_factors, *self.new_factors]))
        return [n for n in names if self.old_factors.get(n) != self.new_factors.get(n)]


@dataclasses.dataclass(frozen=True)
class NewField:
    class_name: str
    field: str
    path: str
    line: int
    ignored: bool
    evidence: str


@dataclasses.dataclass
class KeyChange:
    base: str
    head: str
    roots: tuple[str, ...]
    roots_found: bool
    closure_changes: list[ClosureChange]
    new_fields: list[NewField]
    factors_base: list[str]
    factors_head: list[str]
    probe_status: str  # ok | failed | timeout | not-run | not-configured
    probe_error: str = ""
    cases: list[CaseKeys] = dataclasses.field(default_factory=list)
    base_items: dict[str, ClosureItem] = dataclasses.field(default_factory=dict, repr=False)
    head_items: dict[str, ClosureItem] = dataclasses.field(default_factory=dict, repr=False)

    @property
    def static_changed(self) -> bool:
        return bool(self.closure_changes)

    @property
    def introduced(self) -> bool:
        """The roots exist at head but not at base: there was no key (and no cache) to invalidate."""
        return bool(self.head_items) and not self.base_items

    @property
    def confirmed(self) -> bool:
        return self.probe_status == "ok" and any(c.changed for c in self.cases)

    @property
    def status(self) -> str:
        if self.confirmed:
            return CONFIRMED
        if self.static_changed:
            return UNCONFIRMED
        return UNCHANGED

    @property
    def factors_changed(self) -> list[str]:
        """Factor names whose hash differs in any reference case (probe), in key order."""
        out: list[str] = []
        for case in self.cases:
            out.extend(f for f in case.factors_changed if f not in out)
        return out

    @property
    def factors_added(self) -> list[str]:
        return [f for f in self.factors_head if f not in self.factors_base]

    @property
    def factors_removed(self) -> list[str]:
        return [f for f in self.factors_base if f not in self.factors_head]

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "head": self.head,
            "status": self.status,
            "confirmed": self.confirmed,
            "static_changed": self.static_changed,
            "roots": list(self.roots),
            "roots_found": self.roots_found,
            "introduced": self.introduced,
            "closure_changes": [dataclasses.asdict(c) for c in self.closure_changes],
            "new_fields": [dataclasses.asdict(f) for f in self.new_fields],
            "factors_base": self.factors_base,
            "factors_head": self.factors_head,
            "factors_changed": self.factors_changed,
            "probe_status": self.probe_status,
            "probe_error": self.probe_error,
            "cases": [
                {**dataclasses.asdict(c), "changed": c.changed, "factors_changed": c.factors_changed}
                for c in self.cases
            ],
        }


def diff_closures(base: dict[str, ClosureItem], head: dict[str, ClosureItem]) -> list[ClosureChange]:
    changes: list[ClosureChange] = []
    for name, item in head.items():
        old = base.get(name)
        if old is None:
            changes.append(ClosureChange(name, item.kind, "added", item.path, item.line, item.end_line))
        elif old.digest != item.digest:
            changes.append(ClosureChange(name, item.kind, "modified", item.path, item.line, item.end_line))
    for name, item in base.items():
        if name not in head:
            changes.append(ClosureChange(name, item.kind, "removed", item.path, item.line, item.end_line))
    return sorted(changes, key=lambda c: (c.path, c.line, c.name))


_GENERIC_FIELD_WALKS = {"fields", "asdict", "astuple", "vars", "__dict__", "model_dump", "model_dump_json"}


def _field_seen_by_hash(index: ModuleIndex, item: ClosureItem, field: str) -> tuple[bool, str]:
    """Whether the class's hashing methods see `field`: (seen, evidence).

    A method whose name contains "hash" that walks fields generically (`dataclasses.fields`,
    `asdict`, `vars`, `__dict__`, pydantic's `model_dump`/`model_dump_json`) sees every field not named in it as a string (an exclusion list);
    one that names fields explicitly sees only those. No hashing method: the key function hashes
    the object whole, which sees every field.
    """
    mod_name, _, cls_name = item.name.rpartition(".")
    mod = index.module(mod_name)
    node = mod.defs.get(cls_name) if mod else None
    assert isinstance(node, ast.ClassDef)
    methods = [
        n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and "hash" in n.name.lower()
    ]
    if not methods:
        return True, "no hashing method; the object is hashed whole"
    for method in methods:
        strings = {s.value for s in ast.walk(method) if isinstance(s, ast.Constant) and isinstance(s.value, str)}
        attrs = {a.attr for a in ast.walk(method) if isinstance(a, ast.Attribute)}
        names = {n.id for n in ast.walk(method) if isinstance(n, ast.Name)}
        generic = bool((attrs | names) & _GENERIC_FIELD_WALKS)
        if generic:
            return (
                field not in strings,
                f"`{method.name}` walks all fields" + (" but excludes it by name" if field in strings else ""),
            )
        if field in attrs or field in strings:
            return True, f"`{method.name}` names it"
    return False, f"`{methods[0].name}` names the hashed fields explicitly and `{field}` is not among them"


ProgressFn = Callable[[str], None]


def _no_progress(_: str) -> None:
    """Progress sink that drops messages."""


def detect_key_change(
    repo: Path | str | GitRepo,
    base_ref: str,
    head_ref: str,
    config: RepoConfig,
    *,
    probe: bool | None = None,
    base_config: RepoConfig | None = None,
    progress: ProgressFn = _no_progress,
) -> KeyChange:
    """Compare the cache key between `base_ref` and `head_ref` (compare exactly these two revisions;
    the caller picks the merge base for a pull request).

    `config` gives the roots and the probe at head; `base_config` (default: `config`) at base, so a
    change that moves the key's module (and updates `.reviewbot.yml`) is still compared correctly.
    """
    git = repo if isinstance(repo, GitRepo) else GitRepo(repo)
    base, head = git.rev_parse(base_ref), git.rev_parse(head_ref)
    base_config = base_config or config
    roots = tuple(config.key_roots)
    base_roots = tuple(base_config.key_roots) or roots
    base_items = compute_closure(git, base, base_roots)
    head_items = compute_closure(git, head, roots)
    changes = diff_closures(base_items, head_items)
    progress(f"cache key: static closure {len(head_items)} items at head, {len(changes)} changed")

    head_index = ModuleIndex(git, head)
    new_fields: list[NewField] = []
    class_roots = {name for name, item in head_items.items() if item.kind == "class" and name in roots}
    for name in sorted(class_roots):
        item = head_items[name]
        old_fields = set(base_items[name].fields) if name in base_items else set()
        for field in item.fields:
            if field in old_fields or name not in base_items:
                continue
            seen, evidence = _field_seen_by_hash(head_index, item, field)
            line = _field_line(head_index, item, field)
            new_fields.append(NewField(name, field, item.path, line, not seen, evidence))

    result = KeyChange(
        base=base,
        head=head,
        roots=roots,
        roots_found=bool(head_items or base_items),
        closure_changes=changes,
        new_fields=new_fields,
        factors_base=factor_names(git, base, base_roots),
        factors_head=factor_names(git, head, roots),
        probe_status="not-configured" if config.probe is None else "not-run",
        base_items=base_items,
        head_items=head_items,
    )
    want_probe = probe if probe is not None else bool(changes or new_fields)
    if result.introduced:
        logger.info("cache-key probe skipped: the key roots do not exist at base %s", base[:12])
        return result
    if config.probe is None or not want_probe:
        if config.probe is not None and changes:
            logger.info("cache-key probe skipped (probe=%s)", probe)
        return result
    progress("cache key: running the probe at base")
    old = run_probe(git, base, base_config.probe or config.probe)
    progress(f"cache key: probe at base {old.status} in {old.seconds:.1f}s; running it at head")
    new = run_probe(git, head, config.probe)
    progress(f"cache key: probe at head {new.status} in {new.seconds:.1f}s")
    _merge_probe(result, old, new)
    if result.probe_status == "ok" and not result.confirmed:
        result.new_fields = [
            dataclasses.replace(f, ignored=True, evidence=f.evidence + "; the probe sees the same key at base and head")
            for f in result.new_fields
        ]
    return result


def _field_line(index: ModuleIndex, item: ClosureItem, field: str) -> int:
    mod_name, _, cls_name = item.name.rpartition(".")
    mod = index.module(mod_name)
    node = mod.defs.get(cls_name) if mod else None
    assert isinstance(node, ast.ClassDef)
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == field:
            return stmt.lineno
    return item.line


def _merge_probe(result: KeyChange, old: ProbeRun, new: ProbeRun) -> None:
    if old.status != "ok" or new.status != "ok":
        result.probe_status = "failed" if "failed" in (old.status, new.status) else "timeout"
        result.probe_error = "\n".join(
            f"{label}: {run.error}" for label, run in (("base", old), ("head", new)) if run.status != "ok"
        )
        return
    result.probe_status = "ok"
    for case in list(dict.fromkeys([*old.cases, *new.cases])):
        o, n = old.cases.get(case), new.cases.get(case)
        result.cases.append(
            CaseKeys(
                case,
                o["key"] if o else None,
                n["key"] if n else None,
                dict(o["factors"]) if o else {},
                dict(n["factors"]) if n else {},
            )
        )
    if new.cases:
        result.factors_head = list(next(iter(new.cases.values()))["factors"])
    if old.cases:
        result.factors_base = list(next(iter(old.cases.values()))["factors"])
