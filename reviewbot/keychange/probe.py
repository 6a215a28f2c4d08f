"""The key probe: run the configured command in a worktree of a revision and read its JSON.

The command runs in a fresh interpreter (the reviewing one when the command starts with
`python`), with `PYTHONHASHSEED=0`, the revision's tree first on `PYTHONPATH`, proxy variables
and GitHub tokens removed, offline switches set, and a time limit. It must print
`{"cases": {NAME: {"factors": {FACTOR: HASH, ...}, "key": KEY}}}` on stdout. Where the machine
allows unprivileged user namespaces (`unshare -rn`), it runs in an empty network namespace (no
network at all, loopback down); elsewhere only the environment is cleaned, and `ProbeRun.isolated`
says which. Running the probe
executes the revision's code: the service only does so for trusted (or authorised) heads.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import shutil
import signal
import subprocess
import time
from typing import Any

from reviewbot import logger
from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import ProbeConfig
from reviewbot.suites import build_argv, child_env


@dataclasses.dataclass
class ProbeRun:
    """`status`: ok | failed | timeout. `cases`: name -> {"factors": {...}, "key": str}."""

    revision: str
    status: str
    cases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    isolated: bool = False


@functools.cache
def network_isolation_prefix() -> tuple[str, ...]:
    """`("unshare", "-rn")` when an empty network namespace can be made here, else `()`."""
    unshare = shutil.which("unshare")
    if unshare is None:
        logger.info("unshare not found: the key probe runs with a cleaned environment but with network access")
        return ()
    proc = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    if proc.returncode != 0:
        logger.info("unshare -rn refused (%s): the key probe runs with network access", proc.stderr.decode().strip())
        return ()
    return (unshare, "-rn")


def parse_probe_output(text: str) -> dict[str, dict[str, Any]]:
    """Validate the probe's JSON; raises ValueError naming what is wrong."""
    data = json.loads(text)
    cases_in = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases_in, dict):
        raise ValueError('probe output lacks a "cases" object')
    cases: dict[str, dict[str, Any]] = {}
    for name, case in cases_in.items():
        if not isinstance(case, dict) or not isinstance(case.get("factors"), dict) or "key" not in case:
            raise ValueError(f'probe case {name!r} lacks "factors" (object) or "key"')
        cases[str(name)] = {"factors": {str(k): str(v) for k, v in case["factors"].items()}, "key": str(case["key"])}
    return cases


def run_probe(git: GitRepo, revision: str, probe: ProbeConfig) -> ProbeRun:
    sha = git.rev_parse(revision)
    prefix = network_isolation_prefix()
    with git.worktree(sha) as tree:
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                [*prefix, *build_argv(probe.command)],
                cwd=tree,
                env=child_env(tree),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            return ProbeRun(sha, "failed", error=f"probe command not found: {exc.filename}")
        try:
            stdout, stderr = proc.communicate(timeout=probe.timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            return ProbeRun(sha, "timeout", error=f"probe killed after {probe.timeout_s:.0f}s", seconds=probe.timeout_s)
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        tail = "\n".join(stderr.splitlines()[-15:])
        return ProbeRun(sha, "failed", error=f"probe exited with code {proc.returncode}:\n{tail}", seconds=seconds)
    try:
        return ProbeRun(sha, "ok", parse_probe_output(stdout), seconds=seconds, isolated=bool(prefix))
    except ValueError as exc:
        return ProbeRun(sha, "failed", error=f"probe output invalid: {exc}", seconds=seconds)
