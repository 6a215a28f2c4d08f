from pathlib import Path

import pytest

from reviewbot.cli import main
from reviewbot.release_notes.history import collect_changes, parse_commit


def test_merge_squash_and_plain_commits_between_tags(repo):
    merge_sha = repo.merge_pr(
        7, "[Feat] cache artifacts on disk", [("wip", {"a.py": "x = 1\n"}), ("wip 2", {"a.py": "x = 2\n"})]
    )
    squash_sha = repo.squash_pr(8, "fix(cache): lock the index", {"b.py": "y = 1\n"})
    plain_sha = repo.commit("Bump version", {"VERSION": "0.2.0\n"})
    repo.tag("v0.2.0")
    repo.commit("after the release", {"c.py": "z = 1\n"})

    changes = collect_changes(repo.path, "v0.1.0", "v0.2.0")

    assert [(c.sha, c.number, c.title) for c in changes] == [
        (merge_sha, 7, "[Feat] cache artifacts on disk"),
        (squash_sha, 8, "fix(cache): lock the index"),
        (plain_sha, None, "Bump version"),
    ]
    # The PR branch's own commits ("wip") are not listed; the merge keeps both parents.
    assert len(changes[0].parents) == 2 and changes[0].is_merge
    assert changes[1].parents == (merge_sha,)
    assert all(c.author == "Ada Author" for c in changes)


def test_parse_commit_shapes():
    merge = parse_commit("a" * 40, ("p", "q"), "me", "Merge pull request #12 from o/b", "\nPR title here\n\nmore")
    assert (merge.number, merge.title) == (12, "PR title here")
    bare_merge = parse_commit("a" * 40, ("p", "q"), "me", "Merge pull request #13 from o/b", "")
    assert (bare_merge.number, bare_merge.title) == (13, "Merge pull request #13 from o/b")
    squash = parse_commit("a" * 40, ("p",), "me", "[Perf] faster split (#99)", "")
    assert (squash.number, squash.title) == (99, "[Perf] faster split")
    # A PR number in the middle of a subject is a reference, not the squash suffix.
    plain = parse_commit("a" * 40, ("p",), "me", "Revert (#5) partially", "")
    assert (plain.number, plain.title) == (None, "Revert (#5) partially")


def test_unknown_ref_names_it(repo):
    with pytest.raises(ValueError, match="v9.9"):
        collect_changes(repo.path, "v9.9", "main")


def test_empty_range(repo):
    assert collect_changes(Path(repo.path), "v0.1.0", "v0.1.0") == []


def test_cli_reports_bad_input_with_exit_code_2(repo, capsys):
    assert main(["release-notes", "--repo", str(repo.path), "--from", "v9.9", "--to", "HEAD"]) == 2
    assert "unknown git ref 'v9.9'" in capsys.readouterr().err
    repo.commit("Bad config", {".reviewbot.yml": "release_notes:\n  colours: {}\n"})
    assert main(["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "HEAD"]) == 2
    assert "release_notes: unknown key(s) colours" in capsys.readouterr().err
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "v0.1.0", "--github", "nope"]
    assert main(argv) == 2
    assert "--github: expected OWNER/REPO, got 'nope'" in capsys.readouterr().err
