"""Severity labels of findings, shared by the rules, `.reviewbot.yml` and the renderer.

Kept apart from `findings.py` so that code which only reads configuration (the GPU regression
runner) imports no message catalogs or Jinja2.
"""

from __future__ import annotations

import enum


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
