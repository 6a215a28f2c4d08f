"""`cache-key-change` (P4-PROCESS), `key-ignores-field` and `key-shares-artifacts` (P0-BLOCKER),
from a `KeyChange`.

`key-shares-artifacts`: the probe shows the head keeping apart less than the base did (a factor
removed from the key, a factor that no longer differs between reference cases that differ in it, or
two reference cases with one key): different configurations then load each other's artifacts.

A change the probe confirms is a P4 finding naming the changed factors and the old and new key of
every reference case (the service labels the PR `cache: invalidates`, the release notes warn).
A change the probe does not confirm appears in the summary only; the engine anchors a confirmed one
on the changed lines it names when the diff touches them. A field added to a hashed config
class that the key does not see is P0 when the probe ran and kept every key (two configs differing only
in that field share artifacts); from the static analysis alone it stays unconfirmed (P2).
"""

from __future__ import annotations

from reviewbot.findings import PATTERN_ONLY, Evidence, EvidenceKind, Finding, Severity
from reviewbot.keychange import KeyChange


def check(change: KeyChange) -> list[Finding]:
    findings: list[Finding] = []
    probed_field = Evidence(EvidenceKind.PROBE, "evidence.key-probe-unchanged", {"cases": len(change.cases)})
    for field in change.new_fields:
        if not field.ignored:
            continue
        findings.append(
            Finding(
                rule="key-ignores-field",
                severity=Severity.P0,
                path=field.path,
                line_start=field.line,
                line_end=field.line,
                message_id="key-ignores-field.new-field",
                params={"field": field.field, "class_name": field.class_name},
                extra={"evidence": field.evidence},
                qualname=field.class_name,
                evidence=probed_field if change.probe_status == "ok" else PATTERN_ONLY,
            )
        )
    if change.probe_status == "ok":
        findings += _shared_artifacts(change)
    if change.confirmed:
        first = change.closure_changes[0] if change.closure_changes else None
        factors = ", ".join(change.factors_changed) or "(key differs)"
        rows = "; ".join(f"{c.case}: {c.old_key} -> {c.new_key}" for c in change.cases if c.changed)
        findings.append(
            Finding(
                rule="cache-key-change",
                severity=Severity.P4,
                path=first.path if first else "(cache key)",
                line_start=first.line if first else 0,
                line_end=first.end_line if first else 0,
                message_id="cache-key-change.confirmed",
                params={"factors": factors},
                extra={"rows": rows},
                qualname=first.name if first else "",
                details=rows,
                evidence=Evidence(
                    EvidenceKind.PROBE, "evidence.key-probe", {"cases": sum(1 for c in change.cases if c.changed)}
                ),
            )
        )
    return findings


def _collisions(change: KeyChange) -> list[str]:
    """Pairs of reference cases (``a / b``) with different keys at base and the same key at head."""
    both = [c for c in change.cases if c.old_key and c.new_key]
    return [
        f"{a.case} / {b.case}"
        for i, a in enumerate(both)
        for b in both[i + 1 :]
        if a.old_key != b.old_key and a.new_key == b.new_key
    ]


def _factors_stopped_varying(change: KeyChange) -> list[str]:
    """Factors that told two reference cases apart at base and no longer do at head (or are gone)."""
    both = [c for c in change.cases if c.old_key and c.new_key]
    stopped: list[str] = []
    for i, a in enumerate(both):
        for b in both[i + 1 :]:
            for name in a.old_factors:
                if name in stopped or a.old_factors[name] == b.old_factors.get(name):
                    continue
                if a.new_factors.get(name) == b.new_factors.get(name):
                    stopped.append(name)
    return stopped


def _shared_artifacts(change: KeyChange) -> list[Finding]:
    """P0 when the head makes configurations that the base kept apart share a key: a removed factor,
    a factor that stopped varying between reference cases, or two cases colliding outright."""
    removed = list(change.factors_removed)
    stopped = [f for f in _factors_stopped_varying(change) if f not in removed]
    collisions = _collisions(change)
    if not (removed or stopped or collisions):
        return []
    first = change.closure_changes[0] if change.closure_changes else None
    return [
        Finding(
            rule="key-shares-artifacts",
            severity=Severity.P0,
            path=first.path if first else "(cache key)",
            line_start=first.line if first else 0,
            line_end=first.end_line if first else 0,
            message_id="key-shares-artifacts.probe",
            params={
                "removed": ", ".join(removed) or "none",
                "stopped": ", ".join(stopped) or "none",
                "collisions": "; ".join(collisions) or "none",
            },
            qualname=first.name if first else "",
            evidence=Evidence(EvidenceKind.PROBE, "evidence.key-probe", {"cases": len(change.cases)}),
        )
    ]
