"""reviewbot.index_cache with the exception index on a real git repository in a temp dir: a warm
index equals a cold one and reads no blob, an edited file is read and scanned again (the key is its
blob id), a file copied unchanged is not, a review fills the cache in the git directory, and a
cache file that is not one is moved aside with a warning."""

from __future__ import annotations

import logging
import sqlite3
import threading
from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot import pysource
from reviewbot.engine import run_review
from reviewbot.exception_index import ExceptionIndex, blob_digest, file_facts, index_revision
from reviewbot.gitrepo import GitRepo
from reviewbot.index_cache import CACHE_FILE, FactsCache

ERRORS = "class CacheError(RuntimeError):\n    pass\n\n\nclass CacheMiss(CacheError):\n    pass\n"
LOADER = """
from pkg.errors import CacheMiss


def fail(key):
    raise CacheMiss(key)


def load(read, key):
    try:
        return read(key)
    except CacheMiss:
        raise
    except OSError:
        fail(key)


def top(read):
    return load(read, "k")
"""


@pytest.fixture()
def repo(tmp_path: Path) -> Repo:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/errors.py": ERRORS, "pkg/loader.py": LOADER, "pkg/broken.py": "def ("})
    return repo


def _summary(index: ExceptionIndex) -> tuple:
    return (
        [(c.full_name, c.path, c.line, c.bases) for c in index.classes],
        [c.full_name for c in index.subclasses_of("RuntimeError")],
        index.handlers_of("CacheMiss"),
        index.raised_in("CacheMiss"),
        sorted(index.reaching({"fail"})),
        index.always_raises("fail"),
        index.always_raises("load"),
        index.torch_imported,
        index.files,
    )


class CountingRepo(GitRepo):
    """A `GitRepo` that keeps the paths whose blobs it reads."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read_paths: list[str] = []

    def read(self, rev: str, path: str) -> str | None:
        self.read_paths.append(path)
        return super().read(rev, path)


def test_a_warm_index_equals_a_cold_one_and_reads_nothing(repo: Repo, tmp_path: Path) -> None:
    with GitRepo(repo.path) as git:
        cold = index_revision(git, "HEAD")
        with FactsCache(tmp_path / "facts.sqlite3") as cache:
            filled = index_revision(git, "HEAD", cache=cache)
    trees = pysource.Trees()
    with CountingRepo(repo.path) as git, FactsCache(tmp_path / "facts.sqlite3") as cache:
        warm = index_revision(git, "HEAD", trees, cache)
    assert _summary(cold) == _summary(filled) == _summary(warm)
    assert _summary(warm)[4] == ["fail", "load", "top"] and warm.files == 3  # broken.py does not parse
    # every file's entry came from the cache by its blob id, the unparsable one's too
    assert len(trees) == 0 and git.read_paths == []


def test_an_edited_file_is_read_and_scanned_again_a_copied_one_is_not(repo: Repo, tmp_path: Path) -> None:
    with GitRepo(repo.path) as git, FactsCache(tmp_path / "facts.sqlite3") as cache:
        index_revision(git, "HEAD", cache=cache)
    repo.commit(
        {"pkg/errors.py": ERRORS + "\n\nclass Evicted(CacheError):\n    pass\n", "pkg/copied.py": LOADER}, "more"
    )
    trees = pysource.Trees()
    with CountingRepo(repo.path) as git, FactsCache(tmp_path / "facts.sqlite3") as cache:
        index = index_revision(git, "HEAD", trees, cache)
    assert "pkg.errors.Evicted" in [c.full_name for c in index.subclasses_of("RuntimeError")]
    assert len(trees) == 1 and git.read_paths == ["pkg/errors.py"]
    # the copy's sites come from the cached entry of the loader's blob, under the copy's path
    assert [site.path for site in index.handlers_of("CacheMiss")] == ["pkg/copied.py", "pkg/loader.py"]


def test_the_digest_names_the_blob_and_the_scanner(repo: Repo) -> None:
    with GitRepo(repo.path) as git:
        blobs = dict(git.list_blobs("HEAD"))
    assert blobs["pkg/loader.py"] == repo.git("rev-parse", "HEAD:pkg/loader.py").strip()
    assert (
        blob_digest(blobs["pkg/loader.py"])
        == blob_digest(blobs["pkg/loader.py"])
        != blob_digest(blobs["pkg/errors.py"])
    )
    assert file_facts("def (", "broken.py", pysource.Trees()) is None


def test_a_review_keeps_the_facts_in_the_git_directory(repo: Repo) -> None:
    repo.branch("feature")
    repo.commit({"pkg/loader.py": LOADER.replace("except OSError:", "except Exception:")}, "broaden")
    run_review(repo.path, "main", "feature", suites="none")
    stored = repo.path / ".git" / CACHE_FILE
    with sqlite3.connect(stored) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM facts").fetchone()
    assert count == 4  # four distinct texts at the head: __init__, errors, loader, broken
    assert repo.git("status", "--porcelain") == ""


def test_a_file_that_is_no_cache_is_moved_aside_with_a_warning(
    repo: Repo, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "facts.sqlite3"
    path.write_bytes(b"not a database, " * 200)
    with (
        caplog.at_level(logging.WARNING, logger="reviewbot.index_cache"),
        GitRepo(repo.path) as git,
        FactsCache(path) as cache,
    ):
        index = index_revision(git, "HEAD", cache=cache)
    assert [c.full_name for c in index.subclasses_of("RuntimeError")] == [
        "pkg.errors.CacheError",
        "pkg.errors.CacheMiss",
    ]
    (record,) = caplog.records
    assert "is unusable" in record.getMessage() and "moved to facts.sqlite3.unreadable" in record.getMessage()
    assert (tmp_path / "facts.sqlite3.unreadable").read_bytes().startswith(b"not a database")
    with GitRepo(repo.path) as git, FactsCache(path) as cache:  # the next review starts a fresh file
        index_revision(git, "HEAD", cache=cache)
    assert path.exists()


def test_a_cache_that_cannot_be_made_is_a_warning(repo: Repo, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "git-dir").write_text("a file where the cache's directory would go\n")
    with (
        caplog.at_level(logging.WARNING, logger="reviewbot.index_cache"),
        GitRepo(repo.path) as git,
        FactsCache.at(tmp_path / "git-dir") as cache,
    ):
        index = index_revision(git, "HEAD", cache=cache)
    assert index.files == 3
    (record,) = caplog.records
    assert "cannot be made" in record.getMessage() and "indexing without it" in record.getMessage()


def test_two_threads_fill_one_cache_file(repo: Repo, tmp_path: Path) -> None:
    path = tmp_path / "facts.sqlite3"
    results: list[tuple] = []

    def index_once() -> None:
        with GitRepo(repo.path) as git, FactsCache(path) as cache:
            results.append(_summary(index_revision(git, "HEAD", cache=cache)))

    threads = [threading.Thread(target=index_once) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2 and results[0] == results[1]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM facts").fetchone() == (4,)
