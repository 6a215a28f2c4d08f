"""The key probe: run the configured command in a worktree of a revision and read its JSON.

The command runs in a `reviewbot.sandbox` box (a fresh interpreter: a leading `python` is the
probe's interpreter of `reviewbot.keychange.interpreter`, configured or the reviewing one with
`reviewbot` masked; `PYTHONHASHSEED=0` unless `hash_seed` says otherwise (the reproducibility
experiment varies it); the revision's tree first on `PYTHONPATH`; a time limit;
sandboxed where the machine allows, else at least in an empty network namespace where it allows
one: `ProbeRun.isolated` says whether the network was cut). It must print
`{"cases": {NAME: {"factors": {FACTOR: HASH, ...}, "key": KEY}}}` on
stdout, optionally with `"sources": {FACTOR: [PATH, ...]}`: the files whose bytes a factor hashes
(repository-relative paths), so that any change to one of them counts as a key change
(`changed_sources`; the release notes use it). A case may add `"artifact": DIGEST`, a digest of what
its configuration compiles to (the generated code, a compiled statement): two cases that share a key
and report one artifact share it harmlessly. Running the probe executes the revision's code: the service only does so for trusted (or
authorised) heads.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.interpreter import ProbeSetupError, prepare, write_mask
from reviewbot.repo_config import ProbeConfig
from reviewbot.sandbox import Box, Captured, SandboxError, box, build_argv, child_env


@dataclasses.dataclass
class ProbeRun:
    """`status`: ok | failed | timeout. `cases`: name -> {"factors": {...}, "key": str}. `sources`:
    factor -> the repository files whose bytes it hashes (empty when the probe names none).
    `worktree`: where it ran (removed since), `hash_seed`: its `PYTHONHASHSEED`."""

    revision: str
    status: str
    cases: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    sources: dict[str, tuple[str, ...]] = dataclasses.field(default_factory=dict)
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
        if "artifact" in case:
            if not isinstance(case["artifact"], str):
                raise ValueError(f'probe case {name!r}: "artifact" must be a string digest')
            cases[str(name)]["artifact"] = case["artifact"]
    return cases


def parse_probe_sources(text: str) -> dict[str, tuple[str, ...]]:
    """The optional `"sources"` of the probe's JSON: factor -> repository-relative paths (sorted).
    Raises ValueError naming what is wrong; {} when the probe names no source files."""
    data = json.loads(text)
    sources_in = data.get("sources", {}) if isinstance(data, dict) else {}
    if not isinstance(sources_in, dict):
        raise ValueError('probe output "sources" is not an object')  # noqa: TRY004 - the text is malformed, not an argument of a wrong type
    sources: dict[str, tuple[str, ...]] = {}
    for factor, paths in sources_in.items():
        if not isinstance(paths, list) or not all(isinstance(p, str) and p for p in paths):
            raise ValueError(f'probe "sources" of {factor!r} is not a list of paths')
        absolute = [p for p in paths if p.startswith("/") or ".." in p.split("/")]
        if absolute:
            raise ValueError(f'probe "sources" of {factor!r} has paths outside the repository: {absolute[:3]}')
        sources[str(factor)] = tuple(sorted(set(paths)))
    return sources


def changed_sources(
    git: GitRepo, base: str, head: str, sources: Mapping[str, Collection[str]]
) -> dict[str, tuple[str, ...]]:
    """Per factor of `sources` (factor -> hashed files), the files of it that differ between
    `base` and `head` (added, modified or deleted); factors none of whose files changed are left out."""
    changed = {path for path in git.git("diff", "--name-only", "-z", "--no-renames", base, head).split("\0") if path}
    out = {factor: tuple(sorted(changed.intersection(paths))) for factor, paths in sources.items()}
    return {factor: paths for factor, paths in out.items() if paths}


def run_probe(
    git: GitRepo, revision: str, probe: ProbeConfig, *, hash_seed: int = 0, env_root: Path | None = None
) -> ProbeRun:
    """Run `probe` in a fresh worktree of `revision` (a new temporary path on every call) with
    `PYTHONHASHSEED=hash_seed` (0 to 4294967295); setup environments cached under `env_root`
    (default `reviewbot.keychange.interpreter.probe_env_root(git)`)."""
    if not 0 <= hash_seed <= 4294967295:
        raise ValueError(f"PYTHONHASHSEED must be in 0..4294967295, got {hash_seed}")
    result = ProbeRun(git.rev_parse(revision), "failed", hash_seed=hash_seed)
    with git.worktree(result.revision) as tree:
        result.worktree = str(tree)
        try:
            interpreter = prepare(git, result.revision, tree, probe, env_root)
        except ProbeSetupError as exc:
            result.error = str(exc)
            return result
        with box(tree, keep=interpreter.keep) as runs:
            argv = build_argv(probe.command, python=interpreter.python)
            env = child_env(tree, runs.scratch, {"PYTHONHASHSEED": str(hash_seed), **interpreter.env})
            if interpreter.mask_bot:
                env["PYTHONPATH"] = os.pathsep.join((str(tree), str(write_mask(runs.scratch / "masked"))))
            if "VIRTUAL_ENV" in interpreter.env:
                env["PATH"] = os.pathsep.join((str(Path(interpreter.python).parent), env["PATH"]))
            run = _run(runs, argv, env, probe, result)
            if run is None:
                return result
    result.seconds, result.isolated = run.seconds, run.isolated
    if run.returncode is None:
        result.status, result.error = "timeout", f"probe killed after {probe.timeout_s:.0f}s"
    elif run.returncode != 0:
        result.error = f"probe exited with code {run.returncode}: {_failure(run.stderr, result.worktree)}"
    else:
        try:
            result.cases = parse_probe_output(run.stdout)
            result.sources = parse_probe_sources(run.stdout)
        except ValueError as exc:
            result.error = f"probe output invalid: {exc}"
            return result
        result.status = "ok"
    return result


_ERROR_LINE = re.compile(r"^\w+(\.\w+)*(Error|Exception|Exit|Interrupt)\b")


def _failure(stderr: str, tree: str) -> str:
    """Why a probe failed, for one line of the review: the last line of `stderr` that names an
    exception (`ModuleNotFoundError: No module named 'diffusers'`), else its last 15 lines; the
    temporary worktree's path `tree` removed (the review's text must not change with it)."""
    lines = stderr.replace(f"{tree}/", "").splitlines()
    errors = [line.strip() for line in lines if _ERROR_LINE.match(line.strip())]
    return errors[-1] if errors else "\n".join(lines[-15:])


def _run(runs: Box, argv: list[str], env: dict[str, str], probe: ProbeConfig, result: ProbeRun) -> Captured | None:
    """The probe's run, or None with `result.error` set when it could not start."""
    try:
        return runs.run_captured(argv, env, probe.timeout_s)
    except FileNotFoundError as exc:
        result.error = f"probe command not found: {exc.filename}"
    except SandboxError as exc:
        result.error = f"the sandbox could not be built: {exc}"
    return None
