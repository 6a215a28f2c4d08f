"""A changed Python file the reviewing interpreter cannot parse at head is not skipped silently: the
review carries a note naming it, the Python version and the parser's reason, in the review's
language; the other changed files are reviewed as usual."""

from __future__ import annotations

import sys
from pathlib import Path

from engine_gitrepos import Repo

from reviewbot import pysource
from reviewbot.engine import run_review
from reviewbot.render import render_markdown

BASE = "def load(path):\n    return open(path).read()\n"
SWALLOW = (
    "import json\n\n\ndef load(path):\n    try:\n        return json.loads(open(path).read())\n"
    "    except Exception:\n        return {}\n"
)
BROKEN = "def size(path:\n    return 0\n"


def test_a_file_that_does_not_parse_is_a_note_and_the_others_are_reviewed(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/io.py": BASE, "pkg/sizes.py": BASE}, "base")
    repo.branch("change", "main")
    repo.commit({"pkg/io.py": SWALLOW, "pkg/sizes.py": BROKEN}, "change")
    review = run_review(repo.path, "main", "change", suites="none")

    python = ".".join(map(str, sys.version_info[:2]))
    notes = [note for note in review.notes if note.message_id == "review-note.not-parsed"]
    assert [note.params["path"] for note in notes] == ["pkg/sizes.py"]
    assert notes[0].params["python"] == python
    assert notes[0].params["reason"] == pysource.parse_error(BROKEN, "pkg/sizes.py")
    assert "at line 1" in notes[0].params["reason"]
    text = notes[0].text("en")
    assert text.startswith(f"not reviewed by the static rules: pkg/sizes.py does not parse with Python {python}")
    assert "静态规则未审查：pkg/sizes.py" in render_markdown(review, "zh")
    assert "not reviewed by the static rules: pkg/sizes.py" in render_markdown(review, "en")
    # the file that parses is still reviewed
    assert any(f.path == "pkg/io.py" and f.rule == "broad-except" for f in review.findings)
    assert not any(f.path == "pkg/sizes.py" for f in review.findings)
