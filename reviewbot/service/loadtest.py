"""Webhook latency under a burst: `python -m reviewbot.service.loadtest [--rate 200] [--seconds 10]`.

Sends signed `pull_request` `synchronize` deliveries (distinct delivery ids, 50 PRs, ~20 KB
bodies like GitHub's) at a fixed open-loop rate to `POST /webhook` on 127.0.0.1, and prints
p50/p90/p99/max latency. Each answer covers the full acceptance path: size, signature, JSON and
field checks, and the committed INSERT of the delivery. Latency is measured from each request's scheduled send time,
so a stalled server cannot hide queueing delay. Without `--url` it starts `reviewbot serve`
(temporary SQLite database; embedded worker off unless `--embedded-worker`) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from pathlib import Path

import httpx

SECRET = "loadtest-secret"


def _payload(number: int, seq: int) -> bytes:
    sha = hashlib.sha1(f"{number}-{seq}".encode()).hexdigest()
    repo = {
        "full_name": "octo/load",
        "name": "load",
        "fork": False,
        "clone_url": "https://github.com/octo/load.git",
        "owner": {"login": "octo"},
    }
    payload = {
        "action": "synchronize",
        "number": number,
        "pull_request": {
            "number": number,
            "draft": False,
            "body": "load test " + "x" * 18000,
            "head": {"sha": sha, "ref": f"pr-{number}", "repo": repo},
            "base": {"sha": "0" * 40, "ref": "main", "repo": repo},
        },
        "repository": repo,
        "sender": {"login": "octo"},
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


def _start_server(workdir: Path, embedded_worker: bool) -> tuple[subprocess.Popen[bytes], str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {
        **os.environ,
        "REVIEWBOT_WEBHOOK_SECRET": SECRET,
        "REVIEWBOT_PORT": str(port),
        "REVIEWBOT_EMBEDDED_WORKER": "false",
        "REVIEWBOT_DATABASE_URL": f"sqlite:///{workdir / 'load.sqlite3'}",
        "REVIEWBOT_LOG_LEVEL": "WARNING",
        "REVIEWBOT_WORK_DIR": str(workdir / "work"),
        # the package's own location first, for a source checkout as much as an install
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH")])
        ),
    }
    proc = subprocess.Popen([sys.executable, "-m", "reviewbot", "serve"], env=env, cwd=workdir)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"reviewbot serve did not become healthy (exit code {proc.poll()})")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reviewbot.service.loadtest", description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="deliveries per second (default 200)")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the burst (default 10)")
    parser.add_argument(
        "--url", help="a running server (its webhook secret must be 'loadtest-secret'); default: start one"
    )
    parser.add_argument(
        "--embedded-worker",
        action="store_true",
        help="run the started server with its embedded worker ingesting the deliveries meanwhile",
    )
    parser.add_argument("--connections", type=int, default=16, help="concurrent client connections (default 16)")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 120 or not 0 < args.rate <= 2000:
        parser.error("--seconds must be in (0, 120] and --rate in (0, 2000]")
    with tempfile.TemporaryDirectory(prefix="reviewbot-load-") as tmp:
        proc, url = (None, args.url) if args.url else _start_server(Path(tmp), args.embedded_worker)
        try:
            latencies, codes = _burst(url, args.rate, args.seconds, args.connections)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait(timeout=30)
    ms = [v * 1000 for v in latencies]
    mode = "external server" if args.url else ("embedded worker on" if args.embedded_worker else "embedded worker off")
    load = os.getloadavg()[0]
    print(
        f"deliveries: {len(ms)} at {args.rate:g}/s for {args.seconds:g}s ({mode}); "
        f"status codes: {dict(sorted(codes.items()))}; load average {load:.1f} on {os.cpu_count()} cores"
    )
    print(
        f"latency ms: p50 {_percentile(ms, 50):.1f}  p90 {_percentile(ms, 90):.1f}  "
        f"p99 {_percentile(ms, 99):.1f}  max {max(ms):.1f}"
    )
    return 0 if set(codes) == {202} else 1


if __name__ == "__main__":
    sys.exit(main())
