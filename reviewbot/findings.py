"""Findings: what a rule reports, and the fingerprint that recognises it across pushes.

A `Finding` is language-neutral data: `message`, `why` and `fix` are English text; the
renderer may show the Simplified Chinese variants (`message_zh`, ...) when the rule gave them.
Identifiers, paths and severity labels stay in English in every language.

The fingerprint hashes (rule, path after renames, enclosing qualified name, normalised English
message), so a finding keeps its fingerprint when lines move or unrelated code changes; digits
and whitespace are removed from the message before hashing for the same reason.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import re
from typing import Any


class Severity(enum.Enum):
    """Severity labels, most severe first. The value is the label shown in every language."""

    P0 = "P0-BLOCKER"
    P1 = "P1-PERF"
    P2 = "P2-MAINTAIN"
    P3 = "P3-STYLE"
    P4 = "P4-PROCESS"

    @property
    def rank(self) -> int:
        return list(Severity).index(self)

    @classmethod
    def parse(cls, text: str) -> Severity:
        """Accept a full label (`P2-MAINTAIN`) or its prefix (`P2`)."""
        for sev in cls:
            if text == sev.value or text == sev.name:
                return sev
        raise ValueError(f"unknown severity {text!r}; expected one of {[s.value for s in cls]}")


_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def normalise_message(message: str) -> str:
    """Lower-case, digits dropped, whitespace collapsed: line numbers and reflowing do not count."""
    return _SPACE.sub(" ", _DIGITS.sub("", message)).strip().lower()


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
    message: str
    why: str
    fix: str
    qualname: str = ""
    in_diff: bool = True
    message_zh: str = ""
    why_zh: str = ""
    fix_zh: str = ""
    details: str = ""

    @property
    def fingerprint(self) -> str:
        text = "\x1f".join((self.rule, self.path, self.qualname, normalise_message(self.message)))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    @property
    def location(self) -> str:
        if self.line_start <= 0:
            return self.path
        if self.line_end > self.line_start:
            return f"{self.path}:{self.line_start}-{self.line_end}"
        return f"{self.path}:{self.line_start}"

    def text(self, language: str) -> tuple[str, str, str]:
        """(message, why, fix) in `language`, falling back to English where no translation exists."""
        if language == "zh":
            return (self.message_zh or self.message, self.why_zh or self.why, self.fix_zh or self.fix)
        return (self.message, self.why, self.fix)

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
            "message": self.message,
            "why": self.why,
            "fix": self.fix,
            "message_zh": self.message_zh,
            "why_zh": self.why_zh,
            "fix_zh": self.fix_zh,
            "details": self.details,
            "fingerprint": self.fingerprint,
        }
