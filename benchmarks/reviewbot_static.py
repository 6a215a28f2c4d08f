"""Benchmark: static review (no suites, no probe) of a generated diff of about 2,000 changed lines.

    python benchmarks/reviewbot_static.py [--lines 2000] [--files 20] [--repeat 3]

Builds a real git repository in a temp dir: `main` holds `--files` modules of plain functions; the
branch rewrites and extends them (handlers, config gates, try blocks) so every rule has work. It
prints the changed-line count and the wall time of `run_review(..., suites="none")` per repeat
(target on the 2-core machine: under 3 s). No timing is asserted anywhere.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import tempfile
import time
from pathlib import Path

from reviewbot.engine import run_review

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)


def _base_module(index: int, functions: int) -> str:
    parts = [f'"""Generated module {index}."""\n\nimport logging\n\nlogger = logging.getLogger(__name__)\n']
    for j in range(functions):
        parts.append(f"\n\ndef func_{j}(value, config):\n    result = value + {j}\n    return result\n")
    return "".join(parts)


def _head_module(index: int, functions: int) -> str:
    parts = [f'"""Generated module {index}, rewritten."""\n\nimport logging\n\nlogger = logging.getLogger(__name__)\n']
    for j in range(functions):
        kind = j % 4
        if kind == 0:
            body = (
                f"    if not config.enabled:\n        return value\n    if value < {j}:\n        return value\n"
                f"    return value * {j}\n"
            )
        elif kind == 1:
            body = f"    try:\n        return int(value)\n    except Exception:\n        return {j}\n"
        elif kind == 2:
            body = f"    try:\n        first = int(value)\n        return first + {j}\n    except ValueError:\n        return 0\n"
        else:
            body = f"    result = value + {j}\n    logger.debug('func_{j} %s', result)\n    return result\n"
        parts.append(f"\n\ndef func_{j}(value, config):\n{body}")
    return "".join(parts)


def build_repo(root: Path, lines: int, files: int) -> None:
    root.mkdir(parents=True)
    _git(root, "init", "-q", "-b", "main")
    functions = max(1, -(-lines // (files * 5)))
    for i in range(files):
        (root / "pkg").mkdir(exist_ok=True)
        (root / "pkg" / f"mod_{i}.py").write_text(_base_module(i, functions))
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "base")
    _git(root, "checkout", "-q", "-b", "feature")
    for i in range(files):
        (root / "pkg" / f"mod_{i}.py").write_text(_head_module(i, functions))
    _git(root, "commit", "-q", "-am", "rewrite")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=2000, help="approximate changed lines")
    parser.add_argument("--files", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="reviewbot-bench-") as tmp:
        repo = Path(tmp) / "repo"
        build_repo(repo, args.lines, args.files)
        stat = subprocess.run(
            ["git", "diff", "--numstat", "main...feature"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout
        changed = sum(int(a) + int(d) for a, d, _ in (line.split("\t") for line in stat.splitlines()))
        print(f"static review of a {changed}-changed-line diff ({args.files} files), suites=none, no probe")
        for i in range(args.repeat):
            start = time.perf_counter()
            review = run_review(repo, "main", "feature", suites="none")
            seconds = time.perf_counter() - start
            print(f"run {i + 1}: {seconds:.3f} s, {len(review.findings)} findings")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
