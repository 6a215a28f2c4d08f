"""`--github` and `--draft-release` against the local fake GitHub REST server, through PyGithub."""

import json

import pytest

from reviewbot.cli import main
from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.fake_github.routes.releases import releases_of

RELEASES = "tests.reviewbot.fake_github.routes.releases"
FULL_NAME = "magi/compiler"


@pytest.fixture
def github(monkeypatch):
    # Served under /api/v3, as GitHub Enterprise serves its API: GITHUB_API_URL carries the prefix.
    with FakeGitHub(extra_route_modules=[RELEASES], path_prefix="/api/v3") as gh:
        gh.state.add_repo(FULL_NAME)
        monkeypatch.setenv("GITHUB_API_URL", gh.base_url)
        monkeypatch.setenv("GITHUB_TOKEN", "test-token")
        yield gh


def add_merged_pull(gh, number, title, author, labels, sha):
    pull = gh.state.add_pull(FULL_NAME, number, sha, "0" * 40, author=author)
    pull.update(title=title, state="closed", merged=True, labels=[{"name": name, "color": "ededed"} for name in labels])


def test_titles_labels_and_authors_come_from_github(repo, github, capsys):
    s21 = repo.merge_pr(21, "[Feat] placement hash", [("wip", {"p.py": "P = 1\n"})])
    s22 = repo.squash_pr(22, "tweak docs", {"d.md": "doc\n"})
    s23 = repo.squash_pr(23, "see issue", {"e.py": "E = 1\n"})
    repo.commit("direct push", {"f.py": "F = 1\n"})
    add_merged_pull(github, 21, "Placement hash for DTensor inputs", "alice", ["enhancement"], s21)
    add_merged_pull(github, 22, "Explain the cache layout", "bob", ["documentation"], s22)
    # #23 is not a pull request on GitHub: the commit subject stays.

    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "HEAD", "--github", FULL_NAME]
    assert main([*argv, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    by_number = {c["number"]: (s["category"], c) for s in data["sections"] for c in s["changes"]}
    assert by_number[21][0] == "Features"
    assert (by_number[21][1]["title"], by_number[21][1]["author"]) == ("Placement hash for DTensor inputs", "alice")
    assert by_number[21][1]["url"] == f"https://github.com/{FULL_NAME}/pull/21"
    assert by_number[22][0] == "Documentation" and by_number[22][1]["labels"] == ["documentation"]
    assert by_number[23][1]["title"] == "see issue" and by_number[23][1]["url"] is None
    assert by_number[None][1]["title"] == "direct push"
    assert s23 == by_number[23][1]["sha"]
    assert github.state.count_requests("GET", r"/pulls/2[123]$") == 3

    assert main(argv) == 0
    markdown = capsys.readouterr().out
    assert f"- Placement hash for DTensor inputs ([#21](https://github.com/{FULL_NAME}/pull/21), @alice)" in markdown


def test_draft_release_created_once_then_updated(repo, github, capsys, tmp_path):
    repo.squash_pr(31, "[Feat] AOT load", {"aot.py": "A = 1\n"})
    repo.tag("v0.2.0")
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "v0.2.0", "--github", FULL_NAME]
    argv += ["--draft-release", "v0.2.0", "--out", str(tmp_path / "notes.md")]

    assert main(argv) == 0
    (release,) = releases_of(github.state, FULL_NAME)
    assert release["draft"] is True and release["tag_name"] == "v0.2.0" and release["name"] == "v0.2.0"
    assert release["target_commitish"] == repo.git("rev-parse", "v0.2.0")
    assert release["body"] == (tmp_path / "notes.md").read_text()
    assert "- AOT load (#31" in release["body"]
    assert "created draft release v0.2.0" in capsys.readouterr().err

    # More history under the same tag: the same draft is updated, not duplicated; a prerelease
    # flag a maintainer set on the draft stays.
    release["prerelease"] = True
    repo.git("tag", "-d", "v0.2.0")
    repo.squash_pr(32, "fix: AOT fallback", {"aot.py": "A = 2\n"})
    repo.tag("v0.2.0")
    assert main(argv) == 0
    (updated,) = releases_of(github.state, FULL_NAME)
    assert updated["id"] == release["id"] and updated["_edits"] == 1 and updated["draft"] is True
    assert updated["prerelease"] is True
    assert "- AOT fallback (#32" in updated["body"]
    assert updated["target_commitish"] == repo.git("rev-parse", "v0.2.0")
    assert github.state.count_requests("POST", r"/releases$") == 1
    assert "updated draft release v0.2.0" in capsys.readouterr().err


def test_published_release_is_never_overwritten(repo, github, capsys):
    repo.squash_pr(41, "feat: x", {"x.py": "X = 1\n"})
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "HEAD", "--github", FULL_NAME]
    argv += ["--draft-release", "v0.3.0", "--format", "json"]
    assert main(argv) == 0
    (release,) = releases_of(github.state, FULL_NAME)
    release["draft"] = False
    assert main(argv) == 2
    assert "release 'v0.3.0' is already published; refusing to overwrite it" in capsys.readouterr().err
    assert release["_edits"] == 0


def test_draft_release_needs_github(repo, capsys):
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "HEAD", "--draft-release", "v1"]
    assert main(argv) == 2
    assert "--draft-release needs --github OWNER/REPO" in capsys.readouterr().err


def test_a_repository_github_does_not_know_is_one_line_and_exit_2(repo, github, capsys):
    repo.squash_pr(41, "fix: x", {"x.py": "X = 1\n"})
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "HEAD", "--github", "magi/unknown"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"reviewbot release-notes: --github magi/unknown: {github.base_url} answered 404 ("), err
