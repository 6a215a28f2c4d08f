"""The key-reproducibility experiment: does the probe give the same key in another process?

After `detect_key_change` ran the probe at base and head (`PYTHONHASHSEED=0`, one worktree each),
this experiment runs it once more at each revision in a fresh worktree at another path with
`PYTHONHASHSEED=SECOND_SEED`, through the same sandbox. A factor (or the key) that differs between
the two runs of one revision means the cache can never hit across processes: a memory address in a
`repr`, an absolute path, a process id, set order or `hash()` of a string hashed into it.

When a factor differs, a third run (the first run's seed, a third worktree path) tells the two
causes apart: a factor that differs again depends on the process or checkout (an absolute path, a
process id, a memory address); one that matches again depends on the hash seed.

`check_reproducibility` records the result on the `KeyChange` (`reproducibility_base`,
`reproducibility_head`), and marks the base's unstable factors on every `CaseKeys` so that their
difference from the head is not reported as a key change. It runs only when the probe ran and
succeeded at both revisions (so never with `--suites none`). The findings it backs are made by
`reviewbot.rules.cache_key` (`key-not-reproducible`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange import KEY_ITSELF, KeyChange, Reproducibility
from reviewbot.keychange.probe import ProbeRun, run_probe
from reviewbot.repo_config import ProbeConfig, RepoConfig

FIRST_SEED = 0  # the seed of the probe's ordinary run (`reviewbot.sandbox.child_env`)
SECOND_SEED = 2718281  # any other seed: str and bytes hashes, and so set order, differ from seed 0

logger = logging.getLogger(__name__)

ProgressFn = Callable[[str], None]


def _no_progress(_: str) -> None:
    """Progress sink that drops messages."""


def compare_runs(
    first: dict[str, tuple[dict[str, str], str]], second: ProbeRun
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(unstable factor names in key order, cases that differed) between the first run's
    case -> (factors, key) and a second, successful run. A case the key differs in while no factor
    does names `KEY_ITSELF`; a case present in one run only counts as differing in all its factors."""
    assert second.status == "ok", second.status
    unstable: list[str] = []
    cases: list[str] = []
    for name in dict.fromkeys([*first, *second.cases]):
        factors_a, key_a = first.get(name, ({}, None))
        other = second.cases.get(name)
        factors_b, key_b = (other["factors"], other["key"]) if other else ({}, None)
        differing = [f for f in dict.fromkeys([*factors_a, *factors_b]) if factors_a.get(f) != factors_b.get(f)]
        if not differing and key_a != key_b:
            differing = [KEY_ITSELF]
        if differing:
            cases.append(name)
            unstable.extend(f for f in differing if f not in unstable)
    return tuple(unstable), tuple(cases)


def reproduce(
    git: GitRepo, revision: str, probe: ProbeConfig, first: dict[str, tuple[dict[str, str], str]], first_tree: str
) -> Reproducibility:
    """Run `probe` at `revision` a second time (fresh worktree, `SECOND_SEED`) and compare it with
    the first run's case -> (factors, key), which ran in `first_tree` with `FIRST_SEED`."""
    second = run_probe(git, revision, probe, hash_seed=SECOND_SEED)
    seeds, trees = (FIRST_SEED, SECOND_SEED), (first_tree, second.worktree)
    if second.status != "ok":
        return Reproducibility(second.revision, second.status, seeds=seeds, worktrees=trees, error=second.error)
    assert second.worktree != first_tree, "the second run must use another worktree path"
    unstable, cases = compare_runs(first, second)
    if not unstable:
        return Reproducibility(second.revision, "ok", unstable, cases, seeds, trees)
    third = run_probe(git, revision, probe, hash_seed=FIRST_SEED)
    if third.status != "ok":
        return Reproducibility(second.revision, "ok", unstable, cases, seeds, trees)
    again, _ = compare_runs(first, third)
    by_process = tuple(f for f in unstable if f in again)
    by_seed = tuple(f for f in unstable if f not in again)
    return Reproducibility(
        second.revision,
        "ok",
        unstable,
        cases,
        seeds,
        trees,
        by_process=by_process,
        by_seed=by_seed,
        third_worktree=third.worktree,
    )


def check_reproducibility(
    git: GitRepo,
    change: KeyChange,
    config: RepoConfig,
    base_config: RepoConfig | None = None,
    *,
    progress: ProgressFn = _no_progress,
) -> KeyChange:
    """`change` with the experiment's result at head and base (see the module docstring); unchanged
    when the probe did not run or failed. `config`/`base_config` as for `detect_key_change`."""
    if change.probe_status != "ok" or config.probe is None:
        logger.info("key reproducibility: not checked (the key probe's status is %s)", change.probe_status)
        return change
    base_probe = (base_config.probe if base_config is not None else None) or config.probe
    started = time.monotonic()
    head_first = {c.case: (c.new_factors, c.new_key) for c in change.cases if c.new_key is not None}
    base_first = {c.case: (c.old_factors, c.old_key) for c in change.cases if c.old_key is not None}
    progress("key reproducibility: running the probe again at head (another worktree and hash seed)")
    head = reproduce(git, change.head, config.probe, head_first, change.probe_worktrees[1])
    progress("key reproducibility: running the probe again at base")
    base = reproduce(git, change.base, base_probe, base_first, change.probe_worktrees[0])
    progress(f"key reproducibility: head {_describe(head)}, base {_describe(base)} ({time.monotonic() - started:.1f}s)")
    cases = [dataclasses.replace(c, unstable=base.unstable) for c in change.cases]
    return dataclasses.replace(change, reproducibility_base=base, reproducibility_head=head, cases=cases)


def _describe(run: Reproducibility) -> str:
    if run.status != "ok":
        return f"second run {run.status}"
    return "reproducible" if not run.unstable else f"NOT reproducible ({', '.join(run.unstable)})"
