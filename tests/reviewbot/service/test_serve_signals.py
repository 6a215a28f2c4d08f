"""Stopping `reviewbot serve` from a terminal: Ctrl-C sends SIGINT to the whole foreground
process group. serve stops its worker process itself, in order; the worker must not see the
signal first, exit, and be taken for a crash (logged as an error and started again while serve
shuts down). A real serve process (the leader of its own process group, as a shell makes it)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def _wait_for(path: Path, pattern: str, timeout: float = 60) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(pattern, path.read_text(errors="replace"))
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"no {pattern!r} in {path} within {timeout}s:\n{path.read_text(errors='replace')}")


def _start_serve(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """serve (embedded worker) on a free port, the leader of its own process group; its log file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("REVIEWBOT_")}
    env.update(
        PYTHONPATH=str(REPO_ROOT),
        HOME=str(tmp_path),
        REVIEWBOT_WEBHOOK_SECRET="signal-secret",
        REVIEWBOT_GITHUB_TOKEN="test-token",
        REVIEWBOT_GITHUB_API_URL="http://127.0.0.1:9",  # never asked: no delivery is processed
        REVIEWBOT_DATABASE_URL=f"sqlite:///{tmp_path / 'state.sqlite3'}",
        REVIEWBOT_WORK_DIR=str(tmp_path / "work"),
        REVIEWBOT_WORKER_POLL_INTERVAL="0.1",
        MAGI_COMPILE_CACHE_ROOT_DIR=str(tmp_path / "magi-cache"),
    )
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen(
            [sys.executable, "-m", "reviewbot", "serve", "--port", "0"],
            env=env,
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, as a shell's foreground job
        )
    return serve, log


def test_ctrl_c_on_the_process_group_stops_serve_and_its_worker_once(tmp_path: Path) -> None:
    serve, log = _start_serve(tmp_path)
    try:
        port = int(_wait_for(log, r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        _wait_for(log, r"reviewbot worker: serve's worker")
        # A delivery still streaming in keeps serve shutting down (uvicorn finishes open requests
        # first) for longer than the supervisor's first restart delay (1 s).
        slow = socket.create_connection(("127.0.0.1", port), timeout=30)
        slow.sendall(
            b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: slow-1\r\n"
            b"X-Hub-Signature-256: sha256=" + b"0" * 64 + b"\r\nContent-Length: 10\r\n\r\n{"
        )
        time.sleep(0.5)
        os.killpg(serve.pid, signal.SIGINT)  # Ctrl-C in the terminal
        time.sleep(3)
        slow.close()
        code = serve.wait(timeout=60)
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    text = log.read_text(errors="replace")
    assert code == 130, text
    assert text.rstrip().endswith("reviewbot serve: stopped (SIGINT)"), text
    assert "restarting" not in text, text
    assert len(re.findall(r"worker process \d+ started", text)) == 1, text
    assert "Traceback" not in text, text


def _stall_a_delivery(port: int) -> socket.socket:
    """A webhook POST whose body never ends (its headers sent, one byte of 1000)."""
    stalled = socket.create_connection(("127.0.0.1", port), timeout=30)
    stalled.sendall(
        b"POST /webhook HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: stalled-1\r\n"
        b"X-Hub-Signature-256: sha256=" + b"0" * 64 + b"\r\nContent-Length: 1000\r\n\r\n{"
    )
    return stalled


def test_sigterm_stops_serve_even_while_a_sender_stalls_mid_body(tmp_path: Path) -> None:
    """uvicorn waits for open requests before stopping; one sender that stops sending used to keep
    serve and its worker running after SIGTERM for as long as it held the connection."""
    serve, log = _start_serve(tmp_path)
    try:
        port = int(_wait_for(log, r"listening on http://127\.0\.0\.1:(\d+)").group(1))
        _wait_for(log, r"reviewbot worker: serve's worker")
        stalled = _stall_a_delivery(port)
        time.sleep(0.5)
        started = time.monotonic()
        serve.terminate()
        code = serve.wait(timeout=60)  # the grace (10 s) and the idle worker's stop
        took = time.monotonic() - started
        stalled.close()
    finally:
        if serve.poll() is None:
            os.killpg(serve.pid, signal.SIGKILL)
            serve.wait()
    assert code == -signal.SIGTERM and took < 30, (code, took, log.read_text(errors="replace"))
    assert "restarting" not in log.read_text(errors="replace")
