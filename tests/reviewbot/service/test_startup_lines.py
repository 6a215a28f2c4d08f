"""`reviewbot serve` and `reviewbot worker` say at start where they listen, which database they use
(password masked) and where they work: real processes, their first lines read from stderr."""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from reviewbot.service.settings import shown_database

REPO_ROOT = Path(__file__).resolve().parents[3]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVIEWBOT_")}
    return {
        **env,
        "PYTHONPATH": str(REPO_ROOT),
        "HOME": str(tmp),
        "REVIEWBOT_WEBHOOK_SECRET": "startup-secret",
        "REVIEWBOT_GITHUB_TOKEN": "test-token",
        "REVIEWBOT_GITHUB_API_URL": "http://127.0.0.1:9",  # never asked at start
        "REVIEWBOT_WORK_DIR": "work",
        "MAGI_COMPILE_CACHE_ROOT_DIR": str(tmp / "magi-cache"),
    }


def _start(tmp: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "reviewbot", *args],
        cwd=tmp,
        env=_env(tmp),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        bufsize=0,
    )


_pending: dict[int, bytes] = {}  # pid -> stderr bytes read but not yet split into lines


def _lines(proc: subprocess.Popen[bytes], prefix: str, count: int, timeout: float = 60) -> list[str]:
    """The first `count` stderr lines starting with `prefix` (other log lines skipped). Reads the
    pipe with os.read, so no line waits in a buffer that select() does not see."""
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    found: list[str] = []
    deadline = time.monotonic() + timeout
    while len(found) < count:
        buffered = _pending.get(proc.pid, b"")
        if b"\n" in buffered:
            line, _pending[proc.pid] = buffered.split(b"\n", 1)
            if line.decode().startswith(prefix):
                found.append(line.decode())
            continue
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        assert ready, f"no {prefix!r} line within {timeout}s; got {found}"
        chunk = os.read(fd, 65536)
        assert chunk, f"{prefix} exited ({proc.wait()}) after {found}"
        _pending[proc.pid] = buffered + chunk
    return found


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=120)  # a worker finishes its start-up (the sandbox check) first
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_says_where_it_listens_and_its_database(tmp_path: Path) -> None:
    proc = _start(tmp_path, "serve", "--port", "0", "--database-url", "sqlite:///state.sqlite3")
    try:
        listening, database, work = _lines(proc, "reviewbot serve: ", 3)
        assert listening.startswith("reviewbot serve: listening on http://127.0.0.1:")
        port = int(listening.split("http://127.0.0.1:")[1].split(" ")[0])
        assert port > 0 and f"pid {proc.pid}" in listening
        # the port it names is the one it answers on
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=30).status_code in (200, 503)
        assert database == f"reviewbot serve: database sqlite:///state.sqlite3 (file {tmp_path / 'state.sqlite3'})"
        assert work == (
            f"reviewbot serve: work directory {tmp_path / 'work'}; worker: an embedded `reviewbot worker` process"
        )
        (worker,) = _lines(proc, "reviewbot worker: ", 1)  # its embedded worker's own line
        assert worker.startswith(f"reviewbot worker: serve's worker (serve pid {proc.pid}), pid ")
        assert "database sqlite:///state.sqlite3" in worker
    finally:
        # uvicorn shuts down cleanly, then re-raises the SIGTERM it caught (the default action)
        assert _stop(proc) == -signal.SIGTERM


def test_serve_on_a_taken_port_says_so_in_one_line(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "reviewbot", "serve", "--port", str(port), "--database-url", "sqlite:///s.db"],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        f"reviewbot serve: cannot listen on 127.0.0.1:{port}: Address already in use"
    )
    assert "Traceback" not in proc.stderr


def test_worker_says_its_database_and_work_directory(tmp_path: Path) -> None:
    database = tmp_path / "jobs.sqlite3"
    proc = _start(tmp_path, "worker", "--database-url", f"sqlite:///{database}", "--worker-threads", "2")
    try:
        (line,) = _lines(proc, "reviewbot worker: ", 1)
    finally:
        assert _stop(proc) == 0
    assert line == (
        f"reviewbot worker: worker, pid {proc.pid}: database sqlite:///{database}; "
        f"work directory {tmp_path / 'work'}; 2 job(s) at a time"
    )


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (
            "postgresql+psycopg://bot:s3cret@db.example:5432/reviews",
            "postgresql+psycopg://bot:***@db.example:5432/reviews",
        ),
        ("postgresql+psycopg://bot@db.example/reviews", "postgresql+psycopg://bot@db.example/reviews"),
        ("sqlite:////var/lib/reviewbot/state.db", "sqlite:////var/lib/reviewbot/state.db"),
    ],
)
def test_database_urls_are_shown_without_passwords(url: str, shown: str) -> None:
    assert shown_database(url) == shown


@pytest.mark.parametrize("command", ["serve", "worker"])
def test_an_unusable_work_directory_or_database_is_one_line_at_start(tmp_path: Path, command: str) -> None:
    """A work directory that cannot be made (its parent is a file) would fail every job, and a
    database file in a missing directory cannot be opened: each is one line naming the path and
    exit code 2, before serve listens or the worker claims anything."""
    (tmp_path / "a-file").write_text("")
    cases = [
        (
            ["--work-dir", str(tmp_path / "a-file" / "work"), "--database-url", "sqlite:///s.sqlite3"],
            f"reviewbot {command}: work_dir {tmp_path / 'a-file' / 'work'}: cannot write in it: Not a directory",
        ),
        (
            ["--database-url", f"sqlite:///{tmp_path / 'missing' / 's.sqlite3'}"],
            f"reviewbot {command}: cannot open the database sqlite:///{tmp_path / 'missing' / 's.sqlite3'}: "
            + "unable to open database file",
        ),
    ]
    for args, line in cases:
        proc = subprocess.run(
            [sys.executable, "-m", "reviewbot", command, "--port", "0", *args],
            cwd=tmp_path,
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert (proc.returncode, proc.stderr.strip()) == (2, line)


def test_an_app_private_key_that_is_not_a_pem_key_is_one_line_at_start(tmp_path: Path) -> None:
    """It was accepted at start (only its existence was checked), though every job needs a JWT signed with it."""
    (tmp_path / "app.pem").write_text("not a key\n")
    env = {k: v for k, v in _env(tmp_path).items() if k != "REVIEWBOT_GITHUB_TOKEN"}
    proc = subprocess.run(
        [sys.executable, "-m", "reviewbot", "serve", "--port", "0", "--app-id", "42"]
        + ["--app-private-key-file", str(tmp_path / "app.pem"), "--database-url", "sqlite:///s.sqlite3"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith(
        f"reviewbot serve: app_private_key_file {tmp_path / 'app.pem'}: not a PEM private key without a passphrase ("
    ), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
