"""Every command's bad input: one line on stderr, exit code 2, no traceback (exit 1 is kept for a
blocking review). Each case runs the real command in a fresh process."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVIEWBOT_", "MAGI_COMPILE_"))}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env["HOME"] = str(tmp_path)
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def git_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("repo")
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "t@example.com"], ["config", "user.name", "t"]):
        subprocess.run(["git", *args], cwd=repo, check=True)
    for value in (1, 2):
        (repo / "a.py").write_text(f"x = {value}\n")
        subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
        subprocess.run(["git", "commit", "-qm", f"commit {value}"], cwd=repo, check=True)
    return repo


def _run(argv: list[str], tmp_path: Path, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *argv],
        cwd=cwd or tmp_path,
        env=_env(tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _one_line(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--base", "no-such-rev"], ["--base 'no-such-rev' names no revision in /"]),
        (["--head", "no-such-rev"], ["--head 'no-such-rev' names no revision"]),
        (["--suites", "no_such_suite"], ["unknown suite(s) no_such_suite"]),
        (["--suites", "a;b"], ["--suites must be one of"]),
    ],
)
def test_review_bad_input(git_repo: Path, tmp_path: Path, args: list[str], fragments: list[str]) -> None:
    _one_line(_run(["-m", "reviewbot", "review", "--repo", str(git_repo), *args], tmp_path), *fragments)


def test_a_configuration_path_that_is_a_directory_says_so(git_repo: Path, tmp_path: Path) -> None:
    # tried on xdit-project/xDiT: `--config DIR` said "no such file" of a directory that exists
    proc = _run(["-m", "reviewbot", "review", "--repo", str(git_repo), "--config", str(tmp_path)], tmp_path)
    _one_line(proc, f"--config {tmp_path}: is a directory (name the .reviewbot.yml file)")


def test_review_outside_a_repository(tmp_path: Path) -> None:
    _one_line(_run(["-m", "reviewbot", "review", "--repo", str(tmp_path)], tmp_path), "is not a git repository")


def test_serve_without_secret_or_with_a_missing_secret_file(tmp_path: Path) -> None:
    _one_line(_run(["-m", "reviewbot", "serve"], tmp_path), "no webhook secret")
    missing = tmp_path / "missing-secret"
    _one_line(
        _run(["-m", "reviewbot", "serve"], tmp_path, REVIEWBOT_WEBHOOK_SECRET_FILE=str(missing)),
        f"webhook_secret_file {missing}: no such file",
    )


def test_serve_and_worker_without_github_credentials(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    _one_line(
        _run(["-m", "reviewbot", "serve"], tmp_path, REVIEWBOT_WEBHOOK_SECRET="s", REVIEWBOT_DATABASE_URL=database),
        "no GitHub credentials",
    )
    _one_line(_run(["-m", "reviewbot", "worker"], tmp_path, REVIEWBOT_DATABASE_URL=database), "no GitHub credentials")
    _one_line(
        _run(["-m", "reviewbot", "worker"], tmp_path, REVIEWBOT_DATABASE_URL=database, REVIEWBOT_APP_ID="42"),
        "needs both app_id and app_private_key_file",
    )


def test_release_notes_on_a_directory_that_is_not_a_repository(tmp_path: Path) -> None:
    proc = _run(["-m", "reviewbot", "release-notes", "--repo", str(tmp_path), "--from", "a", "--to", "b"], tmp_path)
    _one_line(proc, "is not a git repository")


def test_run_regression_selecting_nothing(tmp_path: Path) -> None:
    # this repository's suites all ask for a GPU, so "cpu" selects none of them
    proc = _run(
        ["ci/run_regression.py", "--suites", "cpu", "--out-dir", str(tmp_path / "out")], tmp_path, cwd=REPO_ROOT
    )
    _one_line(proc, "matched no suite", "nothing to run")


def test_cache_key_from_env_with_a_malformed_value(tmp_path: Path) -> None:
    proc = _run(["-m", "magi_compiler.cache_key", "--explain", "--from-env"], tmp_path, MAGI_COMPILE_AOT="maybe")
    _one_line(proc, "MAGI_COMPILE_AOT='maybe' is not a boolean")
    # a level name is checked when the configuration is built, not only when an entry is
    proc = _run(["-m", "magi_compiler.cache_key", "--explain", "--from-env"], tmp_path, MAGI_COMPILE_LOG_LEVEL="LOUD")
    _one_line(proc, "log_level='LOUD' is not a logging level", "MAGI_COMPILE_LOG_LEVEL")


def test_review_and_init_with_a_repo_that_does_not_exist(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir"
    for command in ("review", "init"):
        _one_line(_run(["-m", "reviewbot", command, "--repo", str(missing)], tmp_path), f"--repo {missing}: no such")


def test_review_out_in_a_missing_directory_or_on_a_directory(git_repo: Path, tmp_path: Path) -> None:
    # refused before reviewing: nothing printed, nothing saved
    saved = git_repo / ".reviewbot" / "reviews"
    before = sorted(saved.iterdir()) if saved.is_dir() else []
    out = tmp_path / "no-such-dir" / "review.md"
    proc = _run(["-m", "reviewbot", "review", "--repo", str(git_repo), "--out", str(out)], tmp_path)
    _one_line(proc, f"--out {out}: no such directory {out.parent}")
    assert proc.stdout == ""
    _one_line(
        _run(["-m", "reviewbot", "review", "--repo", str(git_repo), "--out", str(tmp_path)], tmp_path), "is a directory"
    )
    assert (sorted(saved.iterdir()) if saved.is_dir() else []) == before


def test_a_configuration_that_is_not_yaml_is_one_line_naming_the_place(git_repo: Path, tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("cache_key: [\n")
    proc = _run(["-m", "reviewbot", "review", "--repo", str(git_repo), "--config", str(broken)], tmp_path)
    _one_line(proc, f"--config {broken}: not valid YAML: ", "(line 2, column 1)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(clone)], check=True)
    (clone / ".reviewbot.yml").write_text("suites:\n  unit: {command: pytest\n")
    proc = _run(["-m", "reviewbot", "init", "--repo", str(clone), "--check"], tmp_path)
    _one_line(proc, "reviewbot init: .reviewbot.yml: not valid YAML: ", "line 3")


def test_serve_and_worker_with_a_port_out_of_range_or_an_unsupported_database(tmp_path: Path) -> None:
    base = {"REVIEWBOT_WEBHOOK_SECRET": "s", "REVIEWBOT_GITHUB_TOKEN": "t"}
    database = f"sqlite:///{tmp_path / 'db.sqlite3'}"
    _one_line(
        _run(["-m", "reviewbot", "serve", "--port", "99999"], tmp_path, REVIEWBOT_DATABASE_URL=database, **base),
        "port (--port): Input should be less than or equal to 65535",
    )
    for command in ("serve", "worker"):
        proc = _run(["-m", "reviewbot", command], tmp_path, REVIEWBOT_DATABASE_URL="mysql://u:hunter2@h/db", **base)
        _one_line(proc, "database_url (env REVIEWBOT_DATABASE_URL): 'mysql' is not a supported database")
        assert "hunter2" not in proc.stderr
    _one_line(
        _run(["-m", "reviewbot", "serve", "--database-url", "no url"], tmp_path, **base),
        "database_url (--database-url): not a database URL",
    )
    assert not (tmp_path / "db.sqlite3").exists()


def test_release_notes_with_github_unreachable_or_out_on_a_directory(git_repo: Path, tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    argv = ["-m", "reviewbot", "release-notes", "--repo", str(git_repo), "--from", "HEAD~1", "--to", "HEAD"]
    proc = _run([*argv, "--github", "a/b"], tmp_path, GITHUB_API_URL=f"http://127.0.0.1:{port}")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("reviewbot release-notes:")]
    assert errors == [
        f"reviewbot release-notes: --github a/b: cannot reach http://127.0.0.1:{port}: [Errno 111] Connection refused"
    ]
    _one_line(_run([*argv, "--out", str(tmp_path)], tmp_path), f"--out {tmp_path}: is a directory")


def test_files_that_are_not_utf8_are_one_line(git_repo: Path, tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("language: en  # caf\xe9\n".encode("latin-1"))
    review = ["-m", "reviewbot", "review", "--repo", str(git_repo), "--suites", "none"]
    _one_line(_run([*review, "--pr-body", str(latin1)], tmp_path), f"--pr-body {latin1}: not UTF-8 text (byte 19)")
    _one_line(_run([*review, "--config", str(latin1)], tmp_path), f"--config {latin1}: not UTF-8 text (byte 19)")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(git_repo), str(clone)], check=True)
    (clone / ".reviewbot.yml").write_bytes(latin1.read_bytes())
    check = _run(["-m", "reviewbot", "init", "--repo", str(clone), "--check"], tmp_path)
    _one_line(check, "reviewbot init: .reviewbot.yml: not UTF-8 text (byte 19)")
    # the working-tree warning reads it too, and names it instead of failing
    warned = _run(["-m", "reviewbot", "review", "--repo", str(clone), "--suites", "none", "--base", "HEAD~1"], tmp_path)
    assert warned.returncode == 0 and "Traceback" not in warned.stderr, warned.stderr
    assert "warning: the working tree has a .reviewbot.yml (top-level keys language)" in warned.stderr


def test_serve_and_worker_settings_file_not_yaml_or_not_utf8(tmp_path: Path) -> None:
    broken = tmp_path / "settings.yml"
    broken.write_text("port: [1\n")
    for command in ("serve", "worker"):
        _one_line(
            _run(["-m", "reviewbot", command, "--config", str(broken)], tmp_path),
            f"reviewbot {command}: --config {broken}: not valid YAML: ",
            "(line 2, column 1)",
        )
    latin1 = tmp_path / "latin1.yml"
    latin1.write_bytes("host: caf\xe9\n".encode("latin-1"))
    _one_line(
        _run(["-m", "reviewbot", "serve"], tmp_path, REVIEWBOT_CONFIG=str(latin1)),
        f"reviewbot serve: --config {latin1}: not UTF-8 text (byte 9)",
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--gpus", "-1"], "--gpus must be 0 or more, got -1"),
        (["--timeout-cap", "0"], "--timeout-cap must be positive, got 0"),
        (["--repo", "/no/such/dir"], "--repo /no/such/dir: no such directory"),
    ],
)
def test_run_regression_bad_arguments(tmp_path: Path, args: list[str], fragment: str) -> None:
    proc = _run(["ci/run_regression.py", "--out-dir", str(tmp_path / "out"), *args], tmp_path, cwd=REPO_ROOT)
    _one_line(proc, f"run_regression: {fragment}")
    assert not (tmp_path / "out").exists()


def test_run_regression_out_dir_on_a_file_or_repo_not_a_repository(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    proc = _run(["ci/run_regression.py", "--out-dir", str(a_file)], tmp_path, cwd=REPO_ROOT)
    _one_line(proc, f"--out-dir {a_file}: exists and is not a directory")
    plain = tmp_path / "plain"
    plain.mkdir()
    proc = _run(
        ["ci/run_regression.py", "--out-dir", str(tmp_path / "o"), "--repo", str(plain)], tmp_path, cwd=REPO_ROOT
    )
    _one_line(proc, f"--repo {plain} is not a git repository")


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def _commit(repo: Path, name: str, text: str) -> str:
    (repo / name).write_text(text)
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-qm", f"{name}: {text.strip()}")
    return _git(repo, "rev-parse", "HEAD").strip()


def test_a_shallow_clone_cut_above_the_merge_base_is_one_line_saying_how_to_fetch(tmp_path: Path) -> None:
    """A CI checkout of depth 1 lacks the merge base of the branch and main: review and release
    notes say so and how to fetch more, instead of a traceback or notes missing changes."""
    origin = tmp_path / "origin"
    origin.mkdir()
    _git(origin, "init", "-q", "-b", "main")
    _commit(origin, "a.py", "x = 1\n")
    _git(origin, "checkout", "-qb", "feat")
    _commit(origin, "b.py", "y = 1\n")
    _git(origin, "checkout", "-q", "main")
    for value in (2, 3):
        _commit(origin, "a.py", f"x = {value}\n")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--depth", "1", "--no-single-branch", f"file://{origin}", str(clone))
    _git(clone, "checkout", "-q", "feat")
    review = ["-m", "reviewbot", "review", "--repo", str(clone), "--suites", "none", "--base", "origin/main"]
    notes = ["-m", "reviewbot", "release-notes", "--repo", str(clone), "--from", "origin/feat", "--to", "origin/main"]
    _one_line(_run(review, tmp_path), "origin/main and HEAD share no commit in this shallow clone", "--unshallow")
    proc = _run(notes, tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "this clone is shallow and its history between" in proc.stderr.splitlines()[-1]
    _git(clone, "fetch", "-q", "--unshallow")
    assert _run(review, tmp_path).returncode == 0
    proc = _run(notes, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "- a.py: x = 2 (" in proc.stdout and "- a.py: x = 3 (" in proc.stdout


def test_unrelated_histories_or_a_missing_object_are_one_line(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _commit(repo, "a.py", "x = 1\n")
    _git(repo, "checkout", "-q", "--orphan", "other")
    _commit(repo, "a.py", "x = 2\n")
    review = ["-m", "reviewbot", "review", "--repo", str(repo), "--suites", "none", "--base", "main"]
    _one_line(_run(review, tmp_path), "main and HEAD have no common ancestor (unrelated histories)")
    _git(repo, "checkout", "-q", "main")
    _commit(repo, "a.py", "x = 3\n")
    blob = _git(repo, "rev-parse", "HEAD:a.py").strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    review = ["-m", "reviewbot", "review", "--repo", str(repo), "--suites", "none", "--base", "HEAD~1"]
    _one_line(_run(review, tmp_path), "failed: fatal: unable to read", blob)
