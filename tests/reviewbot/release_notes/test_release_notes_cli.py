import json
import os
import subprocess
import sys
from pathlib import Path

from reviewbot.cli import main

REPO_ROOT = Path(__file__).resolve().parents[3]


def build_history(repo):
    repo.merge_pr(11, "[Feat] AOT mode", [("aot", {"aot.py": "A = 1\n"})])
    repo.squash_pr(12, "fix(cache): atomic index writes", {"index.py": "I = 1\n"})
    repo.squash_pr(13, "perf!: drop the slow path", {"slow.py": "S = 0\n"})
    repo.commit("Update the README", {"README.md": "project, now with AOT\n"})
    repo.tag("v0.2.0")


def test_markdown_groups_every_change_including_the_one_without_a_pr_number(repo, capsys):
    build_history(repo)
    assert main(["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "v0.2.0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# Release notes: v0.1.0 → v0.2.0\n")
    sections = {block.split("\n", 1)[0]: block for block in out.split("\n## ")[1:]}
    assert list(sections) == ["Breaking changes", "Features", "Fixes", "Other changes"]
    assert "- drop the slow path (breaking) (#13, Ada Author)" in sections["Breaking changes"]
    assert "- AOT mode (#11, Ada Author)" in sections["Features"]
    assert "- **cache:** atomic index writes (#12, Ada Author)" in sections["Fixes"]
    no_pr = repo.git("rev-parse", "v0.2.0")[:10]
    assert f"- Update the README (`{no_pr}`, Ada Author)" in sections["Other changes"]


def test_json_to_out_file(repo, tmp_path, capsys):
    build_history(repo)
    out_file = tmp_path / "notes" / "v0.2.0.json"
    argv = ["release-notes", "--repo", str(repo.path), "--from", "v0.1.0", "--to", "v0.2.0"]
    assert main([*argv, "--format", "json", "--out", str(out_file)]) == 0
    assert capsys.readouterr().out == ""
    data = json.loads(out_file.read_text())
    assert data["from"] == {"ref": "v0.1.0", "sha": repo.git("rev-parse", "v0.1.0")}
    assert data["to"]["sha"] == repo.git("rev-parse", "v0.2.0")
    by_category = {s["category"]: s["changes"] for s in data["sections"]}
    assert [c["number"] for c in by_category["Fixes"]] == [12]
    assert by_category["Fixes"][0]["scope"] == "cache"
    assert by_category["Fixes"][0]["original_title"] == "fix(cache): atomic index writes"
    assert by_category["Other changes"][0]["number"] is None
    assert by_category["Breaking changes"][0]["breaking"] is True


def test_console_entry_point_in_a_fresh_interpreter(repo, tmp_path):
    build_history(repo)
    repo.commit(
        "Configure release notes",
        {".reviewbot.yml": "release_notes:\n  labels: {}\n  prefixes:\n    fix: Features\n"},
    )
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "reviewbot",
            "release-notes",
            "--repo",
            str(repo.path),
            "--from",
            "v0.1.0",
            "--to",
            "HEAD",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert "release-notes: collecting changes v0.1.0..HEAD" in result.stderr
    # The repository's .reviewbot.yml moved `fix:` into Features.
    features = result.stdout.split("## Features\n", 1)[1].split("\n## ", 1)[0]
    assert "**cache:** atomic index writes (#12" in features
    assert "## Fixes" not in result.stdout


def test_swapped_refs_are_one_line_not_empty_notes(repo):
    # found on xdit-project/xDiT: `--from HEAD --to HEAD~3` printed "No changes between `HEAD` and
    # `HEAD~3`" and exited 0, though three commits lie between them
    build_history(repo)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    argv = [sys.executable, "-m", "reviewbot", "release-notes", "--repo", str(repo.path)]
    swapped = subprocess.run(
        [*argv, "--from", "v0.2.0", "--to", "v0.1.0"], capture_output=True, text=True, env=env, check=False
    )
    assert swapped.returncode == 2 and swapped.stdout == "", swapped
    (line,) = swapped.stderr.strip().splitlines()[-1:]
    assert line == (
        "reviewbot release-notes: --to 'v0.1.0' is older than --from 'v0.2.0' (an ancestor of it): "
        "the notes list what --to adds to --from; swap them"
    ), swapped.stderr
    assert "Traceback" not in swapped.stderr
    same = subprocess.run(
        [*argv, "--from", "v0.2.0", "--to", "v0.2.0"], capture_output=True, text=True, env=env, check=False
    )
    assert same.returncode == 0 and "No changes between `v0.2.0` and `v0.2.0`" in same.stdout, same
