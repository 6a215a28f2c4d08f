"""reviewbot.ruff.ruff_started runs the real ruff in the background: its hits by relative name once
waited for (the same hits on every call), nothing for no files, and a block left without waiting
removes its files."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from reviewbot.ruff import ruff_started

BARE = "try:\n    run()\nexcept:\n    pass\n"
BLIND = "try:\n    run()\nexcept Exception:\n    pass\n"


@pytest.fixture(autouse=True)
def _temp_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_hits_by_relative_name_once_waited_for(tmp_path: Path) -> None:
    with ruff_started({"head/pkg/a.py": BARE, "base/pkg/a.py": BLIND, "head/b.py": "x = 1\n"}) as wait:
        hits = wait()
        assert wait() is hits
    assert {name: [(hit.code, hit.line) for hit in found] for name, found in hits.items()} == {
        "head/pkg/a.py": [("E722", 3)],
        "base/pkg/a.py": [("BLE001", 3)],
    }
    assert list(tmp_path.iterdir()) == []


def test_no_files_no_ruff(tmp_path: Path) -> None:
    with ruff_started({}) as wait:
        assert wait() == {}
    assert list(tmp_path.iterdir()) == []


def test_a_block_left_without_waiting_removes_the_files(tmp_path: Path) -> None:
    with ruff_started({"head/a.py": BARE}):
        (made,) = tmp_path.iterdir()
        assert (made / "files" / "head" / "a.py").read_text() == BARE
    assert not made.exists()
