"""Webhook latency under a burst, with the worker busy: `python benchmarks/reviewbot_loadtest.py`.

Sends signed `pull_request` `synchronize` deliveries shaped like GitHub's (the repository objects
with their API URL fields, a prose PR body; ~20 KB, distinct delivery ids, 50 PRs) at a fixed
open-loop rate to `POST /webhook` on 127.0.0.1, and prints p50/p90/p99/max latency, measured from
each request's scheduled send time so that a stalled server cannot hide queueing delay. Each
answer covers the whole acceptance path: signature, JSON and field checks, and the committed
(fsynced) INSERT of the delivery.

Without `--url` it starts `reviewbot serve` as deployed by default (temporary SQLite database)
and stops it afterwards. `--worker`:
- `busy` (default): serve's worker process ingests every delivery and runs the resulting jobs,
  while `--reviews` processes (default 1) run real reviews (`reviewbot review` of a scratch
  repository made from this package's sources) back to back beside it. The jobs' GitHub is an
  address where nothing listens, so each job fails at its first call: the worker claims, fails
  and finishes jobs as fast as it can, the harshest database load a worker makes.
- `idle`: serve's worker process, no review processes;  `none`: serve alone.
After the burst it waits for the worker to ingest everything and prints the database size.

`--memory-posts N` then sends N concurrent 24 MB posts without a signature header, and N with a
wrong signature, and prints serve's peak resident memory (VmHWM) before and after each round.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import random
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import requests

SECRET = "loadtest-secret"
WORDS = (
    "cache", "key", "compile", "graph", "guard", "kernel", "shape", "dynamic", "recompile", "artifact",
    "backend", "inductor", "fix", "test", "when", "the", "and", "of", "to", "a", "in", "is", "for", "on",
    "with", "this", "that", "it", "be", "by", "as", "are", "from", "adds", "changes",
)  # fmt: skip
REPO_URL_FIELDS = (
    "archive", "assignees", "blobs", "branches", "collaborators", "comments", "commits", "compare", "contents",
    "contributors", "deployments", "downloads", "events", "forks", "git_commits", "git_refs", "git_tags",
    "hooks", "issue_comment", "issue_events", "issues", "keys", "labels", "languages", "merges", "milestones",
    "notifications", "pulls", "releases", "stargazers", "statuses", "subscribers", "subscription", "tags",
    "teams", "trees",
)  # fmt: skip
PACKAGE_ROOT = Path(__file__).resolve().parents[1]  # the checkout this script lies in, which holds reviewbot/
SOURCE_DIR = PACKAGE_ROOT / "reviewbot" / "service"


def _repo(full_name: str) -> dict[str, object]:
    api = f"https://api.github.com/repos/{full_name}"
    repo: dict[str, object] = {
        "id": 1296269,
        "full_name": full_name,
        "name": full_name.split("/")[1],
        "fork": False,
        "private": False,
        "clone_url": f"https://github.com/{full_name}.git",
        "html_url": f"https://github.com/{full_name}",
        "url": api,
        "default_branch": "main",
        "owner": {
            "login": full_name.split("/")[0],
            "id": 1,
            "type": "User",
            "url": "https://api.github.com/users/octo",
        },
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
    }
    for field in REPO_URL_FIELDS:
        repo[f"{field}_url"] = f"{api}/{field.replace('_', '/')}{{/number}}"
    return repo


def _payload(number: int, seq: int) -> bytes:
    sha = hashlib.sha1(f"{number}-{seq}".encode()).hexdigest()
    rng = random.Random(seq)
    body = " ".join(rng.choice(WORDS) for _ in range(600))
    repo = _repo("octo/load")
    payload = {
        "action": "synchronize",
        "number": number,
        "before": hashlib.sha1(f"{number}-{seq - 1}".encode()).hexdigest(),
        "after": sha,
        "pull_request": {
            "number": number,
            "state": "open",
            "draft": False,
            "title": f"load test {number}",
            "body": body,
            "user": {"login": "octo", "id": 1},
            "head": {"sha": sha, "ref": f"pr-{number}", "label": f"octo:pr-{number}", "repo": repo},
            "base": {"sha": "0" * 40, "ref": "main", "label": "octo:main", "repo": repo},
        },
        "repository": repo,
        "sender": {"login": "octo", "id": 1},
        "installation": {"id": 1},
    }
    return json.dumps(payload).encode()


def _signed(body: bytes) -> dict[str, str]:
    return {
        "X-GitHub-Event": "pull_request",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


def _burst(url: str, rate: float, seconds: float, connections: int) -> tuple[list[float], dict[int, int]]:
    """Open-loop sender: request i is due at start + i/rate; `connections` threads with persistent
    HTTP/1.1 connections take due requests in order (a light client, so the figure is the server's)."""
    total = int(rate * seconds)
    bodies = [_payload(i % 50 + 1, i) for i in range(total)]
    parsed = urllib.parse.urlsplit(url)
    latencies: list[float] = []
    codes: dict[int, int] = {}
    lock = threading.Lock()
    next_index = iter(range(total))
    start = time.perf_counter() + 0.5

    def sender() -> None:
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=30)
        while True:
            with lock:
                index = next(next_index, None)
            if index is None:
                break
            scheduled = start + index / rate
            delay = scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            body = bodies[index]
            conn.request("POST", "/webhook", body=body, headers=_signed(body))
            response = conn.getresponse()
            response.read()
            elapsed = time.perf_counter() - scheduled
            with lock:
                latencies.append(elapsed)
                codes[response.status] = codes.get(response.status, 0) + 1
        conn.close()

    threads = [threading.Thread(target=sender) for _ in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, codes


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(q * 10) - 1]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _package_path() -> str:
    """PYTHONPATH with this checkout first, so that the servers and reviews run its reviewbot."""
    return os.pathsep.join(filter(None, [str(PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))


def _start_server(workdir: Path, worker: bool) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    env = {
        **os.environ,
        "REVIEWBOT_WEBHOOK_SECRET": SECRET,
        "REVIEWBOT_PORT": str(port),
        "REVIEWBOT_EMBEDDED_WORKER": "true" if worker else "false",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{workdir / 'load.sqlite3'}",
        "REVIEWBOT_LOG_LEVEL": "WARNING",
        "REVIEWBOT_WORK_DIR": str(workdir / "work"),
        # the jobs' GitHub: nothing listens there, so each job fails at once (see the module docstring)
        "REVIEWBOT_GITHUB_API_URL": f"http://127.0.0.1:{_free_port()}",
        "REVIEWBOT_GITHUB_TOKEN": "loadtest",
        "REVIEWBOT_RETRY_MAX_ATTEMPTS": "1",
        "REVIEWBOT_RETRY_BACKOFF_SECONDS": "0.01",
        "REVIEWBOT_WORKER_POLL_INTERVAL": "0.2",
        "PYTHONPATH": _package_path(),
    }
    log = open(workdir / "serve.log", "wb")  # noqa: SIM115 - the server's, closed when it ends
    proc = subprocess.Popen([sys.executable, "-m", "reviewbot", "serve"], env=env, cwd=workdir, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if requests.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"reviewbot serve did not become healthy (exit code {proc.poll()})")


def _git(repo: Path, *args: str) -> None:
    identity = ["-c", "user.name=loadtest", "-c", "user.email=loadtest@localhost", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", *identity, "-C", str(repo), *args], check=True, capture_output=True)


def _scratch_repository(workdir: Path) -> Path:
    """A repository to review: this package's service sources as the base, a head that changes four
    of them (a function with a broad `except`)."""
    repo = workdir / "scratch"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    for source in sorted(SOURCE_DIR.glob("*.py")):
        shutil.copy(source, repo / source.name)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "pr")
    for name in ("app.py", "db.py", "worker.py", "jobs.py"):
        with open(repo / name, "a") as handle:
            handle.write(
                '\n\ndef _extra(path):\n    try:\n        return open(path).read()\n    except Exception:\n        return ""\n'
            )
    _git(repo, "commit", "-q", "-a", "-m", "head")
    return repo


def _review_loop(repo: Path, stop: threading.Event, done: list[int]) -> None:
    env = {**os.environ, "PYTHONPATH": _package_path()}
    command = ["nice", "-n", "10", sys.executable, "-m", "reviewbot", "review", "--repo", str(repo), "--base", "main"]
    command += ["--head", "pr"]  # niced like serve's worker process, whose reviews these stand for
    while not stop.is_set():
        subprocess.run([*command, "--suites", "none"], env=env, capture_output=True, check=False)
        done.append(1)


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def _big_posts(url: str, count: int, size: int, signature: str | None) -> dict[str, int]:
    """`count` concurrent posts of `size` bytes; the answers (or the transport errors: a server may
    close the connection of a refused upload before reading it)."""
    results: dict[str, int] = {}
    lock = threading.Lock()
    body = b"x" * size

    def post() -> None:
        headers = {"X-GitHub-Event": "ping", "X-GitHub-Delivery": str(uuid.uuid4())}
        if signature is not None:
            headers["X-Hub-Signature-256"] = signature
        try:
            outcome = str(requests.post(f"{url}/webhook", data=body, headers=headers, timeout=120).status_code)
        except requests.RequestException as exc:
            outcome = type(exc).__name__
        with lock:
            results[outcome] = results.get(outcome, 0) + 1

    threads = [threading.Thread(target=post) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def _database_report(path: Path, timeout: float = 300) -> str:
    """Waits until the worker ingested every delivery (or `timeout`), then sizes the database."""
    deadline = time.monotonic() + timeout
    with sqlite3.connect(path, timeout=30) as conn:
        while True:
            waiting = conn.execute("SELECT COUNT(*) FROM deliveries WHERE NOT processed").fetchone()[0]
            if not waiting or time.monotonic() > deadline:
                break
            time.sleep(1)
        deliveries = conn.execute("SELECT COUNT(*) FROM deliveries").fetchone()[0]
        jobs = conn.execute("SELECT COUNT(*) FROM jobs").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))
    return (
        f"database: {deliveries} deliveries ({waiting} not yet ingested), {jobs} jobs, "
        f"{size / 2**20:.1f} MiB after a WAL checkpoint ({size / max(deliveries, 1) / 1024:.1f} KiB per delivery)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/reviewbot_loadtest.py", description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the burst (default 10)")
    parser.add_argument(
        "--url", help="a running server (its webhook secret must be 'loadtest-secret'); default: start one"
    )
    parser.add_argument(
        "--worker",
        choices=("busy", "idle", "none"),
        default="busy",
        help="the started server's worker (default busy: serve's worker process runs the jobs, and review "
        "processes run beside it); idle: the worker process only; none: serve alone",
    )
    parser.add_argument("--reviews", type=int, default=1, help="review processes with --worker busy (default 1)")
    parser.add_argument("--connections", type=int, default=16, help="concurrent client connections (default 16)")
    parser.add_argument(
        "--memory-posts",
        type=int,
        default=0,
        metavar="N",
        help="after the burst: N concurrent 24 MB posts unsigned, then N with a wrong signature; peak memory",
    )
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 120 or not 0 < args.rate <= 2000:
        parser.error("--seconds must be in (0, 120] and --rate in (0, 2000]")
    if args.url and (args.worker != "busy" or args.memory_posts):
        parser.error("--worker and --memory-posts apply to the server this command starts, not to --url")
    if not 0 <= args.reviews <= 8 or not 0 <= args.memory_posts <= 64:
        parser.error("--reviews must be in [0, 8] and --memory-posts in [0, 64]")
    stop_reviews = threading.Event()
    reviews_done: list[int] = []
    extra: list[str] = []
    with tempfile.TemporaryDirectory(prefix="reviewbot-load-") as tmp:
        workdir = Path(tmp)
        proc, url = (None, args.url) if args.url else _start_server(workdir, args.worker != "none")
        loops: list[threading.Thread] = []
        if proc is not None and args.worker == "busy":
            repo = _scratch_repository(workdir)
            loops = [
                threading.Thread(target=_review_loop, args=(repo, stop_reviews, reviews_done))
                for _ in range(args.reviews)
            ]
            for loop in loops:
                loop.start()
            time.sleep(2)  # the reviews are running when the burst starts
        try:
            latencies, codes = _burst(url, args.rate, args.seconds, args.connections)
            stop_reviews.set()
            if proc is not None and args.worker != "none":
                extra.append(_database_report(workdir / "load.sqlite3"))
            if proc is not None and args.memory_posts:
                before = _peak_rss_mb(proc.pid)
                unsigned = _big_posts(url, args.memory_posts, 24 * 2**20, None)
                after_unsigned = _peak_rss_mb(proc.pid)
                wrong = _big_posts(url, args.memory_posts, 24 * 2**20, "sha256=" + "0" * 64)
                after_wrong = _peak_rss_mb(proc.pid)
                extra.append(
                    f"serve peak memory (VmHWM): {before:.0f} MB before; {after_unsigned:.0f} MB after "
                    f"{args.memory_posts} concurrent 24 MB unsigned posts {unsigned}; {after_wrong:.0f} MB after "
                    f"{args.memory_posts} with a wrong signature {wrong}"
                )
        finally:
            stop_reviews.set()
            for loop in loops:
                loop.join()
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=60)
    ms = [v * 1000 for v in latencies]
    mode = "external server" if args.url else f"worker {args.worker}"
    if loops:
        mode += f", {len(reviews_done)} reviews run by {len(loops)} review process(es) meanwhile"
    load = os.getloadavg()[0]
    print(
        f"deliveries: {len(ms)} at {args.rate:g}/s for {args.seconds:g}s ({mode}); "
        f"status codes: {dict(sorted(codes.items()))}; load average {load:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"latency ms: p50 {_percentile(ms, 50):.1f}  p90 {_percentile(ms, 90):.1f}  "
        f"p99 {_percentile(ms, 99):.1f}  max {max(ms):.1f}"
    )
    for line in extra:
        print(line)
    return 0 if set(codes) == {202} else 1


if __name__ == "__main__":
    sys.exit(main())
