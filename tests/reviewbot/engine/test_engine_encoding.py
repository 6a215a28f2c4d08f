"""Python sources that are not UTF-8: reviewed with replacement characters, and `not-utf8` says so."""

from __future__ import annotations

from pathlib import Path

from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.render import render_markdown

BROAD = b"def load(path):\n    try:\n        return open(path).read()\n    except Exception:\n        return ''\n"


def _commit_bytes(repo: Repo, files: dict[str, bytes], message: str) -> str:
    for rel, data in files.items():
        target = repo.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    repo.git("add", "-A")
    repo.git("commit", "-q", "-m", message)
    return repo.sha("HEAD")


def test_non_utf8_sources_are_reviewed_and_reported(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    old_latin = b"# caf\xe9\nX = 1\n"
    _commit_bytes(repo, {"pkg/__init__.py": b"", "pkg/old.py": old_latin}, "base")
    repo.branch("feature")
    _commit_bytes(
        repo,
        {
            "pkg/latin.py": b'"""Helpers."""\nNAME = "caf\xe9"\n\n\n' + BROAD,
            "pkg/declared.py": b"# -*- coding: latin-1 -*-\nNAME = 'na\xefve'\n",
            "pkg/old.py": old_latin + b"Y = '\xff'\n",  # not UTF-8 before the change either
            "pkg/nul.py": b"X = 1\x00\n",  # UTF-8 with a NUL byte: does not parse, must not crash
            "data/blob.bin": b"\x00\xff\xfe",
        },
        "non-utf8",
    )
    review = run_review(repo.path, "main", "feature", suites="none")
    by_path = {(f.path, f.rule): f for f in review.findings}
    undeclared = by_path[("pkg/latin.py", "not-utf8")]
    assert (undeclared.severity, undeclared.line_start, undeclared.message_id) == (
        Severity.P2,
        2,
        "not-utf8.undeclared",
    )
    assert undeclared.evidence.kind is EvidenceKind.EXPERIMENT
    assert undeclared.evidence.params == {"offset": len(b'"""Helpers."""\nNAME = "caf'), "line": 2}
    assert "line 2" in undeclared.message and "declares no encoding" in undeclared.message
    # the file was reviewed: the broad except in it is found
    assert ("pkg/latin.py", "broad-except") in by_path
    declared = by_path[("pkg/declared.py", "not-utf8")]
    assert (declared.severity, declared.params["encoding"]) == (Severity.P3, "latin-1")
    assert ("pkg/old.py", "not-utf8") not in by_path
    assert not any(f.path in ("pkg/nul.py", "data/blob.bin") for f in review.findings)
    zh = render_markdown(review, "zh")
    assert "此文件不是 UTF-8 编码" in zh and "此文件声明了 `latin-1` 编码" in zh
