"""Named registries of the service's extension points: webhook event handlers and job kinds (GPU
dispatch modes have theirs in `gpu_dispatch.py`). The modules that register (`events.py`,
`job_handlers.py`, the `reviewbot.gpu_dispatch` plug-in) import this module; the loops that look
entries up (`ingest.py`, `worker.py`) import it too, and nothing here imports either side back.

A name registered twice is a programming error: two plug-ins would silently replace each other.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session

from reviewbot.service.job_context import JobContext
from reviewbot.service.settings import Settings

T = TypeVar("T")


class Registry(Generic[T]):
    """name -> entry; `add` refuses a name that is already there."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[str, T] = {}

    def add(self, name: str, entry: T) -> None:
        if name in self._entries:
            raise ValueError(f"{self.what} {name!r} is registered twice")
        self._entries[name] = entry

    def remove(self, name: str) -> None:
        del self._entries[name]

    def get(self, name: str) -> T | None:
        return self._entries.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(sorted(self._entries.items()))


EventHandler = Callable[[Session, str, dict[str, Any], Settings], str]
EVENTS: Registry[EventHandler] = Registry("webhook event")
# (path, kind, required) triples, as `events.validate` reads them
FieldSpec = tuple[tuple[tuple[str, ...], str, bool], ...]
EVENT_FIELDS: Registry[FieldSpec] = Registry("webhook event's fields")


def register_event(name: str, fields: FieldSpec = ()) -> Callable[[EventHandler], EventHandler]:
    """Handle `X-GitHub-Event: name` deliveries (run by `ingest.py`, in the delivery's savepoint).
    ``fields`` lists what the handler reads, for the webhook to refuse (400) a payload that lacks
    one or has it of the wrong type (`events.validate`); a plug-in's handler passes its own."""

    def add(handler: EventHandler) -> EventHandler:
        EVENTS.add(name, handler)
        if fields:
            EVENT_FIELDS.add(name, fields)
        return handler

    return add


JobHandler = Callable[[JobContext], str]


@dataclasses.dataclass(frozen=True)
class JobKind:
    handler: JobHandler
    pr_exclusive: bool  # see `register_job`


JOBS: Registry[JobKind] = Registry("job kind")


def register_job(kind: str, *, pr_exclusive: bool = False) -> Callable[[JobHandler], JobHandler]:
    """Run jobs of `kind` with the decorated handler (looked up by `worker.py`).

    `pr_exclusive`: the kind writes the PR's summary, so it waits while another such job of the
    PR runs (a job parked as running, such as a deadline, must not be exclusive). The queue learns
    the exclusive kinds from here only (`pr_exclusive_kinds`)."""

    def add(handler: JobHandler) -> JobHandler:
        JOBS.add(kind, JobKind(handler, pr_exclusive))
        return handler

    return add


def pr_exclusive_kinds() -> frozenset[str]:
    """The registered job kinds declared `pr_exclusive` (what `jobs.claim` takes one per PR at a time)."""
    return frozenset(name for name, kind in JOBS.items() if kind.pr_exclusive)
