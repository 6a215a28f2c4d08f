"""Findings: what a rule reports, the evidence behind it, and the fingerprint that recognises it
across pushes.

A `Finding` is language-neutral data: a message id and its parameters; the text comes from the
message catalogs (`reviewbot.messages`) in the review's language. `params` identify the finding and
are hashed into the fingerprint; `extra` holds further values the texts show (keys, log paths,
quoted claims) that may change from push to push without making it a new finding. Identifiers,
paths and severity labels stay in English in every language.

The fingerprint hashes (rule, path after renames, enclosing qualified name, message id, normalised
params), so a finding keeps its fingerprint when lines move, unrelated code changes or a message is
reworded; digits and whitespace are removed from the params before hashing for the same reason.

`evidence` says what backs the finding: `pattern` (a static pattern only, unconfirmed), `test`
(a failing test), `probe` (the cache-key probe) or `experiment` (an experiment the bot ran). The
severity follows the evidence (`apply_evidence_policy`): a pattern alone is at most `P2-MAINTAIN`.
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


@dataclasses.dataclass(frozen=True)
class Evidence:
    """`message_id` names an evidence text in the catalogs (`message` part only)."""

    kind: EvidenceKind
    message_id: str
    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)

    def text(self, language: str) -> str:
        return messages.render(self.message_id, self.params, language).message

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind.value,
            "message_id": self.message_id,
            "params": dict(self.params),
            "text": self.text("en"),
        }


PATTERN_ONLY = Evidence(EvidenceKind.PATTERN, "evidence.pattern")

# The most severe label a finding backed by a static pattern alone may carry.
UNCONFIRMED_CAP = Severity.P2


def apply_evidence_policy(finding: Finding) -> Finding:
    """A `P0-BLOCKER` needs proof (a failing test, the key probe or an experiment): one backed by a
    pattern alone becomes `UNCONFIRMED_CAP` and its evidence says it is unconfirmed and what it would
    have been. Applied once, by the engine, after the configured severity overrides."""
    if finding.evidence.kind is not EvidenceKind.PATTERN or finding.severity.rank >= UNCONFIRMED_CAP.rank:
        return finding
    evidence = Evidence(EvidenceKind.PATTERN, "evidence.unconfirmed", {"claimed": finding.severity.value})
    return dataclasses.replace(finding, severity=UNCONFIRMED_CAP, evidence=evidence)


def _canonical(params: Mapping[str, Any]) -> str:
    return normalise_message(json.dumps(params, sort_keys=True, ensure_ascii=False, default=str))


@dataclasses.dataclass(frozen=True)
class Finding:
    """One problem at `path:line_start-line_end` (head revision, 1-based, inclusive).

    `in_diff` is False for findings not anchored to a changed line (suite failures, the cache-key
    notice): the service posts those in the summary comment instead of inline.
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

    @property
    def fingerprint(self) -> str:
        text = "\x1f".join((self.rule, self.path, self.qualname, self.message_id, _canonical(self.params)))
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
