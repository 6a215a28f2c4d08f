"""The key probe: run the configured command in a worktree of a revision and read its JSON.

The command runs in a `reviewbot.sandbox` box (a fresh interpreter, the reviewing one when the
command starts with `python`; `PYTHONHASHSEED=0`; the revision's tree first on `PYTHONPATH`; a time
limit; sandboxed where the machine allows, else at least in an empty network namespace where it
allows one: `ProbeRun.isolated` says whether the network was cut). It must print `{"cases": {NAME: {"factors": {FACTOR: HASH, ...}, "key": KEY}}}` on
stdout. Running the probe executes the revision's code: the service only does so for trusted (or
authorised) heads.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import ProbeConfig
from reviewbot.sandbox import SandboxError, box, build_argv, child_env


@dataclasses.dataclass
class ProbeRun:
    """`status`: ok | failed | timeout. `cases`: name -> {"factors": {...}, "key": str}."""

    revision: str
    status: str
    cases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    isolated: bool = False


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
    with git.worktree(sha) as tree, box(tree) as runs:
        argv = build_argv(probe.command)
        try:
            run = runs.run_captured(argv, child_env(tree, runs.scratch), probe.timeout_s)
        except FileNotFoundError as exc:
            return ProbeRun(sha, "failed", error=f"probe command not found: {exc.filename}")
        except SandboxError as exc:
            return ProbeRun(sha, "failed", error=f"the sandbox could not be built: {exc}")
    if run.returncode is None:
        return ProbeRun(sha, "timeout", error=f"probe killed after {probe.timeout_s:.0f}s", seconds=probe.timeout_s)
    if run.returncode != 0:
        tail = "\n".join(run.stderr.splitlines()[-15:])
        return ProbeRun(sha, "failed", error=f"probe exited with code {run.returncode}:\n{tail}", seconds=run.seconds)
    try:
        return ProbeRun(sha, "ok", parse_probe_output(run.stdout), seconds=run.seconds, isolated=run.isolated)
    except ValueError as exc:
        return ProbeRun(sha, "failed", error=f"probe output invalid: {exc}", seconds=run.seconds)
