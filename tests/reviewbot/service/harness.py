"""Test harness: a real git repository, a real `reviewbot serve` (and `reviewbot worker`) process
on 127.0.0.1, the fake GitHub server, and signed deliveries built from the shared examples."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from sqlalchemy import create_engine, text

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.fake_github.webhooks import delivery_headers, issue_comment_event, pull_request_event

REPO_ROOT = Path(__file__).resolve().parents[3]
SECRET = "s3cret-for-tests"


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


class Upstream:
    """The 'GitHub-side' git repository of a test: `main`, and `refs/pull/<n>/head` per push."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        git(path, "init", "-q", "-b", "main")
        git(path, "config", "commit.gpgsign", "false")

    def commit(self, files: dict[str, str | bytes], message: str = "change", branch: str = "main") -> str:
        """Commit `files` (text, or bytes written as they are) on `branch` (created from main when
        new); leaves main checked out."""
        exists = (
            subprocess.run(
                ["git", "-C", str(self.path), "rev-parse", "--verify", "-q", f"refs/heads/{branch}"],
                check=False,
                capture_output=True,
            ).returncode
            == 0
        )
        if branch != "main":
            git(self.path, "checkout", "-q", *([] if exists else ["-b"]), branch)
        for name, content in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                target.write_bytes(content)
            else:
                target.write_text(content)
            git(self.path, "add", name)
        git(self.path, "commit", "-q", "-m", message)
        sha = git(self.path, "rev-parse", "HEAD")
        if branch != "main":
            git(self.path, "checkout", "-q", "main")
        return sha

    def publish_pull(self, number: int, sha: str) -> None:
        git(self.path, "update-ref", f"refs/pull/{number}/head", sha)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what or predicate}")


class Client:
    """HTTP to one server: paths relative to its URL, a 30 s time limit per request."""

    def __init__(self, base_url: str, timeout: float = 30) -> None:
        self.base_url = base_url
        self.timeout = timeout
        self.session = requests.Session()

    def get(self, path: str, **kwargs: Any) -> requests.Response:
        return self.session.get(self.base_url + path, timeout=self.timeout, **kwargs)

    def post(self, path: str, **kwargs: Any) -> requests.Response:
        return self.session.post(self.base_url + path, timeout=self.timeout, **kwargs)

    def head(self, path: str, **kwargs: Any) -> requests.Response:
        return self.session.head(self.base_url + path, timeout=self.timeout, **kwargs)

    def close(self) -> None:
        self.session.close()


class Service:
    """`reviewbot serve` (by default with its own worker process) plus separately started workers.

    `database_url`: default a SQLite file in `tmp` (`db_path`); a PostgreSQL URL from
    `postgres.PostgresServer.create_database` runs the same service on PostgreSQL."""

    def __init__(self, tmp: Path, github: FakeGitHub, database_url: str | None = None, **settings: Any) -> None:
        self.tmp = tmp
        self.github = github
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.db_path = tmp / "service.sqlite3"
        self.database_url = database_url or f"sqlite:///{self.db_path}"
        self.env = {
            **os.environ,
            # the sources under test first; an outer PYTHONPATH (extra drivers) after them
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])),
            "REVIEWBOT_WEBHOOK_SECRET": SECRET,
            "REVIEWBOT_GITHUB_TOKEN": "test-token",
            "REVIEWBOT_GITHUB_API_URL": github.base_url,
            "REVIEWBOT_DATABASE_URL": self.database_url,
            "REVIEWBOT_WORKER_HEARTBEAT_SECONDS": "0.5",
            "REVIEWBOT_WORK_DIR": str(tmp / "work"),
            "REVIEWBOT_PORT": str(self.port),
            "REVIEWBOT_WORKER_POLL_INTERVAL": "0.1",
            "REVIEWBOT_JOB_LEASE_SECONDS": "3",
            "REVIEWBOT_RETRY_BACKOFF_SECONDS": "0.05",
            "REVIEWBOT_RETRY_MAX_WAIT_SECONDS": "5",
            # no client-side pacing: the fake GitHub has no secondary rate limit, and the pacing
            # (1 s before each write) would be most of a test's wall time
            "REVIEWBOT_GITHUB_SECONDS_BETWEEN_REQUESTS": "0",
            "REVIEWBOT_GITHUB_SECONDS_BETWEEN_WRITES": "0",
            "REVIEWBOT_LOG_LEVEL": "INFO",
            "MAGI_COMPILE_CACHE_ROOT_DIR": str(tmp / "magi-cache"),
        }
        for key, value in settings.items():
            self.env[f"REVIEWBOT_{key.upper()}"] = str(value)
        self.server: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []
        self.client = Client(self.url)

    def _spawn(self, command: str, log_name: str, **settings: Any) -> subprocess.Popen[bytes]:
        log = open(self.tmp / log_name, "ab")  # noqa: SIM115 - closed with the process in stop()
        return subprocess.Popen(
            [sys.executable, "-m", "reviewbot", command],
            env={**self.env, **{f"REVIEWBOT_{key.upper()}": str(value) for key, value in settings.items()}},
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.tmp,
        )

    def start(self, *, healthy: bool = True) -> Service:
        """Start `serve`; wait until /healthz says 200 (`healthy`), or only until it answers."""
        self.server = self._spawn("serve", "serve.log")
        wanted = (200,) if healthy else (200, 503)
        wait_until(lambda: self.health_status() in wanted, timeout=60, what="reviewbot serve /healthz")
        return self

    def health_status(self) -> int | None:
        assert self.server is not None and self.server.poll() is None, self.log("serve.log")
        try:
            return self.client.get("/healthz").status_code
        except requests.RequestException:
            return None

    def start_worker(self, **settings: Any) -> subprocess.Popen[bytes]:
        """A `reviewbot worker` with the service's settings, `settings` (name=value) overriding them."""
        proc = self._spawn("worker", "worker.log", **settings)
        self.workers.append(proc)
        return proc

    def kill(self, proc: subprocess.Popen[bytes]) -> None:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

    def stop(self) -> None:
        """SIGTERM each process (serve stops its worker process first, up to 20 s), SIGKILL after 30 s."""
        for proc in [*self.workers, self.server]:
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.kill(proc)
        self.client.close()

    def log(self, name: str = "serve.log") -> str:
        path = self.tmp / name
        return path.read_text(errors="replace") if path.exists() else ""

    # deliveries ----------------------------------------------------------------------------------
    def deliver(
        self,
        event: str,
        payload: dict[str, Any] | bytes,
        *,
        secret: str | None = SECRET,
        delivery: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> requests.Response:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        all_headers = delivery_headers(event, body, secret, delivery)
        all_headers.update(headers or {})
        return self.client.post("/webhook", data=body, headers=all_headers)

    def pull_event(self, action: str, repo: str, number: int, *, wait: bool = True, **kwargs: Any) -> requests.Response:
        """Deliver; with `wait`, return once a worker ingested it (its jobs exist from then on)."""
        pull = self.github.state.pulls[(repo, number)]
        response = self.deliver("pull_request", pull_request_event(action, pull, self.github.origin, **kwargs))
        assert response.status_code == 202, response.text
        if wait:
            self.outcome(response)
        return response

    def comment_event(self, repo: str, number: int, body: str, author: str, **kwargs: Any) -> requests.Response:
        from tests.reviewbot.fake_github.routes.issues import add_comment

        state = self.github.state
        with state.lock:
            comment = add_comment(state, repo, number, body, state.user(author))
        pull = state.pulls[(repo, number)]
        response = self.deliver(
            "issue_comment",
            issue_comment_event(pull, body, author, self.github.origin, comment_id=comment["id"], **kwargs),
        )
        assert response.status_code == 202, response.text
        self.outcome(response)
        return response

    # database ------------------------------------------------------------------------------------
    def query(self, sql: str, **params: Any) -> list[Any]:
        engine = create_engine(self.database_url)
        try:
            with engine.connect() as conn:
                return list(conn.execute(text(sql), params))
        finally:
            engine.dispose()

    def outcome(self, response: requests.Response, timeout: float = 30) -> str:
        """What the worker made of an accepted delivery (deliveries.outcome once processed)."""
        guid = response.request.headers["X-GitHub-Delivery"]

        def processed() -> str | None:
            rows = self.query("SELECT outcome FROM deliveries WHERE guid = :g AND processed", g=guid)
            return rows[0].outcome if rows else None

        return wait_until(processed, timeout=timeout, what=f"delivery {guid} to be processed")

    def jobs(self, repo: str, pr: int) -> list[Any]:
        return self.query(
            "SELECT id, kind, head_sha, state, stop_reason, error, attempts FROM jobs "
            "WHERE repo = :repo AND pr = :pr ORDER BY id",
            repo=repo,
            pr=pr,
        )

    def wait_jobs_settled(self, repo: str, pr: int, timeout: float = 90) -> list[Any]:
        def settled() -> list[Any] | None:
            rows = self.jobs(repo, pr)
            return rows if rows and all(r.state not in ("pending", "running") for r in rows) else None

        return wait_until(settled, timeout=timeout, what=f"jobs of {repo}#{pr} to settle")
