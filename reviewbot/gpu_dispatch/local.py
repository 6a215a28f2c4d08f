"""The `local` GPU dispatch mode as issue 8 describes it: the worker runs `ci/run_regression.py`'s
body on its own GPUs, in a worktree of the PR head, and reads back the same `results.json` that
the `actions` mode downloads, so both modes publish the same summary (failing tests with their
messages, GPU-only skips, bench figures, the GPU and driver it ran on).

It runs ``python -m reviewbot.results.run`` (the bot's installed copy, never the PR's
`ci/run_regression.py`) in a child process whose environment carries none of the bot's settings
or credentials (`REVIEWBOT_*`, `GITHUB_*`, `GH_*`, and any variable whose name says token, secret,
password, private/API/access key or credentials): the suites execute PR code. The `gpus` setting,
when set, is its `--gpus`. The child process also keeps torch and CUDA out of the worker.

Importing this module registers it as `local`.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from reviewbot.gpu_dispatch.outcome import error_outcome, outcome_from_results
from reviewbot.results import RegressionResults, ResultsFormatError
from reviewbot.service.gpu_dispatch import GpuOutcome, GpuRequest, register_dispatcher
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)

_SECRET_NAME = re.compile(
    r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|PRIVATE_KEY|API_KEY|ACCESS_KEY|CREDENTIALS?)(_|$)", re.IGNORECASE
)
STDERR_TAIL_LINES = 30


def scrubbed_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the bot's settings and anything that looks like a credential."""
    out = {}
    for name, value in environ.items():
        dropped = name.startswith(("REVIEWBOT_", "GITHUB_", "GH_")) or _SECRET_NAME.search(name)
        if not dropped:
            out[name] = value
    return out


class RegressionLocalDispatcher:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def dispatch(self, request: GpuRequest) -> GpuOutcome:
        out_dir = (
            Path(self.settings.work_dir).resolve()
            / "gpu-runs"
            / f"{request.repo.replace('/', '__')}-{request.pr}-{request.head_sha[:12]}-{request.request_id}"
        )
        command = [
            sys.executable, "-m", "reviewbot.results.run",
            "--repo", str(request.checkout),
            "--revision", request.head_sha,
            "--suites", ",".join(request.suites) or "gpu",
            "--out-dir", str(out_dir),
            "--pr-number", str(request.pr),
            "--request-id", request.request_id,
            "--timeout-cap", str(self.settings.gpu_timeout_seconds),
        ]  # fmt: skip
        if self.settings.gpus is not None:
            command += ["--gpus", str(self.settings.gpus)]
        logger.info("GPU request %s: running the suites here (%s)", request.request_id, out_dir)
        proc = subprocess.run(
            command,
            env=scrubbed_environment(os.environ),
            capture_output=True,
            text=True,
            check=False,
        )
        tail = "\n".join(proc.stderr.strip().splitlines()[-STDERR_TAIL_LINES:])
        if proc.returncode == 2:
            return error_outcome(f"The suites could not start: {tail.splitlines()[-1] if tail else 'bad arguments'}")
        try:
            results = RegressionResults.read(out_dir / "results.json")
        except FileNotFoundError:
            return error_outcome(f"The regression run wrote no results (exit {proc.returncode}):\n```\n{tail}\n```")
        except ResultsFormatError as exc:
            return error_outcome(f"The regression run wrote an invalid results.json: {exc}")
        return outcome_from_results(results, "This worker's run")


register_dispatcher("local", RegressionLocalDispatcher)
