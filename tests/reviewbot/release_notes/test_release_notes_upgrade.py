"""The upgrade warning on real git histories of a toy project with its own key and probe."""

import json
import subprocess
import sys

import pytest

from reviewbot.cli import main
from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.release_notes.conftest import GitRepo
from tests.reviewbot.release_notes.toy_project import FILES, add_placement_factor, cosmetic_key_edit

WARNING = "## Upgrade notes: compiled caches must be rebaked"


@pytest.fixture
def toy(tmp_path) -> GitRepo:
    repo = GitRepo(tmp_path / "toy")
    repo.commit("Toy compiler with a cache key", FILES)
    repo.tag("v1.0")
    return repo


def read(repo: GitRepo, path: str) -> str:
    return (repo.path / path).read_text()


def probe_at(repo: GitRepo, ref: str, tmp_path) -> dict:
    """The toy probe's output at `ref`, run on an exported tree (independently of reviewbot)."""
    tree = tmp_path / f"export-{ref}"
    tree.mkdir()
    archive = subprocess.run(["git", "archive", ref], cwd=repo.path, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    out = subprocess.run(
        [sys.executable, "-m", "toyc.cache_key", "--explain", "--json"], cwd=tree, capture_output=True, check=True
    ).stdout
    return json.loads(out)["cases"]


def notes(repo: GitRepo, *extra: str) -> None:
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v1.0", "--to", "v1.1", *extra]
    assert main(argv) == 0


def test_commit_adding_a_factor_warns_names_the_pr_factor_and_keys(toy, tmp_path, capsys):
    toy.merge_pr(
        51,
        "[Doc] explain the key",
        [("docs", {"toyc/cache_key.py": cosmetic_key_edit(read(toy, "toyc/cache_key.py"))})],
    )
    toy.squash_pr(
        52,
        "feat(cache): key on input placements",
        {"toyc/cache_key.py": add_placement_factor(read(toy, "toyc/cache_key.py"))},
    )
    toy.commit("Tidy util", {"toyc/util.py": read(toy, "toyc/util.py") + "\n\ndef unused():\n    return 1\n"})
    toy.tag("v1.1")

    notes(toy)
    captured = capsys.readouterr()
    out = captured.out
    # The warning opens the notes, before any category.
    assert out.split("\n## ")[1].startswith("Upgrade notes: compiled caches must be rebaked\n")
    warning = out.split(WARNING, 1)[1].split("\n## ", 1)[0]
    changed_by = warning.split("Changed by:\n", 1)[1].split("\n\n", 1)[0]
    assert changed_by == "- #52 feat(cache): key on input placements (factors: `input_placements`)"
    assert "Factors that changed: `input_placements`" in warning
    old, new = probe_at(toy, "v1.0", tmp_path), probe_at(toy, "v1.1", tmp_path)
    for case in ("default", "fast"):
        assert old[case]["key"] != new[case]["key"]
        assert f"| `{case}` | `{old[case]['key']}` | `{new[case]['key']}` |" in warning
    assert "`cache_root_dir`" in warning and "`assert_cache_hit`" in warning and "warm-up run" in warning
    # Every change was checked against its first parent (no --github, so no labels).
    assert captured.err.count("against its first parent") == 3
    assert "- **cache:** key on input placements (#52, Ada Author)" in out.split("## Features\n", 1)[1]


def test_only_docstrings_comments_and_unrelated_code_change_no_warning(toy, capsys):
    toy.squash_pr(61, "[Doc] explain the key", {"toyc/cache_key.py": cosmetic_key_edit(read(toy, "toyc/cache_key.py"))})
    toy.merge_pr(62, "[Refactor] util", [("util", {"toyc/util.py": "def describe(config):\n    return 'toy'\n"})])
    toy.tag("v1.1")

    notes(toy)
    captured = capsys.readouterr()
    assert "Upgrade notes" not in captured.out
    unchanged = [line for line in captured.out.splitlines() if "Cache key" in line]
    assert unchanged == ["Cache key unchanged between `v1.0` and `v1.1`: existing compiled caches stay valid."]
    # Nothing in the key closure changed, so the key was not compared by the probe and no change was
    # checked alone; the probe ran once per end only to list the files the key hashes (the toy names none).
    assert "running the probe" not in captured.err and "first parent" not in captured.err
    assert captured.err.count("which files the key hashes") == 2


def test_key_code_changed_but_probe_sees_the_same_keys_is_not_a_warning(toy, capsys):
    source = read(toy, "toyc/cache_key.py")
    same_hash = source.replace(".hexdigest()[:16]", ".hexdigest()[0:16]")
    assert same_hash != source
    toy.squash_pr(71, "[Refactor] slice spelling", {"toyc/cache_key.py": same_hash})
    toy.tag("v1.1")

    notes(toy)
    out = capsys.readouterr().out
    assert WARNING not in out
    assert (
        "Cache key unchanged between `v1.0` and `v1.1`: existing compiled caches stay valid. (Not a change: the "
        "key's code changed, but the probe computes the same key for every reference case.)"
    ) in out


def test_probe_failing_at_the_new_revision_is_said_plainly(toy, capsys):
    source = read(toy, "toyc/cache_key.py")
    # The new factor refers to a constant nobody defined: the probe crashes with a NameError at v1.1.
    broken = source.replace(
        '        "compiler_version": _hash(COMPILER_VERSION),\n',
        '        "compiler_version": _hash(COMPILER_VERSION),\n        "input_placements": _hash(PLACEMENTS),\n',
    )
    toy.squash_pr(91, "feat: placements (broken)", {"toyc/cache_key.py": broken})
    toy.tag("v1.1")

    notes(toy, "--format", "json")
    upgrade = json.loads(capsys.readouterr().out)["upgrade"]
    assert (upgrade["cache_key_changed"], upgrade["static_closure_changed"], upgrade["verified"]) == (
        False,
        True,
        False,
    )
    assert "NameError" in upgrade["detail"]

    notes(toy)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Cache key")]
    assert len(lines) == 1 and WARNING not in lines[0]
    assert lines[0].startswith(
        "Cache key change not verified between `v1.0` and `v1.1`: the key's code changed, but the probe failed ("
    )
    assert "NameError: name 'PLACEMENTS' is not defined" in lines[0]


@pytest.mark.parametrize("labelled", [True, False], ids=["labelled", "label-missing"])
def test_github_label_or_per_commit_detection_names_the_pr(toy, capsys, monkeypatch, labelled):
    source = read(toy, "toyc/cache_key.py")
    s81 = toy.squash_pr(81, "Key on placements", {"toyc/cache_key.py": add_placement_factor(source)})
    s82 = toy.squash_pr(82, "Describe better", {"toyc/util.py": "def describe(config):\n    return 'toy'\n"})
    toy.tag("v1.1")
    with FakeGitHub() as gh:
        gh.state.add_repo("toy/compiler")
        labels81 = ["enhancement", "cache: invalidates"] if labelled else ["enhancement"]
        for number, sha, labels in ((81, s81, labels81), (82, s82, ["refactor"])):
            pull = gh.state.add_pull("toy/compiler", number, sha, "0" * 40, author="carol")
            pull.update(merged=True, state="closed", labels=[{"name": n} for n in labels])
        monkeypatch.setenv("GITHUB_API_URL", gh.base_url)
        notes(toy, "--github", "toy/compiler", "--format", "json")
    captured = capsys.readouterr()
    upgrade = json.loads(captured.out)["upgrade"]
    assert upgrade["cache_key_changed"] is True
    if labelled:
        # The label the service set is trusted: no detection per commit.
        assert [(c["number"], c["source"]) for c in upgrade["changed_by"]] == [(81, "label")]
        assert "first parent" not in captured.err
    else:
        assert [(c["number"], c["source"], c["factors"]) for c in upgrade["changed_by"]] == [
            (81, "detection", ["input_placements"])
        ]
        assert captured.err.count("against its first parent") == 2
    assert upgrade["factors_changed"] == ["input_placements"]
    assert [c["name"] for c in upgrade["cases"]] == ["default", "fast"]
    assert all(c["old_key"] != c["new_key"] for c in upgrade["cases"])


def test_key_roots_missing_at_both_revisions_is_not_called_unchanged(tmp_path, capsys):
    toy = GitRepo(tmp_path / "toy")
    config = FILES[".reviewbot.yml"].replace("[toyc.cache_key.cache_key_factors, toyc.config", "[toyk.key, toyk.config")
    toy.commit("Toy compiler, key roots misnamed", {**FILES, ".reviewbot.yml": config})
    toy.tag("v1.0")
    toy.squash_pr(95, "feat: x", {"toyc/util.py": "X = 1\n"})
    toy.tag("v1.1")

    notes(toy)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Cache key")]
    expected = (
        "Cache key change not verified between `v1.0` and `v1.1`: none of the configured cache-key roots "
        "(toyk.key, toyk.config.ToyConfig) exists at either revision; treat existing compiled "
        "caches as possibly stale until this is settled."
    )
    assert lines == [expected]


def test_key_introduced_in_the_range_needs_no_rebake(tmp_path, capsys):
    toy = GitRepo(tmp_path / "toy")
    toy.commit("Empty project", {"README.md": "toy\n"})
    toy.tag("v1.0")
    toy.squash_pr(96, "[Feat] toy compiler with a cache", FILES)
    toy.tag("v1.1")

    notes(toy)
    out = capsys.readouterr().out
    assert WARNING not in out
    expected = (
        "Cache key introduced between `v1.0` and `v1.1`: no compiled cache from an earlier version exists, so there "
        "is nothing to rebake."
    )
    assert [line for line in out.splitlines() if line.startswith("Cache key")] == [expected]


def test_key_module_moved_with_its_config_compares_each_revision_with_its_own_roots(toy, capsys):
    source = read(toy, "toyc/cache_key.py")
    config = read(toy, ".reviewbot.yml").replace("toyc.cache_key", "toyc.keys")
    toy.git("mv", "toyc/cache_key.py", "toyc/keys.py")
    toy.squash_pr(97, "[Refactor] move the key module", {"toyc/keys.py": source, ".reviewbot.yml": config})
    toy.tag("v1.1")

    notes(toy, "--format", "json")
    captured = capsys.readouterr()
    upgrade = json.loads(captured.out)["upgrade"]
    # v1.0 is probed with `python -m toyc.cache_key`, v1.1 with `python -m toyc.keys`: same keys.
    assert (upgrade["cache_key_changed"], upgrade["verified"]) == (False, True)
    assert upgrade["detail"] == "the key's code changed, but the probe computes the same key for every reference case"
    assert [c["name"] for c in upgrade["cases"]] == ["default", "fast"]
    assert all(c["old_key"] == c["new_key"] for c in upgrade["cases"])
