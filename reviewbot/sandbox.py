"""Running code of the reviewed revision: the only way the bot executes it.

Suites, the key probe, test-plan runs and experiments start the revision's code through
`run_logged` (output to a log file) or `run_captured` (stdout and stderr returned). Every run is a
fresh process group with a time limit (the whole group is killed when it is exceeded) and the
environment from `child_env`: the revision's tree first on `PYTHONPATH`, a fixed hash seed, proxies
and GitHub tokens removed, offline switches for common model hubs. `isolate_network=True` runs the
command in an empty network namespace where `unshare -rn` works here (`network_isolation_prefix`);
`Captured.isolated` says whether it did.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from reviewbot import logger


def build_argv(command: str, junit_path: Path | None = None) -> list[str]:
    """Split a configured command; `python`/`torchrun` become this interpreter; JUnit path inserted."""
    argv = shlex.split(command)
    assert argv, "empty command"
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    elif argv[0] == "torchrun":
        argv[:1] = [sys.executable, "-m", "torch.distributed.run"]
    if junit_path is not None:
        if any("{junit}" in a for a in argv):
            argv = [a.replace("{junit}", str(junit_path)) for a in argv]
        elif "pytest" in argv:
            argv.append(f"--junitxml={junit_path}")
    return argv


def child_env(worktree: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for code of the reviewed revision: its tree first on PYTHONPATH, fixed hash
    seed, proxies and tokens removed, offline switches for common hubs."""
    drop_prefixes = ("GITHUB_", "REVIEWBOT_GITHUB", "GH_")
    drop = {"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "PYTHONPATH"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith(drop_prefixes)}
    env.update(
        PYTHONPATH=str(worktree),
        PYTHONHASHSEED="0",
        PYTHONDONTWRITEBYTECODE="1",
        NO_PROXY="*",
        no_proxy="*",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
    )
    if extra:
        env.update(extra)
    return env


@functools.cache
def network_isolation_prefix() -> tuple[str, ...]:
    """`("unshare", "-rn")` when an empty network namespace can be made here, else `()`."""
    unshare = shutil.which("unshare")
    if unshare is None:
        logger.info("unshare not found: revision code runs with a cleaned environment but with network access")
        return ()
    proc = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    if proc.returncode != 0:
        logger.info("unshare -rn refused (%s): revision code runs with network access", proc.stderr.decode().strip())
        return ()
    return (unshare, "-rn")


def run_logged(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float, log_path: Path
) -> tuple[int | None, float]:
    """Run with stdout and stderr to `log_path`; on timeout kill the process group.

    Returns (returncode or None on timeout, seconds). `FileNotFoundError` when the program is missing.
    """
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(argv), cwd=cwd, env=dict(env), stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            rc: int | None = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            rc = None
    return rc, time.monotonic() - start


@dataclasses.dataclass(frozen=True)
class Captured:
    """`returncode` is None when the run was killed at its time limit."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolated: bool


def run_captured(
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    *,
    isolate_network: bool = False,
) -> Captured:
    """Run and return its output; on timeout kill the process group. `FileNotFoundError` when the
    program is missing."""
    prefix = network_isolation_prefix() if isolate_network else ()
    start = time.monotonic()
    proc = subprocess.Popen(
        [*prefix, *argv],
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
        rc: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, stderr = proc.communicate()
        rc = None
    return Captured(rc, stdout, stderr, time.monotonic() - start, bool(prefix))
