"""How GPU suites run for a PR: the `gpu_dispatch` setting picks a `GpuDispatcher`.

The seam (for the `actions` mode of the CI work, which registers itself here):
- `dispatch(request)` starts the suites for exactly `request.head_sha`. It returns a `GpuOutcome`
  when it ran them itself (`local`), or None when the outcome arrives later: the `actions` mode
  dispatches the workflow, registers a `workflow_run` handler with `events.register_event`, and
  on completion enqueues a job of its own kind (`worker.register_job`) that builds a `GpuOutcome`
  and calls `worker.publish_gpu_outcome(...)`, which stores the suite runs and updates the summary
  and the `reviewbot/gpu-regression` status.
- `request.request_id` identifies the run across that round trip (it is the job id).
"""

from __future__ import annotations

import dataclasses
import fcntl
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from reviewbot import logger
from reviewbot.repo_config import load_config
from reviewbot.service.settings import Settings
from reviewbot.suites import PASSED, SuiteResult, run_suites


@dataclasses.dataclass(frozen=True)
class GpuRequest:
    repo: str
    pr: int
    head_sha: str
    base_sha: str
    suites: tuple[str, ...]
    checkout: Path
    request_id: str


@dataclasses.dataclass
class GpuOutcome:
    """`state`: success | failure | error (suites that could not run make it error, never success)."""

    state: str
    suites: Sequence[dict[str, Any]]
    markdown: str


class GpuDispatcher(Protocol):
    def dispatch(self, request: GpuRequest) -> GpuOutcome | None: ...


DISPATCHERS: dict[str, Callable[[Settings], GpuDispatcher]] = {}

# Packages that register dispatch modes (and their webhook events and job kinds) on import. Both
# `serve` and the workers load them (`load_plugins`): a `workflow_run` delivery must be known to
# the server that stores it and to the worker that ingests it. One that is not installed is skipped.
PLUGIN_PACKAGES: tuple[str, ...] = ("reviewbot.gpu_dispatch",)


def load_plugins() -> None:
    for name in PLUGIN_PACKAGES:
        if importlib.util.find_spec(name) is None:
            logger.debug("GPU dispatch plugin %s not installed", name)
            continue
        importlib.import_module(name)


def register_dispatcher(name: str, factory: Callable[[Settings], GpuDispatcher]) -> None:
    DISPATCHERS[name] = factory


def make_dispatcher(settings: Settings) -> GpuDispatcher:
    if settings.gpu_dispatch not in DISPATCHERS:
        raise ValueError(f"gpu_dispatch {settings.gpu_dispatch!r} is not available; registered: {sorted(DISPATCHERS)}")
    return DISPATCHERS[settings.gpu_dispatch](settings)


def outcome_from_results(results: Sequence[SuiteResult]) -> GpuOutcome:
    if not results:
        return GpuOutcome("error", [], "No GPU suite is configured in `.reviewbot.yml`.")
    failed = [r for r in results if r.status == "failed"]
    unusable = [r for r in results if r.status not in (PASSED, "failed")]
    state = "failure" if failed else "error" if unusable else "success"
    rows = ["| suite | status | tests | time | note |", "| --- | --- | --- | --- | --- |"]
    for r in results:
        bad = sum(1 for t in r.tests if t.outcome in ("failure", "failed", "error"))
        rows.append(
            f"| `{r.name}` | {r.status} | {len(r.tests)} ({bad} failing) | {r.duration_s:.1f}s | "
            f"{r.reason.replace('|', '/')} |"
        )
    suites = [
        {
            "name": r.name,
            "status": r.status,
            "reason": r.reason,
            "duration_s": r.duration_s,
            "tests": len(r.tests),
            "log_tail": r.log_tail[-2000:],
        }
        for r in results
    ]
    return GpuOutcome(state, suites, "\n".join(rows))


class LocalDispatcher:
    """Runs the suites on this machine through the engine's suite runner, in a worktree of the head,
    one GPU run at a time per machine (a file lock under `work_dir`)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def dispatch(self, request: GpuRequest) -> GpuOutcome:
        config = load_config(request.checkout, request.head_sha)
        names = list(request.suites) or [name for name, suite in config.suites.items() if suite.gpus > 0]
        unknown = [name for name in names if name not in config.suites]
        if unknown:
            return GpuOutcome(
                "error",
                [],
                f"Unknown suite(s) {', '.join(map(repr, unknown))}; configured: "
                f"{', '.join(sorted(config.suites)) or 'none'}.",
            )
        log_dir = (
            Path(self.settings.work_dir) / "gpu-logs" / f"{request.repo.replace('/', '__')}-{request.pr}-"
            f"{request.head_sha[:12]}-{request.request_id}"
        )
        lock_path = Path(self.settings.work_dir) / "gpu.lock"
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        with open(lock_path, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # GPU runs on this machine take turns
            results = run_suites(
                request.checkout,
                request.head_sha,
                names,
                config=config,
                log_dir=log_dir,
                timeout_s=self.settings.gpu_timeout_seconds,
                progress=lambda line: logger.info("gpu %s: %s", request.head_sha[:12], line),
            )
        return outcome_from_results(results)


register_dispatcher("local", LocalDispatcher)
