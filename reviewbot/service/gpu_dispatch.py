"""How GPU suites run for a PR: the `gpu_dispatch` setting picks a `GpuDispatcher` registered by a
plug-in (`plugins.py` loads `reviewbot.gpu_dispatch`, which registers `local` and `actions`).

The seam:
- `dispatch(request)` starts the suites for exactly `request.head_sha`. It returns a `GpuOutcome`
  when it ran them itself (`local`), or None when the outcome arrives later: the `actions` mode
  dispatches the workflow, registers a `workflow_run` handler with `registry.register_event`, and
  on completion enqueues a job of its own kind (`registry.register_job`) that builds a `GpuOutcome`
  and calls `job_handlers.publish_gpu_outcome(...)`, which stores the suite runs and updates the summary
  and the `reviewbot/gpu-regression` status.
- `request.request_id` identifies the run across that round trip (it is the job id).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from reviewbot.service.registry import Registry
from reviewbot.service.settings import Settings


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


DispatcherFactory = Callable[[Settings], GpuDispatcher]
DISPATCHERS: Registry[DispatcherFactory] = Registry("gpu_dispatch mode")


def register_dispatcher(name: str, factory: DispatcherFactory) -> None:
    """A dispatch mode `gpu_dispatch: name` selects (the `reviewbot.gpu_dispatch` plug-in adds
    `local` and `actions`)."""
    DISPATCHERS.add(name, factory)


def make_dispatcher(settings: Settings) -> GpuDispatcher:
    factory = DISPATCHERS.get(settings.gpu_dispatch)
    if factory is None:
        raise ValueError(f"gpu_dispatch {settings.gpu_dispatch!r} is not available; registered: {list(DISPATCHERS)}")
    return factory(settings)
