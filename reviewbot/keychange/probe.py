"""The key probe: run the configured command in a worktree of a revision and read its JSON.

The command runs in a `reviewbot.sandbox` box (a fresh interpreter, the reviewing one when the
command starts with `python`; `PYTHONHASHSEED=0` unless `hash_seed` says otherwise (the
reproducibility experiment varies it); the revision's tree first on `PYTHONPATH`; a time limit;
sandboxed where the machine allows, else at least in an empty network namespace where it allows
one: `ProbeRun.isolated` says whether the network was cut). It must print
`{"cases": {NAME: {"factors": {FACTOR: HASH, ...}, "key": KEY}}}` on
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
    """`status`: ok | failed | timeout. `cases`: name -> {"factors": {...}, "key": str}. `worktree`:
    where it ran (removed since), `hash_seed`: its `PYTHONHASHSEED`."""

    revision: str
    status: str
    cases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    error: str = ""
    seconds: float = 0.0
    isolated: bool = False
    worktree: str = ""
    hash_seed: int = 0


def parse_probe_output(text: str) -> dict[str, dict[str, Any]]:
    """Validate the probe's JSON; raises ValueError naming what is wrong."""
    data = json.loads(text)
    cases_in = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases_in, dict):
        raise ValueError('probe output lacks a "cases" object')  # noqa: TRY004 - the text is malformed, not an argument of a wrong type
    cases: dict[str, dict[str, Any]] = {}
    for name, case in cases_in.items():
        if not isinstance(case, dict) or not isinstance(case.get("factors"), dict) or "key" not in case:
            raise ValueError(f'probe case {name!r} lacks "factors" (object) or "key"')
        cases[str(name)] = {"factors": {str(k): str(v) for k, v in case["factors"].items()}, "key": str(case["key"])}
    return cases


def run_probe(git: GitRepo, revision: str, probe: ProbeConfig, *, hash_seed: int = 0) -> ProbeRun:
    """Run `probe` in a fresh worktree of `revision` (a new temporary path on every call) with
    `PYTHONHASHSEED=hash_seed` (0 to 4294967295)."""
    if not 0 <= hash_seed <= 4294967295:
        raise ValueError(f"PYTHONHASHSEED must be in 0..4294967295, got {hash_seed}")
    result = ProbeRun(git.rev_parse(revision), "failed", hash_seed=hash_seed)
    with git.worktree(result.revision) as tree, box(tree) as runs:
        result.worktree = str(tree)
        argv = build_argv(probe.command)
        env = child_env(tree, runs.scratch, {"PYTHONHASHSEED": str(hash_seed)})
        try:
            run = runs.run_captured(argv, env, probe.timeout_s)
        except FileNotFoundError as exc:
            result.error = f"probe command not found: {exc.filename}"
            return result
        except SandboxError as exc:
            result.error = f"the sandbox could not be built: {exc}"
            return result
    result.seconds, result.isolated = run.seconds, run.isolated
    if run.returncode is None:
        result.status, result.error = "timeout", f"probe killed after {probe.timeout_s:.0f}s"
    elif run.returncode != 0:
        tail = "\n".join(run.stderr.splitlines()[-15:])
        result.error = f"probe exited with code {run.returncode}:\n{tail}"
    else:
        try:
            result.cases = parse_probe_output(run.stdout)
        except ValueError as exc:
            result.error = f"probe output invalid: {exc}"
            return result
        result.status = "ok"
    return result
