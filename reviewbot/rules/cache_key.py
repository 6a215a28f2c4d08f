"""`cache-key-change` (P4-PROCESS) and `key-ignores-field` (P0-BLOCKER), from a `KeyChange`.

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
