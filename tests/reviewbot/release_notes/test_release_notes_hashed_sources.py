"""Release notes on a real git history whose key hashes source files by their bytes: a commit that
only edits a hashed module (a logging line) changes the key, and is named as the change that did."""

import json

import pytest

from reviewbot.cli import main
from reviewbot.gitrepo import GitRepo as ReviewGitRepo
from reviewbot.keychange.probe import changed_sources, parse_probe_sources
from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.release_notes.conftest import GitRepo

CACHE_KEY_PY = '''\
"""The toy compiler's artifact-cache key: its version and the bytes of its code generator."""

import argparse
import hashlib
import json
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
HASHED = ("backend.py",)
VERSION = "1.0"


def _hash(value):
    return hashlib.sha256(value).hexdigest()[:16]


def compiler_source_hash():
    return _hash(b"".join((PACKAGE / name).read_bytes() for name in HASHED))


def cache_key_factors(opt_level):
    return {"opt_level": _hash(str(opt_level).encode()), "compiler_source": compiler_source_hash()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.parse_args()
    cases = {}
    for name, level in (("default", 2), ("fast", 3)):
        factors = cache_key_factors(level)
        cases[name] = {"factors": factors, "key": _hash(json.dumps(factors, sort_keys=True).encode())}
    sources = {"compiler_source": [f"toyc/{name}" for name in HASHED]}
    print(json.dumps({"cases": cases, "sources": sources}))


if __name__ == "__main__":
    main()
'''

BACKEND_PY = """\
def generate(graph):
    return [node.upper() for node in graph]
"""

LOGGED_BACKEND_PY = """\
import logging

logger = logging.getLogger(__name__)


def generate(graph):
    logger.debug("generating %d nodes", len(graph))
    return [node.upper() for node in graph]
"""

REVIEWBOT_YML = """\
cache_key:
  roots: [toyc.cache_key.cache_key_factors]
  probe:
    command: python -m toyc.cache_key --explain --json
    timeout_s: 60
"""


@pytest.fixture
def toy(tmp_path) -> GitRepo:
    repo = GitRepo(tmp_path / "toy")
    files = {
        "toyc/__init__.py": "",
        "toyc/cache_key.py": CACHE_KEY_PY,
        "toyc/backend.py": BACKEND_PY,
        "toyc/util.py": "def describe():\n    return 'toy'\n",
        ".reviewbot.yml": REVIEWBOT_YML,
    }
    repo.commit("Toy compiler whose key hashes its backend's bytes", files)
    repo.tag("v1.0")
    repo.squash_pr(91, "Log the generated node count", {"toyc/backend.py": LOGGED_BACKEND_PY})
    repo.squash_pr(92, "Describe better", {"toyc/util.py": "def describe():\n    return 'a toy compiler'\n"})
    repo.tag("v1.1")
    return repo


def _notes(repo: GitRepo, *extra: str) -> None:
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v1.0", "--to", "v1.1", *extra]
    assert main(argv) == 0


def test_a_logging_change_in_a_hashed_module_is_a_key_change(toy, capsys):
    _notes(toy, "--format", "json")
    captured = capsys.readouterr()
    upgrade = json.loads(captured.out)["upgrade"]
    # The key's closure (cache_key_factors and what it calls) did not change: only backend.py's bytes.
    assert upgrade["static_closure_changed"] is False
    assert upgrade["cache_key_changed"] is True
    assert upgrade["hashed_files_changed"] == {"compiler_source": ["toyc/backend.py"]}
    assert upgrade["factors_changed"] == ["compiler_source"]
    assert [(c["number"], c["source"], c["factors"], c["files"]) for c in upgrade["changed_by"]] == [
        (91, "hashed-source", ["compiler_source"], ["toyc/backend.py"])
    ]
    assert captured.err.count("which files the key hashes") == 2


def test_markdown_names_the_commit_and_the_file(toy, capsys):
    _notes(toy)
    out = capsys.readouterr().out
    assert "## Upgrade notes: compiled caches must be rebaked" in out
    assert (
        "- #91 Log the generated node count (factors: `compiler_source`) — changes `toyc/backend.py`, "
        "whose bytes the key hashes"
    ) in out
    assert "`compiler_source` hashes the bytes of files that changed: `toyc/backend.py`." in out
    assert "#92 Describe better (factors" not in out


def test_labels_do_not_hide_a_hashed_file_change(toy, capsys, monkeypatch):
    """The review labels only confirmed closure changes; the hashed file still names PR 91."""
    shas = toy.git("log", "--format=%H", "-2").split()
    with FakeGitHub() as gh:
        gh.state.add_repo("toy/compiler")
        for number, sha, labels in ((91, shas[1], ["logging"]), (92, shas[0], ["cache: invalidates"])):
            pull = gh.state.add_pull("toy/compiler", number, sha, "0" * 40, author="carol")
            pull.update(merged=True, state="closed", labels=[{"name": n} for n in labels])
        monkeypatch.setenv("GITHUB_API_URL", gh.base_url)
        _notes(toy, "--github", "toy/compiler", "--format", "json")
    upgrade = json.loads(capsys.readouterr().out)["upgrade"]
    assert [(c["number"], c["source"], c["files"]) for c in upgrade["changed_by"]] == [
        (91, "hashed-source", ["toyc/backend.py"]),
        (92, "label", []),
    ]


@pytest.mark.parametrize(
    ("sources", "error"),
    [
        ('"toyc/backend.py"', "is not an object"),
        ('{"compiler_source": "toyc/backend.py"}', "is not a list of paths"),
        ('{"compiler_source": ["/etc/passwd"]}', "outside the repository"),
        ('{"compiler_source": ["../up.py"]}', "outside the repository"),
    ],
)
def test_malformed_probe_sources_are_named(sources, error):
    with pytest.raises(ValueError, match=error):
        parse_probe_sources('{"cases": {}, "sources": ' + sources + "}")
    assert parse_probe_sources('{"cases": {}}') == {}


def test_changed_sources_counts_added_modified_and_deleted_files(toy):
    repo = ReviewGitRepo(toy.path)
    base = toy.head()
    toy.git("rm", "-q", "toyc/util.py")
    head = toy.commit("drop util, touch backend", {"toyc/backend.py": BACKEND_PY + "# tidy\n"})
    hashed = {"compiler_source": ["toyc/backend.py", "toyc/util.py", "toyc/other.py"], "unused": ["toyc/none.py"]}
    assert changed_sources(repo, base, head, hashed) == {"compiler_source": ("toyc/backend.py", "toyc/util.py")}
