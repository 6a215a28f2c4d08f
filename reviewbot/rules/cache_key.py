"""Findings from a `KeyChange`: `cache-key-change` (P4-PROCESS), `key-shares-artifacts`,
`key-not-reproducible` and `key-ignores-field`.

`key-shares-artifacts` (P0 with probe evidence): the head keeps apart less than the base did — a
factor removed from the key (a factor renamed with the same value in every reference case is not
removed), a factor that no longer differs between reference cases that differ in it, or two
reference cases with one key where the base had two. Different configurations then load each
other's compiled artifacts: a correctness bug, not only a cache miss. Pairs of cases the probe
reports one artifact digest for at head share harmlessly: they are left out, and when nothing else
is shared the finding is a P4 note naming them. Without the probe (it did not
run or failed) a factor removed from the key function's literal is the same finding, unconfirmed.
Factors the base's key is not reproducible in are left out of these comparisons.

`key-not-reproducible` (from `reviewbot.experiments.key_stability`): factors that differ between two
runs of the probe at head (other worktree path, other `PYTHONHASHSEED`) are P0 with experiment
evidence when the base's are stable in them, P2 when the base's key was already unstable in them; a
base unstable where the head is not is P4 (the change from it is not reported as a key change).

`cache-key-change`: the probe confirms the key changed: P4 naming the changed factors and the old and
new key of every reference case (the service labels the PR `cache: invalidates`). A change the probe
does not confirm appears in the summary only. A change that edits files the key hashes by their
bytes (`KeyChange.hashed_sources`, listed by the probe at base) is the same event when the probe did
not confirm it by comparing keys: P4 `cache-key-change.hashed-source` naming the files and the
factor, with probe evidence, anchored on the first changed line of the first such file. Either
finding asks the PR description to say caches must be rebaked, so neither is reported when the PR
description already says so (`announces_key_change`); the summary and the label still show the change.

`key-ignores-field`: a field added to a hashed config class that the key does not see
(`reviewbot.keychange.fields`): P0 with probe evidence when the probe kept every reference key,
unconfirmed (P2) from the static reading alone or when other parts of the key's code changed too;
a field the code leaves out on purpose (by name, metadata or `exclude=True`) is P4, a reminder to
check that it cannot change compiled code.

Anchors: a finding about factors sits on the changed line of the key function that names one of
them; otherwise on the changed lines (added, or next to a deletion) of the first part of the key's
code the diff touches, so a key change made of added lines is posted inline. Only when the diff
touches none of the key's code does it go to the summary (`in_diff=False`).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

from reviewbot.diff import FileChange
from reviewbot.findings import PATTERN_ONLY, Evidence, EvidenceKind, Finding, Severity
from reviewbot.keychange import CaseKeys, KeyChange, NewField, Reproducibility


@dataclasses.dataclass(frozen=True)
class _Anchor:
    path: str
    line_start: int
    line_end: int
    qualname: str
    in_diff: bool


# Sentences of a PR description that tell readers the change invalidates compiled caches.
_ANNOUNCES = re.compile(
    r"\bre-?bak\w*|\bre-?build\w*\W+(?:\w+\W+){0,3}?cach\w*|cache:\s*invalidates"
    r"|\binvalidat\w*\W+(?:\w+\W+){0,4}?(?:cach\w*|artifacts?)\b|\bcach\w*\W+(?:\w+\W+){0,4}?invalidat\w*"
    r"|\bchang\w*\W+(?:\w+\W+){0,4}?(?:cache|artifact)[- ]keys?\b|\b(?:cache|artifact)[- ]keys?\W+(?:\w+\W+){0,3}?chang\w*"
    r"|缓存失效|缓存.{0,6}(?:重新生成|重建|作废)|重新生成.{0,6}缓存|缓存键.{0,8}(?:改变|变化|变了)|改变.{0,8}缓存键",
    re.IGNORECASE,
)
_NEGATED = re.compile(r"\b(?:not|no|never|without|nothing)\b|n't\b|不|没有|无需|无须", re.IGNORECASE)
_SENTENCES = re.compile(r"(?<=[.!?。；;！？])\s*|\n")


def announces_key_change(pr_body: str) -> bool:
    """True when a sentence of `pr_body` says, without negation, that caches must be rebaked or are
    invalidated, that the cache key changes, or names the `cache: invalidates` label ("caches must be
    rebaked", "this invalidates compiled caches", "changes the cache key", "缓存需要重新生成");
    "does not change the cache key" does not count."""
    return any(_ANNOUNCES.search(s) and not _NEGATED.search(s) for s in _SENTENCES.split(pr_body))


def check(change: KeyChange, changes: Mapping[str, FileChange], pr_body: str | None = None) -> list[Finding]:
    """All findings of `change`; `changes`: the diff's files by head path (for the anchors);
    `pr_body`: the PR description (None: not known, so the key-change finding is always reported)."""
    findings = [f for field in change.new_fields if (f := _field_finding(change, changes, field)) is not None]
    findings += _shared_artifacts(change, changes)
    findings += _reproducibility(change, changes)
    if pr_body is not None and announces_key_change(pr_body):
        return findings
    if change.hashed_changed and not change.confirmed:
        findings.append(_hashed_source_finding(change, changes))
    if change.confirmed:
        factors = ", ".join(change.factors_changed) or "(key differs)"
        rows = "; ".join(f"{c.case}: {c.old_key} -> {c.new_key}" for c in change.cases if c.changed)
        findings.append(
            _finding(
                "cache-key-change",
                Severity.P4,
                _anchor(change, changes, change.factors_changed),
                "cache-key-change.confirmed",
                {"factors": factors},
                Evidence(
                    EvidenceKind.PROBE, "evidence.key-probe", {"cases": sum(1 for c in change.cases if c.changed)}
                ),
                extra={"rows": rows},
                details=rows,
            )
        )
    return findings


def _hashed_source_finding(change: KeyChange, changes: Mapping[str, FileChange]) -> Finding:
    """`cache-key-change.hashed-source`: on the first changed line of the first hashed file the diff
    shows at head, under its own or its new name (the summary when every hashed file was deleted
    or only renamed)."""
    files = sorted({path for paths in change.hashed_sources.values() for path in paths})
    by_old_path = {c.old_path: c for c in changes.values() if c.old_path}
    anchor = _Anchor("(cache key)", 0, 0, "", False)
    for path in files:
        diff = changes.get(path) or by_old_path.get(path)
        lines = sorted((*diff.added_lines, *diff.deletion_points)) if diff is not None else []
        if diff is not None and lines:
            anchor = _Anchor(diff.path, lines[0], lines[0], "", True)
            break
    params = {"files": ", ".join(f"`{p}`" for p in files), "factors": ", ".join(change.hashed_sources)}
    evidence = Evidence(
        EvidenceKind.PROBE, "evidence.key-hashed-source", {"base": change.base[:12], "origin": change.sources_origin}
    )
    return _finding("cache-key-change", Severity.P4, anchor, "cache-key-change.hashed-source", params, evidence)


def _finding(
    rule: str,
    severity: Severity,
    anchor: _Anchor,
    message_id: str,
    params: dict[str, str],
    evidence: Evidence,
    *,
    extra: dict[str, str] | None = None,
    details: str = "",
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        path=anchor.path,
        line_start=anchor.line_start,
        line_end=anchor.line_end,
        message_id=message_id,
        params=params,
        extra=extra or {},
        qualname=anchor.qualname,
        in_diff=anchor.in_diff,
        details=details,
        evidence=evidence,
    )


def _qualname_at(change: KeyChange, path: str, line: int) -> str:
    spans = [
        (i.end_line - i.line, name)
        for name, i in change.head_items.items()
        if i.path == path and i.line <= line <= i.end_line
    ]
    return min(spans)[1] if spans else ""


def _anchor(change: KeyChange, changes: Mapping[str, FileChange], factors: Iterable[str] = ()) -> _Anchor:
    """Where a finding about `factors` (or the key in general) goes: see the module docstring."""
    for factor in factors:
        site = change.factor_lines.get(factor)
        if site is None:
            continue
        path, line = site
        diff = changes.get(path)
        if diff is not None and diff.touches(line, line):
            return _Anchor(path, line, line, _qualname_at(change, path, line), True)
    at_head = [c for c in change.closure_changes if c.change != "removed"]
    for item in sorted(at_head, key=lambda c: (c.path, c.line)):
        diff = changes.get(item.path)
        if diff is None:
            continue
        lines = sorted(n for n in (*diff.added_lines, *diff.deletion_points) if item.line <= n <= item.end_line)
        if lines:
            return _Anchor(item.path, lines[0], lines[-1], item.name, True)
    if change.closure_changes:
        first = change.closure_changes[0]
        return _Anchor(first.path, first.line, first.end_line, first.name, False)
    return _Anchor("(cache key)", 0, 0, "", False)


def _field_finding(change: KeyChange, changes: Mapping[str, FileChange], field: NewField) -> Finding | None:
    if not field.ignored:
        return None
    diff = changes.get(field.path)
    anchor = _Anchor(
        field.path, field.line, field.line, field.class_name, diff is not None and diff.touches(field.line, field.line)
    )
    params = {"field": field.field, "class_name": field.class_name}
    extra = {"evidence": field.evidence}
    if field.excluded:
        return _finding(
            "key-ignores-field", Severity.P4, anchor, "key-ignores-field.excluded", params, PATTERN_ONLY, extra=extra
        )
    if field.probe == "unchanged":
        evidence = Evidence(EvidenceKind.PROBE, "evidence.key-probe-unchanged", {"cases": len(change.cases)})
    elif field.probe == "changed-elsewhere":
        others = [f"`{c.name}`" for c in change.closure_changes if c.name != field.class_name][:5]
        where = ", ".join(others) or f"`{field.class_name}` beyond its new fields"
        evidence = Evidence(EvidenceKind.PATTERN, "evidence.key-probe-mixed", {"others": where})
    else:
        evidence = PATTERN_ONLY
    return _finding(
        "key-ignores-field", Severity.P0, anchor, "key-ignores-field.new-field", params, evidence, extra=extra
    )


def _separated_at_base(a_factors: Mapping[str, str], b_factors: Mapping[str, str], unstable: tuple[str, ...]) -> bool:
    names = dict.fromkeys([*a_factors, *b_factors])
    return any(a_factors.get(n) != b_factors.get(n) for n in names if n not in unstable)


def _same_artifact(a: CaseKeys, b: CaseKeys) -> bool:
    """Whether the probe reports one artifact for both cases at head: sharing a key is harmless."""
    return a.new_artifact is not None and a.new_artifact == b.new_artifact


def _collisions(change: KeyChange, same_artifact: bool = False) -> list[str]:
    """Pairs of reference cases (``a / b``) that the base kept apart (by a reproducible factor when
    its key is not reproducible) and that share one key at head: those the probe reports different
    (or no) artifacts for, or with ``same_artifact`` those it reports one artifact for."""
    both = [c for c in change.cases if c.old_key and c.new_key]
    unstable = change.unstable_base
    return [
        f"{a.case} / {b.case}"
        for i, a in enumerate(both)
        for b in both[i + 1 :]
        if a.new_key == b.new_key
        and (_separated_at_base(a.old_factors, b.old_factors, unstable) if unstable else a.old_key != b.old_key)
        and _same_artifact(a, b) == same_artifact
    ]


def _factors_stopped_varying(change: KeyChange, renamed: Mapping[str, str]) -> list[str]:
    """Factors that told two reference cases apart at base and no longer do at head (a renamed
    factor compared under its new name); factors the base is not reproducible in, and pairs the
    probe reports one artifact for at head, are left out."""
    both = [c for c in change.cases if c.old_key and c.new_key]
    stopped: list[str] = []
    for i, a in enumerate(both):
        for b in both[i + 1 :]:
            if _same_artifact(a, b):
                continue
            for name in a.old_factors:
                if name in stopped or name in change.unstable_base or a.old_factors[name] == b.old_factors.get(name):
                    continue
                new_name = renamed.get(name, name)
                if a.new_factors.get(new_name) == b.new_factors.get(new_name):
                    stopped.append(name)
    return stopped


def _shared_artifacts(change: KeyChange, changes: Mapping[str, FileChange]) -> list[Finding]:
    """P0 when the head makes configurations that the base kept apart share a key: a removed factor,
    a factor that stopped varying between reference cases, or two cases colliding outright."""
    if change.introduced:
        return []
    if change.probe_status != "ok":
        removed = change.factors_removed
        if not removed:
            return []
        if change.probe_status in ("failed", "timeout"):
            reason = (change.probe_error.splitlines() or [change.probe_status])[0]
        elif change.probe_status == "not-configured":
            reason = "no `cache_key.probe` is configured"
        else:
            reason = "the review ran no code of the revision"
        evidence = Evidence(
            EvidenceKind.PATTERN, "evidence.experiment-not-run", {"experiment": "key probe", "reason": reason}
        )
        params = {"removed": ", ".join(removed)}
        return [
            _finding(
                "key-shares-artifacts",
                Severity.P0,
                _anchor(change, changes),
                "key-shares-artifacts.static",
                params,
                evidence,
            )
        ]
    renamed = change.factors_renamed
    removed = [f for f in change.factors_removed if f not in renamed and f not in change.unstable_base]
    stopped = [f for f in _factors_stopped_varying(change, renamed) if f not in removed]
    collisions = _collisions(change)
    if not (removed or stopped or collisions):
        harmless = _collisions(change, same_artifact=True)
        if not harmless:
            return []
        params = {"collisions": "; ".join(harmless)}
        evidence = Evidence(
            EvidenceKind.PROBE,
            "evidence.key-probe-shared",
            {"cases": len(change.cases), "removed": "none", "stopped": "none", **params},
        )
        anchor = _anchor(change, changes)
        return [
            _finding(
                "key-shares-artifacts", Severity.P4, anchor, "key-shares-artifacts.same-artifact", params, evidence
            )
        ]
    params = {
        "removed": ", ".join(removed) or "none",
        "stopped": ", ".join(stopped) or "none",
        "collisions": "; ".join(collisions) or "none",
    }
    evidence = Evidence(EvidenceKind.PROBE, "evidence.key-probe-shared", {"cases": len(change.cases), **params})
    anchor = _anchor(change, changes, stopped)
    return [_finding("key-shares-artifacts", Severity.P0, anchor, "key-shares-artifacts.probe", params, evidence)]


def _reproducibility_evidence(run: Reproducibility, factors: list[str]) -> Evidence:
    params = {
        "revision": run.revision[:12],
        "factors": ", ".join(factors),
        "cases": ", ".join(run.cases),
        "seeds": " and ".join(str(s) for s in run.seeds),
        "worktrees": " and ".join(run.worktrees),
        "third": run.third_worktree,
        "third_seed": run.seeds[0],
        "by_process": ", ".join(f for f in run.by_process if f in factors),
        "by_seed": ", ".join(f for f in run.by_seed if f in factors),
    }
    return Evidence(EvidenceKind.EXPERIMENT, "evidence.key-reproducibility", params)


def _reproducibility(change: KeyChange, changes: Mapping[str, FileChange]) -> list[Finding]:
    head, base = change.reproducibility_head, change.reproducibility_base
    head_unstable = list(head.unstable) if head is not None and head.status == "ok" else None
    base_unstable = list(base.unstable) if base is not None and base.status == "ok" else []
    findings: list[Finding] = []
    if head is not None and head_unstable:
        new = [f for f in head_unstable if f not in base_unstable]
        old = [f for f in head_unstable if f in base_unstable]
        for factors, severity, message_id in (
            (new, Severity.P0, "key-not-reproducible.head"),
            (old, Severity.P2, "key-not-reproducible.preexisting"),
        ):
            if factors:
                params = {"factors": ", ".join(factors), "cases": ", ".join(head.cases)}
                findings.append(
                    _finding(
                        "key-not-reproducible",
                        severity,
                        _anchor(change, changes, factors),
                        message_id,
                        params,
                        _reproducibility_evidence(head, factors),
                    )
                )
    base_only = [f for f in base_unstable if head_unstable is None or f not in head_unstable]
    if base is not None and base_only:
        params = {"factors": ", ".join(base_only), "cases": ", ".join(base.cases)}
        anchor = dataclasses.replace(_anchor(change, changes, base_only), in_diff=False)
        findings.append(
            _finding(
                "key-not-reproducible",
                Severity.P4,
                anchor,
                "key-not-reproducible.base",
                params,
                _reproducibility_evidence(base, base_only),
            )
        )
    return findings
