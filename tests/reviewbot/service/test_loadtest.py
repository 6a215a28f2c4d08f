"""The load test end to end, small: real `reviewbot serve` with its worker process kept busy, real
signed deliveries, the oversize posts refused while streaming. Its latency figures are reported in
docs/service.md from a full run; nothing here asserts a time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_loadtest_with_a_busy_worker_reports_every_figure(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "TMPDIR": str(tmp_path)}
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO_ROOT / "benchmarks" / "reviewbot_loadtest.py"),
            "--rate",
            "40",
            "--seconds",
            "2",
            "--worker",
            "busy",
            "--memory-posts",
            "2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "deliveries: 80 at 40/s for 2s (worker busy" in out, out
    assert "status codes: {202: 80}" in out, out
    assert re.search(r"latency ms: p50 [\d.]+ +p90 [\d.]+ +p99 [\d.]+", out), out
    assert re.search(r"database: 80 deliveries \(\d+ not yet ingested\), \d+ jobs", out), out
    assert "2 concurrent 24 MB unsigned posts {'401': 2}" in out, out
    assert "with a wrong signature {'401': 2}" in out, out
