"""Findings: what a rule reports, the evidence behind it, and the fingerprint that recognises it
across pushes.

A `Finding` is language-neutral data: a message id and its parameters; the text comes from the
message catalogs (`reviewbot.messages`) in the review's language. `params` identify the finding and
are hashed into the fingerprint; `extra` holds further values the texts show (keys, log paths,
quoted claims) that may change from push to push without making it a new finding. Identifiers,
paths and severity labels stay in English in every language.

The fingerprint hashes (rule, path after renames, enclosing qualified name, message id, normalised
params), so a finding keeps its fingerprint when lines move, unrelated code changes or a message is
reworded; digits and whitespace are removed from the params before hashing for the same reason, and a
message id worded by a property the change can alter is hashed as the id it rewords (`SAME_FINDING`).

`evidence` says what backs the finding: `pattern` (a static pattern only), `test` (a failing test),
`probe` (the cache-key probe) or `experiment` (an experiment the bot ran). Severity follows the
evidence, enforced in one place, `apply_evidence_policy`, which the engine applies to every finding
after the configured severity overrides: a `P0-BLOCKER` or `P1-PERF` needs *confirming* evidence
(kind `test`, `probe` or `experiment` with `shows_harm`); any other finding is capped at
`P2-MAINTAIN` and its evidence text reads "unconfirmed (would be P0-BLOCKER with proof): <why>",
the why being the evidence's own message ("no test or experiment of this review exercised it",
"no test executes this try body", an experiment that could not run, ...).

How an experiment plugs in (before the policy runs): rules report the severity the problem has
when proven (`P0` for a handler that swallows `AssertionError`) with `PATTERN_ONLY`; the experiment
replaces the evidence with what it saw, `finding.with_evidence(Evidence(EvidenceKind.EXPERIMENT,
"evidence.<id>", params), severity)`: harm shown keeps or sets the severity (`P0`, or `P2` for a
swallowed project error); harm not shown is `shows_harm=False` (capped, says unconfirmed), the
finding is dropped, or it is replaced by a note saying what the experiment showed (the exception
injection experiment's `<rule>.refuted`, `P3`); a handler no test reaches keeps `PATTERN` kind with a message saying so
(`evidence.no-test-reaches`), and one the experiment could not run on `evidence.experiment-not-run`.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any

from reviewbot import messages
from reviewbot.severity import Severity

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalise_message(message: str) -> str:
    """Lower-case, digits dropped, whitespace collapsed: line numbers and reflowing do not count."""
    return _SPACE.sub(" ", _DIGITS.sub("", message)).strip().lower()


class EvidenceKind(enum.Enum):
    """What backs a finding, weakest first."""

    PATTERN = "pattern"
    TEST = "test"
    PROBE = "probe"
    EXPERIMENT = "experiment"


CONFIRMING_KINDS = frozenset({EvidenceKind.TEST, EvidenceKind.PROBE, EvidenceKind.EXPERIMENT})


@dataclasses.dataclass(frozen=True)
class Evidence:
    """`message_id` names an evidence text in the catalogs (`message` part only): what was seen,
    or for unconfirmed evidence why nothing confirms it.

    `shows_harm`: the test, probe or experiment showed the harm the finding claims (False: it ran
    but did not; meaningless for `pattern`). `claimed`: set by `apply_evidence_policy` when it
    capped the finding, the severity the finding would carry with proof.
    """

    kind: EvidenceKind
    message_id: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    shows_harm: bool = True
    claimed: Severity | None = None

    @property
    def confirmed(self) -> bool:
        """A test, the probe or an experiment showed the harm: the finding may block."""
        return self.kind in CONFIRMING_KINDS and self.shows_harm

    def text(self, language: str) -> str:
        """The evidence line; unconfirmed evidence reads "unconfirmed (would be X with proof): why"."""
        own = messages.render(self.message_id, self.params, language).message
        if self.confirmed:
            return own
        claimed = self.claimed.value if self.claimed is not None else ""
        return messages.render("evidence.unconfirmed", {"claimed": claimed, "reason": own}, language).message

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "message_id": self.message_id,
            "params": dict(self.params),
            "confirmed": self.confirmed,
            "claimed": self.claimed.value if self.claimed is not None else None,
            "text": self.text("en"),
        }


PATTERN_ONLY = Evidence(EvidenceKind.PATTERN, "evidence.pattern")

# The most severe label a finding without confirming evidence may carry.
UNCONFIRMED_CAP = Severity.P2

# Message ids that word a finding by a property the change itself can alter, each hashed into the
# fingerprint as the id it rewords: the finding keeps its fingerprint across base and head (round 26:
# a catch-all's try guarding one operation or several, `broad_except._swallow_message`; round 29: its
# handler showing the error it takes or not, a report added or dropped by the change).
SAME_FINDING = {
    "broad-except.swallows-one-operation": "broad-except.swallows",
    "broad-except.swallows-reported": "broad-except.swallows",
}


def apply_evidence_policy(finding: Finding) -> Finding:
    """The one place severity meets evidence: a finding more severe than its cap
    (`finding.unconfirmed_cap`, `UNCONFIRMED_CAP` unless the rule set a lower one) whose evidence is
    not `confirmed` (a pattern alone, or a test/probe/experiment that did not show the harm) becomes
    the cap, and its evidence records the label it asked for (`claimed`) so the text says it is
    unconfirmed, what it would be and why. Applied once, by the engine, after the configured
    severity overrides; findings at or below the cap pass unchanged."""
    cap = finding.unconfirmed_cap
    if finding.evidence.confirmed or finding.severity.rank >= cap.rank:
        return finding
    evidence = dataclasses.replace(finding.evidence, claimed=finding.severity)
    return dataclasses.replace(finding, severity=cap, evidence=evidence)


def _canonical(params: Mapping[str, Any]) -> str:
    return normalise_message(json.dumps(params, sort_keys=True, ensure_ascii=False, default=str))


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem at `path:line_start-line_end` (head revision, 1-based, inclusive).

    `in_diff` is False for findings not anchored to a changed line (suite failures, the cache-key
    notice): the service posts those in the summary comment instead of inline. `unconfirmed_cap`:
    the severity the finding keeps while nothing confirms it (`apply_evidence_policy`); a rule sets
    a lower one than `UNCONFIRMED_CAP` where what the pattern shows is less than its claim (round 19:
    a reported fallback to another path claims `P0` for the injection experiment to confirm, and is
    a `P3` unconfirmed).
    """

    rule: str
    severity: Severity
    path: str
    line_start: int
    line_end: int
    message_id: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    qualname: str = ""
    in_diff: bool = True
    details: str = ""
    evidence: Evidence = PATTERN_ONLY
    unconfirmed_cap: Severity = UNCONFIRMED_CAP

    @property
    def fingerprint(self) -> str:
        message_id = SAME_FINDING.get(self.message_id, self.message_id)
        text = "\x1f".join((self.rule, self.path, self.qualname, message_id, _canonical(self.params)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def location(self) -> str:
        if self.line_start <= 0:
            return self.path
        if self.line_end > self.line_start:
            return f"{self.path}:{self.line_start}-{self.line_end}"
        return f"{self.path}:{self.line_start}"

    def text(self, language: str) -> messages.Text:
        """(message, why, fix) in `language`."""
        return messages.render(self.message_id, {**self.extra, **self.params}, language)

    @property
    def message(self) -> str:
        return self.text("en").message

    @property
    def why(self) -> str:
        return self.text("en").why

    @property
    def fix(self) -> str:
        return self.text("en").fix

    def with_severity(self, severity: Severity) -> Finding:
        return dataclasses.replace(self, severity=severity)

    def with_evidence(self, evidence: Evidence, severity: Severity | None = None) -> Finding:
        """This finding backed by `evidence` (what a test, the probe or an experiment saw), at
        `severity` when given (what the evidence shows), else at the rule's own. For experiments,
        before `apply_evidence_policy` runs; `claimed` is the policy's, not the caller's."""
        assert evidence.claimed is None, "claimed is set by apply_evidence_policy only"
        return dataclasses.replace(self, evidence=evidence, severity=severity or self.severity)

    def to_json(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.path,
            "line_start": self.line_start,
            "line_end": self.line_end,
            "qualname": self.qualname,
            "in_diff": self.in_diff,
            "message_id": self.message_id,
            "params": dict(self.params),
            "extra": dict(self.extra),
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "details": self.details,
            "evidence": self.evidence.to_json(),
            "fingerprint": self.fingerprint,
        }
