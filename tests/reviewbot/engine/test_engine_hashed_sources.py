"""The review of a change to a file the cache key hashes by its bytes, on a real git repository: a
toy compiler whose probe lists `toyc/codegen.py` under `"sources"`. Editing that file (a logging
line: nothing in the key's code closure changes) is a key change with the full treatment: the
`hashed-source` status, the `cache-key-change` finding naming the file and the factor (unless the
PR description says caches must be rebaked), the service's `cache: invalidates` label and the
key-change section of the review. Editing an unlisted file is not. The base's listing is read from
the probe only when the change modifies files existing at base, and cached per base commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import Repo
from hashed_toy import KEY_PY, LOGGED_CODEGEN_PY, toy_files

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Finding, Severity
from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.hashed_sources import cache_root, listable_paths
from reviewbot.keychange.probe import changed_sources
from reviewbot.render import render_markdown
from reviewbot.repo_config import parse_config
from reviewbot.review import Review
from reviewbot.rules.cache_key import announces_key_change
from reviewbot.service.review_call import _cache_label

NEW_FACTOR_KEY_PY = KEY_PY.replace(
    '"codegen_source": source_hash()}', '"codegen_source": source_hash(), "mode": digest(b"fast")}'
)
assert NEW_FACTOR_KEY_PY != KEY_PY
ANNOUNCED = (
    "Log how many ops the code generator emits.\n\nThis changes the cache key: compiled caches must be rebaked.\n"
)
SILENT = "Log how many ops the code generator emits. It does not change the cache key.\n"


def _toy(path: Path, probe_args: str = "") -> Repo:
    repo = Repo(path)
    repo.commit(toy_files(probe_args), "toy compiler")
    for branch, files in (
        ("log-codegen", {"toyc/codegen.py": LOGGED_CODEGEN_PY}),
        ("util", {"toyc/util.py": "def describe():\n    return 'a toy compiler'\n"}),
        ("new-file", {"toyc/extra.py": "VALUE = 1\n"}),
        ("new-factor", {"toyc/key.py": NEW_FACTOR_KEY_PY, "toyc/codegen.py": LOGGED_CODEGEN_PY}),
    ):
        repo.branch(branch, "main")
        repo.commit(files, branch)
    repo.checkout("main")
    return repo


@pytest.fixture
def toy(tmp_path: Path) -> Repo:
    return _toy(tmp_path / "toy")


def _review(repo: Repo, head: str, lines: list[str] | None = None, **kwargs: object) -> Review:
    return run_review(repo.path, "main", head, progress=(lines.append if lines is not None else None), **kwargs)


def _key_findings(review: Review) -> list[Finding]:
    return [f for f in review.findings if f.rule == "cache-key-change"]


def _cached_listings(repo: Repo) -> list[Path]:
    return sorted(cache_root(GitRepo(repo.path)).glob("*.json"))


def test_a_logging_line_in_a_hashed_file_is_a_key_change(toy: Repo) -> None:
    lines: list[str] = []
    review = _review(toy, "log-codegen", lines)
    change = review.key_change
    assert change is not None
    # nothing in the key's code closure changed, so the key probe did not compare keys
    assert change.closure_changes == [] and change.probe_status == "not-run" and not change.confirmed
    assert change.hashed_sources == {"codegen_source": ("toyc/codegen.py",)}
    assert change.status == "hashed-source" and change.invalidates and change.sources_origin == "probe"
    assert review.invalidates_cache and review.to_json()["invalidates_cache"] is True
    assert _cache_label(change) is True  # the service sets `cache: invalidates`

    (finding,) = _key_findings(review)
    assert finding.message_id == "cache-key-change.hashed-source" and finding.severity is Severity.P4
    assert finding.params == {"files": "`toyc/codegen.py`", "factors": "codegen_source"}
    # anchored on the first line the change adds to the hashed file, posted inline
    assert (finding.path, finding.line_start, finding.in_diff) == ("toyc/codegen.py", 1, True)
    assert finding.evidence.kind is EvidenceKind.PROBE and finding.evidence.confirmed
    evidence = finding.evidence.text("en")
    assert "the key hashes these files' bytes (probe at base" in evidence and change.base[:12] in evidence

    text = render_markdown(review, "en")
    assert "edits files the cache key hashes by their bytes" in text
    assert "`codegen_source`: `toyc/codegen.py`" in text
    assert "Say so in the PR description" in text
    assert "缓存键按字节哈希" in render_markdown(review, "zh")
    # the listing came from one probe run at base (none at head), and is cached for that base
    assert [line for line in lines if "running the probe" in line] == [
        f"cache key: running the probe at base {change.base[:12]} for the files the key hashes"
    ]
    assert any("listing from the probe" in line for line in lines)
    assert [p.name.split("-")[0] for p in _cached_listings(toy)] == [change.base]


def test_an_unlisted_file_is_not_a_key_change_and_the_listing_is_cached(toy: Repo) -> None:
    _review(toy, "log-codegen")  # lists the hashed files at this base
    lines: list[str] = []
    review = _review(toy, "util", lines)
    change = review.key_change
    assert change is not None and change.hashed_sources == {} and change.sources_origin == "cache"
    assert change.status == "unchanged" and not change.invalidates and not review.invalidates_cache
    assert _key_findings(review) == []
    assert _cache_label(change) is False
    assert any("listing from the cache" in line for line in lines)
    assert not [line for line in lines if "running the probe" in line]


def test_the_summary_says_when_the_probe_ran_only_to_list_hashed_files(toy: Repo) -> None:
    first = _review(toy, "util")
    assert first.key_change is not None and first.key_change.sources_origin == "probe"
    text = render_markdown(first)
    assert (
        "The key probe did not compare keys (it does only when the closure changed); it ran at the merge base" in text
    )
    assert "The key probe did not run" not in text
    again = _review(toy, "util")  # the listing is cached now: the probe did not run at all
    assert again.key_change is not None and again.key_change.sources_origin == "cache"
    assert "The key probe did not run: it runs only when the closure changed." in render_markdown(again)


def test_a_probe_that_failed_at_base_is_not_run_again_for_the_listing(toy: Repo) -> None:
    broken = parse_config("cache_key:\n  roots: [toyc.key.key_factors]\n  probe: {command: python -m toyc.nope}\n")
    lines: list[str] = []
    review = _review(toy, "new-factor", lines, config=broken, base_config=broken)
    change = review.key_change
    assert change is not None and change.probe_status == "failed" and change.sources_origin == "unknown"
    assert len([line for line in lines if "running the probe at base" in line]) == 1, lines
    assert _cached_listings(toy) == []


def test_a_change_that_only_adds_files_runs_no_probe(toy: Repo) -> None:
    review = _review(toy, "new-file")
    assert review.key_change is not None and review.key_change.sources_origin == ""
    assert review.key_change.hashed_sources == {} and not review.invalidates_cache
    assert _cached_listings(toy) == []


def test_a_pr_body_that_says_caches_must_be_rebaked_gets_no_unannounced_finding(toy: Repo) -> None:
    review = _review(toy, "log-codegen", pr_body=ANNOUNCED, suites="none")
    assert review.key_change is not None and review.key_change.sources_origin == "unknown"  # none mode: no run
    _review(toy, "util")  # a review that may run the probe caches this base's listing
    announced = _review(toy, "log-codegen", pr_body=ANNOUNCED, suites="none")
    assert announced.key_change is not None and announced.key_change.sources_origin == "cache"
    assert announced.key_change.status == "hashed-source" and announced.invalidates_cache
    assert _key_findings(announced) == []  # the PR text says so already
    assert "`codegen_source`: `toyc/codegen.py`" in render_markdown(announced, "en")
    silent = _review(toy, "log-codegen", pr_body=SILENT, suites="none")
    assert [f.message_id for f in _key_findings(silent)] == ["cache-key-change.hashed-source"]


def test_without_a_listing_the_label_is_left_alone(toy: Repo) -> None:
    review = _review(toy, "log-codegen", suites="none")
    assert review.key_change is not None and review.key_change.sources_origin == "unknown"
    assert not review.invalidates_cache and _key_findings(review) == []
    assert _cache_label(review.key_change) is None
    assert "are not known" in render_markdown(review, "en")


def test_a_probe_that_lists_no_files_behaves_as_before(tmp_path: Path) -> None:
    repo = _toy(tmp_path / "plain", probe_args=" --no-sources")
    review = _review(repo, "log-codegen")
    assert review.key_change is not None and review.key_change.hashed_sources == {}
    assert review.key_change.status == "unchanged" and not review.invalidates_cache
    assert _key_findings(review) == [] and _cache_label(review.key_change) is False


@pytest.mark.parametrize(
    ("body", "announced"),
    [
        ("Compiled caches must be rebaked after this.", True),
        ("This invalidates every compiled cache.", True),
        ("Changes the cache key (codegen_source); label cache: invalidates.", True),
        ("升级后缓存需要重新生成。", True),
        ("Does not change the cache key.", False),
        ("Refactor cache_key.py: changed a docstring.", False),
        ("本次改动不改变缓存键。", False),
    ],
)
def test_announcements(body: str, announced: bool) -> None:
    assert announces_key_change(body) is announced


def test_hashed_paths_with_non_ascii_names_match(tmp_path: Path) -> None:
    """git quotes such names in plain `--name-only` output; the comparison reads them unquoted."""
    repo = Repo(tmp_path / "names")
    repo.commit({"gen/生成.py": "A = 1\n", "gen/plain.py": "B = 1\n"}, "base")
    base = repo.sha("HEAD")
    repo.commit({"gen/生成.py": "A = 2\n", "gen/plain.py": None}, "edit one, delete one")
    git = GitRepo(repo.path)
    assert listable_paths(git, base, repo.sha("HEAD")) == ["gen/plain.py", "gen/生成.py"]
    listing = {"src": ("gen/生成.py", "gen/plain.py", "gen/other.py")}
    assert changed_sources(git, base, repo.sha("HEAD"), listing) == {"src": ("gen/plain.py", "gen/生成.py")}


def test_a_key_change_the_probe_confirms_follows_the_same_announcement_rule(toy: Repo) -> None:
    """Key code and a hashed file both change: the probe compares keys, so the finding is the
    confirmed one (with the keys), the hashed files are still listed; an announcing body drops it."""
    review = _review(toy, "new-factor")
    change = review.key_change
    assert change is not None and change.status == "confirmed" and change.invalidates
    assert change.hashed_sources == {"codegen_source": ("toyc/codegen.py",)} and change.sources_origin == "probe"
    assert [f.message_id for f in _key_findings(review)] == ["cache-key-change.confirmed"]
    assert "`codegen_source`: `toyc/codegen.py`" in render_markdown(review, "en")
    announced = _review(toy, "new-factor", pr_body=ANNOUNCED)
    assert announced.invalidates_cache and _key_findings(announced) == []
