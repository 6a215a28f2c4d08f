"""ruff (pinned in the `bot` extra) as a subprocess: one run over all file versions of a review.

Only the codes the rules classify are selected (`E722` bare except, `BLE001` blind except);
`--isolated` keeps the reviewed repository's own ruff configuration out of it.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import tempfile
from pathlib import Path

from reviewbot.rules.common import RuffHit

logger = logging.getLogger(__name__)

SELECT = ("E722", "BLE001")


def run_ruff(files: dict[str, str]) -> dict[str, list[RuffHit]]:
    """`files`: relative name -> source. Returns relative name -> hits (names without hits absent)."""
    if not files:
        return {}
    with tempfile.TemporaryDirectory(prefix="reviewbot-ruff-") as tmp:
        root = Path(tmp)
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
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            logger.warning(
                "ruff failed (exit %s); broad-except relies on the AST checks alone: %s",
                proc.returncode,
                proc.stderr.strip()[-500:],
            )
            return {}
        hits: dict[str, list[RuffHit]] = {}
        for item in json.loads(proc.stdout or "[]"):
            rel = Path(item["filename"]).resolve().relative_to(root.resolve()).as_posix()
            hits.setdefault(rel, []).append(
                RuffHit(item["code"], item["location"]["row"], item["end_location"]["row"], item["message"])
            )
        return hits
