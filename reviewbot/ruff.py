"""ruff (pinned in the `bot` extra) as a subprocess: one run over all file versions of a review.

    with ruff_started(files) as wait:       # files: relative name -> source; ruff starts
        ...                                 # work that does not need its hits (ruff runs meanwhile)
        hits = wait()                       # relative name -> hits (names without hits absent)

Only the codes the rules classify are selected (`E722` bare except, `BLE001` blind except);
`--isolated` keeps the reviewed repository's own ruff configuration out of it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from reviewbot.rules.common import RuffHit

logger = logging.getLogger(__name__)

SELECT = ("E722", "BLE001")

RuffHits = dict[str, list[RuffHit]]


@contextlib.contextmanager
def ruff_started(files: dict[str, str]) -> Iterator[Callable[[], RuffHits]]:
    """ruff started on `files` (relative name -> source) on entering; the function the block gets
    waits for it and returns its hits by relative name (the first call; later ones give the same
    hits). Leaving the block stops a ruff not waited for and removes its files."""
    if not files:
        yield dict
        return
    with tempfile.TemporaryDirectory(prefix="reviewbot-ruff-") as tmp:
        root = Path(tmp) / "files"
        for name, text in files.items():
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        argv = [
            sys.executable,
            "-m",
            "ruff",
            "check",
            "--isolated",
            "--no-cache",
            "--exit-zero",
            "--output-format",
            "json",
            "--select",
            ",".join(SELECT),
            str(root),
        ]
        with (
            open(Path(tmp) / "stdout", "w+") as stdout,
            open(Path(tmp) / "stderr", "w+") as stderr,
            subprocess.Popen(argv, stdout=stdout, stderr=stderr, text=True) as proc,
        ):
            found: list[RuffHits] = []

            def wait() -> RuffHits:
                if not found:
                    proc.wait()
                    stdout.seek(0)
                    stderr.seek(0)
                    found.append(_hits(proc.returncode, stdout.read(), stderr.read(), root))
                return found[0]

            try:
                yield wait
            finally:
                if proc.poll() is None:
                    proc.kill()


def _hits(returncode: int, out: str, err: str, root: Path) -> RuffHits:
    if returncode != 0:
        logger.warning(
            "ruff failed (exit %s); broad-except relies on the AST checks alone: %s", returncode, err.strip()[-500:]
        )
        return {}
    hits: RuffHits = {}
    for item in json.loads(out or "[]"):
        rel = Path(item["filename"]).resolve().relative_to(root.resolve()).as_posix()
        hits.setdefault(rel, []).append(
            RuffHit(item["code"], item["location"]["row"], item["end_location"]["row"], item["message"])
        )
    return hits
