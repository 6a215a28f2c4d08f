"""Benchmark: what the sandbox costs per run.

    python benchmarks/reviewbot_sandbox.py [--runs 20]

Runs `true` and `python -c pass` in a box of an empty temp worktree, sandboxed (where
`sandbox.availability()` allows) and not, and prints the median and the slowest wall time of
`Box.run_captured` for each. No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from reviewbot import sandbox


def _times(argv: list[str], runs: int, sandboxed: bool) -> list[float]:
    seconds = []
    with tempfile.TemporaryDirectory(prefix="reviewbot-bench-") as tmp:
        tree = Path(tmp) / "wt"
        tree.mkdir()
        for _ in range(runs):
            with sandbox.box(tree) as box:
                runner = box if sandboxed else sandbox.Box(box.tree, box.scratch, None)
                env = sandbox.child_env(tree, box.scratch)
                start = time.perf_counter()
                run = runner.run_captured(argv, env, 60, network=True)
                seconds.append(time.perf_counter() - start)
                if run.returncode != 0:
                    raise RuntimeError(f"{argv} exited with {run.returncode}: {run.stderr.strip()}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    available = sandbox.availability()
    print(f"sandbox: {'available' if available.ok else 'unavailable: ' + available.reason}")
    modes = [True, False] if available.ok else [False]
    for name, command in (("true", ["true"]), ("python -c pass", [sys.executable, "-c", "pass"])):
        for sandboxed in modes:
            times = _times(command, args.runs, sandboxed)
            print(
                f"{name:16s} {'sandboxed' if sandboxed else 'plain':9s} median {statistics.median(times) * 1000:6.1f} ms"
                f"  max {max(times) * 1000:6.1f} ms  ({args.runs} runs)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
