"""`not-utf8`: a changed Python file whose head version is not valid UTF-8.

The engine reads such a file with replacement characters and reviews it like any other; this
rule says so, at the line of the first invalid byte (`GitRepo.not_utf8`). Without an encoding
declaration (PEP 263, on one of the first two lines) Python refuses to import the file:
P2-MAINTAIN. With one naming another codec the file is valid Python but the only one of its kind
the tools must be told about: P3-STYLE. Reported only when the base version was UTF-8.
"""

from __future__ import annotations

import re

from reviewbot.findings import Evidence, EvidenceKind, Finding, Severity

_DECLARATION = re.compile(r"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")


def declared_encoding(source: str) -> str | None:
    """The PEP 263 encoding declared on one of the first two lines, if any."""
    for line in source.splitlines()[:2]:
        match = _DECLARATION.match(line)
        if match:
            return match.group(1)
    return None


def check(path: str, source: str, line: int, offset: int, *, in_diff: bool) -> Finding:
    """The finding for `path` (head text `source`, read with replacement) whose first byte that is
    not UTF-8 is at `offset`, on `line`."""
    encoding = declared_encoding(source)
    evidence = Evidence(EvidenceKind.EXPERIMENT, "evidence.not-utf8", {"offset": offset, "line": line})
    return Finding(
        "not-utf8",
        Severity.P2 if encoding is None else Severity.P3,
        path,
        line,
        line,
        "not-utf8.undeclared" if encoding is None else "not-utf8.declared",
        params={} if encoding is None else {"encoding": encoding},
        extra={"line": line},
        in_diff=in_diff,
        evidence=evidence,
    )
