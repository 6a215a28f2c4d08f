"""findings.apply_evidence_policy: the one place where severity meets evidence."""

from __future__ import annotations

import pytest

from reviewbot.findings import (
    PATTERN_ONLY,
    UNCONFIRMED_CAP,
    Evidence,
    EvidenceKind,
    Finding,
    Severity,
    apply_evidence_policy,
)


def _finding(severity: Severity, evidence: Evidence = PATTERN_ONLY) -> Finding:
    return Finding(
        rule="broad-except",
        severity=severity,
        path="pkg/mod.py",
        line_start=3,
        line_end=4,
        message_id="broad-except.swallows",
        params={"label": "except Exception"},
        evidence=evidence,
    )


SWALLOWED = Evidence(
    EvidenceKind.EXPERIMENT,
    "evidence.experiment-not-run",
    {"experiment": "exception injection", "reason": "stands in for an experiment text"},
)


@pytest.mark.parametrize("severity", [Severity.P0, Severity.P1])
def test_pattern_alone_is_capped_and_says_unconfirmed_and_why(severity: Severity) -> None:
    capped = apply_evidence_policy(_finding(severity))
    assert capped.severity is UNCONFIRMED_CAP is Severity.P2
    assert capped.evidence.claimed is severity and not capped.evidence.confirmed
    assert capped.evidence.text("en") == (
        f"unconfirmed (would be {severity.value} with proof): a static pattern in the changed code; "
        "no test or experiment of this review exercised it"
    )
    assert capped.evidence.text("zh").startswith(f"未证实（若有证据将是 {severity.value}）")
    assert capped.evidence.to_json()["claimed"] == severity.value
    # applied twice it is stable, and the fingerprint is untouched
    assert apply_evidence_policy(capped) == capped
    assert capped.fingerprint == _finding(severity).fingerprint


@pytest.mark.parametrize("severity", [Severity.P2, Severity.P3, Severity.P4])
def test_findings_at_or_below_the_cap_pass_unchanged_but_still_read_unconfirmed(severity: Severity) -> None:
    finding = _finding(severity)
    assert apply_evidence_policy(finding) is finding
    assert finding.evidence.text("en").startswith("unconfirmed: a static pattern")


@pytest.mark.parametrize("kind", [EvidenceKind.TEST, EvidenceKind.PROBE, EvidenceKind.EXPERIMENT])
def test_confirming_evidence_keeps_the_blocker(kind: EvidenceKind) -> None:
    evidence = Evidence(kind, SWALLOWED.message_id, SWALLOWED.params)
    kept = apply_evidence_policy(_finding(Severity.P0, evidence))
    assert kept.severity is Severity.P0
    assert kept.evidence.confirmed and kept.evidence.text("en").startswith("the exception injection experiment")


def test_an_experiment_upgrades_through_with_evidence_and_one_that_shows_no_harm_is_capped() -> None:
    noted = _finding(Severity.P3)  # e.g. a catch-all whose noqa comment gives a reason
    upgraded = apply_evidence_policy(noted.with_evidence(SWALLOWED, Severity.P0))
    assert (upgraded.severity, upgraded.evidence.kind) == (Severity.P0, EvidenceKind.EXPERIMENT)

    harmless = Evidence(EvidenceKind.EXPERIMENT, SWALLOWED.message_id, SWALLOWED.params, shows_harm=False)
    capped = apply_evidence_policy(_finding(Severity.P0).with_evidence(harmless))
    assert capped.severity is Severity.P2
    assert capped.evidence.text("en").startswith(
        "unconfirmed (would be P0-BLOCKER with proof): the exception injection experiment could not run"
    )

    no_test = Evidence(EvidenceKind.PATTERN, "evidence.no-test-reaches", {"candidates": 4})
    unverified = apply_evidence_policy(_finding(Severity.P0).with_evidence(no_test))
    assert unverified.severity is Severity.P2
    assert "no test executes this try body (4 candidate test(s)" in unverified.evidence.text("en")

    with pytest.raises(AssertionError):
        noted.with_evidence(capped.evidence)  # `claimed` belongs to the policy
