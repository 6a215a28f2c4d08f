"""Cache-key change detection between two revisions: static closure diff, then the probe.

Public API (used by the review engine, the service and the release notes):

    detect_key_change(repo, base_ref, head_ref, config, *, probe=None, progress=...) -> KeyChange

1. Static: the closure of `config.key_roots` (see `closure.py`) is computed at both revisions and
   compared item by item, ignoring docstrings, comments and formatting.
2. Probe: `config.probe.command` runs in worktrees of both revisions (see `probe.py`); the factors
   and key of each reference case are compared. `probe=None` runs it only when step 1 found a
   change (or a field was added to a hashed config class); `True` always; `False` never.

3. Hashed sources (`hashed_sources=True`, the review engine): the files the key hashes by their
   bytes, as the probe at base lists them (its `"sources"`, see `hashed_sources.py`: read only when
   the change modifies or deletes a file existing at base, cached per base commit, the probe run
   of step 2 reused). A change to one of them is a key change whatever step 1 found:
   `KeyChange.hashed_sources` (factor -> changed files) and `KeyChange.invalidates`.

`KeyChange.status` is `confirmed` (the probe saw a different key for at least one reference case),
`hashed-source` (not confirmed by comparing keys, but the change edits files the key hashes by
their bytes), `unconfirmed` (the static diff changed but the probe did not run, failed, or saw the
same keys) or `unchanged`. `introduced` is True when the roots exist only at head (no probe then:
there was no key to compare with). `KeyChange.invalidates` (confirmed, or a hashed file changed)
is what the service labels `cache: invalidates`; `KeyChange.confirmed` is what the release notes'
detection warns about (they check hashed files themselves, per commit). `new_fields` lists fields
added to hashed config classes (the roots that are classes), with `ignored=True` when the key does
not see them (`fields.py` reads the class's hash; the probe overrules it: a field whose addition
alone changed the keys is never ignored).

Roots (`pkg.mod.func`, `pkg.mod.Class`, `pkg.mod.Class.method`, see `closure.py`) are checked at
both revisions: `roots_added` exist at head only, `roots_removed` at base only (the review notes
both); with `require_roots=True` a root that names nothing at either revision raises
`ConfigError` naming it (a misspelled root would otherwise switch the key checks off silently).

`reproducibility_base`/`reproducibility_head` are filled by `reviewbot.experiments.key_stability`
(the engine runs it after this when the probe ran): factors that differ between two runs of one
revision. The base's unstable factors are marked on every `CaseKeys` and do not count as changed.
`factors_renamed` pairs a removed factor with an added one of the same value in every case.
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from reviewbot import pysource
from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.closure import (
    ClosureItem,
    ModuleIndex,
    compute_closure,
    digest,
    factor_names,
    factor_sites,
    resolvable_roots,
)
from reviewbot.keychange.fields import field_coverage
from reviewbot.keychange.hashed_sources import base_listing, listable_paths, setup_note
from reviewbot.keychange.probe import ProbeRun, changed_sources, run_probe
from reviewbot.repo_config import ConfigError, ProbeConfig, RepoConfig

logger = logging.getLogger(__name__)

CONFIRMED = "confirmed"
UNCONFIRMED = "unconfirmed"
UNCHANGED = "unchanged"
HASHED_SOURCE = "hashed-source"


@dataclasses.dataclass(frozen=True)
class ClosureChange:
    """`change`: added | removed | modified. Location is at head (base for removed items)."""

    name: str
    kind: str
    change: str
    path: str
    line: int
    end_line: int


KEY_ITSELF = "(key)"


@dataclasses.dataclass(frozen=True)
class CaseKeys:
    """One reference case of the probe: keys and factors at base and head (None when absent).

    `unstable`: factors (or `KEY_ITSELF`) the reproducibility experiment saw differ between two
    runs of the base: their difference from the head is noise, not a change. `new_artifact`: the
    digest of what the case compiles to at head, when the probe reports one."""

    case: str
    old_key: str | None
    new_key: str | None
    old_factors: dict[str, str]
    new_factors: dict[str, str]
    unstable: tuple[str, ...] = ()
    new_artifact: str | None = None

    @property
    def changed(self) -> bool:
        if self.unstable:
            return bool(self.factors_changed)
        return self.old_key != self.new_key

    @property
    def factors_changed(self) -> list[str]:
        names = list(dict.fromkeys([*self.old_factors, *self.new_factors]))
        return [n for n in names if self.old_factors.get(n) != self.new_factors.get(n) and n not in self.unstable]


@dataclasses.dataclass(frozen=True)
class Reproducibility:
    """The key-reproducibility experiment at one revision (`reviewbot.experiments.key_stability`):
    the probe ran a second time in another worktree with another `PYTHONHASHSEED`.

    `status`: ok | failed | timeout (the second run's); `unstable`: factor names whose value
    differed between the runs in some reference case, `KEY_ITSELF` when only the key did; `cases`:
    the reference cases that differed; `seeds` and `worktrees`: of the two runs.

    When some factor differed, a third run with the first run's seed in a third worktree
    (`third_worktree`, "" when it did not run or failed) splits `unstable`: `by_process` differed
    again (an absolute path, a process id, a memory address: anything of one process or checkout),
    `by_seed` matched again (it depends on the hash seed: `hash()` of a string, set order)."""

    revision: str
    status: str
    unstable: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()
    seeds: tuple[int, int] = (0, 0)
    worktrees: tuple[str, str] = ("", "")
    error: str = ""
    by_process: tuple[str, ...] = ()
    by_seed: tuple[str, ...] = ()
    third_worktree: str = ""

    @property
    def reproducible(self) -> bool:
        return self.status == "ok" and not self.unstable


@dataclasses.dataclass(frozen=True)
class NewField:
    """A field added to a hashed config class. `ignored`: the key does not see it; `excluded`: the
    code leaves it out on purpose (by name, metadata or `exclude=True`); `probe`: what the probe
    adds, "" (did not run), `unchanged` (every reference key stayed the same), `changed` (keys
    changed and the new field is the class's only change: the key sees it) or
    `changed-elsewhere` (keys changed, but other code of the key changed too, so the field may not
    be why). `assumed`: the static reading is a guess (no hashing method); `only_change`: this field's
    declaration is all that changed in the class."""

    class_name: str
    field: str
    path: str
    line: int
    ignored: bool
    evidence: str
    excluded: bool = False
    probe: str = ""
    assumed: bool = False
    only_change: bool = False


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
    probe_worktrees: tuple[str, str] = ("", "")  # where the probe ran at (base, head); removed since
    cases: list[CaseKeys] = dataclasses.field(default_factory=list)
    base_items: dict[str, ClosureItem] = dataclasses.field(default_factory=dict, repr=False)
    head_items: dict[str, ClosureItem] = dataclasses.field(default_factory=dict, repr=False)
    # factor name -> (path, line) where the head's key function names it (static)
    factor_lines: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict, repr=False)
    reproducibility_base: Reproducibility | None = None
    reproducibility_head: Reproducibility | None = None
    roots_added: tuple[str, ...] = ()  # configured roots that exist at head only
    roots_removed: tuple[str, ...] = ()  # configured roots that exist at base only
    # factor -> files it hashes by their bytes (the probe at base lists them) that this change modifies
    hashed_sources: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
    # where the base's listing of hashed files came from: "" (not needed: no probe, or the change
    # modifies no file existing at base), "probe", "cache", or "unknown" (the probe failed or could not run)
    sources_origin: str = ""

    @property
    def unstable_base(self) -> tuple[str, ...]:
        """Factors (or `KEY_ITSELF`) that differed between two runs of the base's probe."""
        return self.reproducibility_base.unstable if self.reproducibility_base is not None else ()

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
    def hashed_changed(self) -> bool:
        """The change edits files the key hashes by their bytes (and the key existed at base)."""
        return bool(self.hashed_sources) and not self.introduced

    @property
    def invalidates(self) -> bool:
        """Every existing cache misses after this change: the probe confirmed it, or a hashed file changed."""
        return self.confirmed or self.hashed_changed

    @property
    def status(self) -> str:
        if self.confirmed:
            return CONFIRMED
        if self.hashed_changed:
            return HASHED_SOURCE
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

    @property
    def factors_renamed(self) -> dict[str, str]:
        """Removed factor -> added factor with the same value in every reference case (probe): a
        rename, which keeps every configuration apart as before."""
        both = [c for c in self.cases if c.old_key is not None and c.new_key is not None]
        if self.probe_status != "ok" or not both:
            return {}
        renamed: dict[str, str] = {}
        for old in self.factors_removed:
            for new in self.factors_added:
                if new not in renamed.values() and all(
                    c.old_factors.get(old) is not None and c.old_factors.get(old) == c.new_factors.get(new)
                    for c in both
                ):
                    renamed[old] = new
                    break
        return renamed

    def to_json(self) -> dict[str, Any]:
        return {
            "base": self.base,
            "head": self.head,
            "status": self.status,
            "confirmed": self.confirmed,
            "invalidates": self.invalidates,
            "hashed_sources": {factor: list(paths) for factor, paths in self.hashed_sources.items()},
            "sources_origin": self.sources_origin,
            "static_changed": self.static_changed,
            "roots": list(self.roots),
            "roots_found": self.roots_found,
            "roots_added": list(self.roots_added),
            "roots_removed": list(self.roots_removed),
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
            "reproducibility": {
                label: dataclasses.asdict(run) if run is not None else None
                for label, run in (("base", self.reproducibility_base), ("head", self.reproducibility_head))
            },
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
    require_roots: bool = False,
    hashed_sources: bool = False,
    trees: pysource.Trees | None = None,
) -> KeyChange:
    """Compare the cache key between `base_ref` and `head_ref` (compare exactly these two revisions;
    the caller picks the merge base for a pull request).

    `config` gives the roots and the probe at head; `base_config` (default: `config`) at base, so a
    change that moves the key's module (and updates `.reviewbot.yml`) is still compared correctly.
    `require_roots`: raise `ConfigError` for a root of `config` that names nothing at either
    revision, before anything runs (one only the base's configuration names is logged).
    `hashed_sources`: also find the changed files the key hashes by their bytes (step 3 of the
    module docstring; the probe at base runs for it unless `probe` is False, which reads a cached
    listing only). `trees`: the review's parsed sources (read-only, see `pysource.Trees`), so a
    module the same at both revisions is parsed once; default: one for this call.
    """
    git = repo if isinstance(repo, GitRepo) else GitRepo(repo)
    base, head = git.rev_parse(base_ref), git.rev_parse(head_ref)
    base_config = base_config or config
    roots = tuple(config.key_roots)
    base_roots = tuple(base_config.key_roots) or roots
    every_root = tuple(dict.fromkeys([*roots, *base_roots]))
    trees = trees if trees is not None else pysource.Trees()
    base_index = ModuleIndex(git, base, trees)
    head_index = base_index.at(head)
    at_base = set(resolvable_roots(git, base, every_root, base_index))
    at_head = set(resolvable_roots(git, head, every_root, head_index))
    missing = [root for root in roots if root not in at_base and root not in at_head]
    stale_base = [root for root in base_roots if root not in roots and root not in at_base and root not in at_head]
    if stale_base:  # the merge base's own file is wrong: not this change's to fix
        logger.warning("the merge base's cache_key.roots %s name nothing at either revision", stale_base)
    if require_roots and missing:
        raise ConfigError(
            f"cache_key.roots: {', '.join(repr(r) for r in missing)} names nothing at base {base[:12]} "
            f"or head {head[:12]} (expected pkg.module.function, pkg.module.Class or pkg.module.Class.method)"
        )
    base_items = compute_closure(git, base, base_roots, base_index)
    head_items = compute_closure(git, head, roots, head_index)
    changes = diff_closures(base_items, head_items)
    progress(f"cache key: static closure {len(head_items)} items at head, {len(changes)} changed")

    new_fields: list[NewField] = []
    class_roots = {name for name, item in head_items.items() if item.kind == "class" and name in roots}
    for name in sorted(class_roots):
        item = head_items[name]
        if name not in base_items:
            continue
        added = [f for f in item.fields if f not in base_items[name].fields]
        # one new field and nothing else changed in the class: a key change the probe sees is this field's
        only_field = len(added) == 1 and _digest_without(head_index, item, added) == base_items[name].digest
        for field in added:
            coverage = field_coverage(head_index, item, field, head_items)
            line = _field_line(head_index, item, field)
            new_fields.append(
                NewField(
                    name,
                    field,
                    item.path,
                    line,
                    not coverage.seen,
                    coverage.evidence,
                    excluded=coverage.excluded,
                    assumed=coverage.assumed,
                    only_change=only_field,
                )
            )

    sites = factor_sites(git, head, roots, head_index)
    result = KeyChange(
        base=base,
        head=head,
        roots=roots,
        roots_found=bool(head_items or base_items),
        closure_changes=changes,
        new_fields=new_fields,
        factors_base=factor_names(git, base, base_roots, base_index),
        factors_head=list(sites),
        probe_status="not-configured" if config.probe is None else "not-run",
        base_items=base_items,
        head_items=head_items,
        factor_lines=sites,
        roots_added=tuple(r for r in roots if r in at_head and r not in at_base),
        roots_removed=tuple(r for r in roots if r in at_base and r not in at_head),
    )
    want_probe = probe if probe is not None else bool(changes or new_fields)
    if result.introduced:
        logger.info("cache-key probe skipped: the key roots do not exist at base %s", base[:12])
        return result
    old: ProbeRun | None = None
    if config.probe is not None and want_probe:
        progress(f"cache key: running the probe at base{setup_note(base_config.probe or config.probe)}")
        old = run_probe(git, base, base_config.probe or config.probe)
        progress(
            f"cache key: probe at base {old.status} in {old.seconds:.1f}s; running it at head{setup_note(config.probe)}"
        )
        new = run_probe(git, head, config.probe)
        progress(f"cache key: probe at head {new.status} in {new.seconds:.1f}s")
        _merge_probe(result, old, new)
        if result.probe_status == "ok":
            result.new_fields = [_probe_verdict(result, f) for f in result.new_fields]
    elif config.probe is not None and changes:
        logger.info("cache-key probe skipped (probe=%s)", probe)
    base_probe = base_config.probe or config.probe
    if hashed_sources and base_probe is not None:
        _find_hashed_sources(git, result, base_probe, run=probe is not False, known=old, progress=progress)
    return result


def _find_hashed_sources(
    git: GitRepo,
    result: KeyChange,
    probe: ProbeConfig,
    *,
    run: bool,
    known: ProbeRun | None,
    progress: ProgressFn,
) -> None:
    """Fill `result.hashed_sources` from the base's listing of hashed files (`known`: the probe's
    run at base, when step 2 made one). Nothing runs when the change modifies no file existing at
    base: a file it adds is in no listing of the base (its addition changes the key through code
    the closure sees, such as a glob, or not at all)."""
    if not listable_paths(git, result.base, result.head):
        return
    listing = base_listing(git, result.base, probe, run=run, known=known, progress=progress)
    if listing is None:
        result.sources_origin = "unknown"
        progress("cache key: the files the key hashes at base are not known")
        return
    result.sources_origin = listing.origin
    result.hashed_sources = changed_sources(git, result.base, result.head, listing.sources)
    count = sum(len(paths) for paths in result.hashed_sources.values())
    progress(f"cache key: {count} changed file(s) hashed by their bytes (listing from the {listing.origin})")


def _probe_verdict(change: KeyChange, field: NewField) -> NewField:
    """What the probe adds to the static reading of a new field: every reference key kept means the
    key does not see it (unless the code visibly hashes the whole object); keys changed while the
    class is the only changed part of the key's code means it does (never "ignored" then)."""
    if not change.confirmed:
        if field.ignored or field.assumed:
            note = "; the probe sees the same key at base and head"
            return dataclasses.replace(field, ignored=True, evidence=field.evidence + note, probe="unchanged")
        return field
    if not field.ignored or field.excluded:
        return field
    if field.only_change and all(c.name == field.class_name for c in change.closure_changes):
        factors = ", ".join(change.factors_changed) or KEY_ITSELF
        evidence = (
            f"the probe saw the key change ({factors}) and `{field.class_name}` is the only changed part of its code"
        )
        return dataclasses.replace(field, ignored=False, evidence=evidence, probe="changed")
    return dataclasses.replace(field, probe="changed-elsewhere")


def _digest_without(index: ModuleIndex, item: ClosureItem, fields: list[str]) -> str:
    """The closure digest of class `item` with the declarations of `fields` removed."""
    mod_name, _, cls_name = item.name.rpartition(".")
    mod = index.module(mod_name)
    node = mod.defs.get(cls_name) if mod else None
    assert isinstance(node, ast.ClassDef)
    trimmed = copy.copy(node)
    trimmed.body = [
        stmt
        for stmt in node.body
        if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in fields)
    ]
    return digest(trimmed)


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
    result.probe_worktrees = (old.worktree, new.worktree)
    for case in list(dict.fromkeys([*old.cases, *new.cases])):
        o, n = old.cases.get(case), new.cases.get(case)
        result.cases.append(
            CaseKeys(
                case,
                o["key"] if o else None,
                n["key"] if n else None,
                dict(o["factors"]) if o else {},
                dict(n["factors"]) if n else {},
                new_artifact=n.get("artifact") if n else None,
            )
        )
    if new.cases:
        result.factors_head = list(next(iter(new.cases.values()))["factors"])
    if old.cases:
        result.factors_base = list(next(iter(old.cases.values()))["factors"])
