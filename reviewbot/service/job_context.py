"""What a job handler gets: `JobContext` (the job, its lease kept alive by a heartbeat thread, the
checkpoint that stops a superseded job, GitHub access) and the ways a run ends (`Stopped`,
`JobEnd`). The worker's loop builds one per claimed job; handlers never see the worker itself."""

from __future__ import annotations

import dataclasses
import logging
import threading
from typing import Self

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from reviewbot.service import health, jobs, store
from reviewbot.service.db import Job
from reviewbot.service.github_api import GitHub
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)


class Stopped(Exception):
    """The job was superseded or cancelled while it ran."""


@dataclasses.dataclass(frozen=True)
class JobEnd:
    """How a run of a job ended: `state` is final, or "retry" (pending again after `delay_s`)."""

    state: str
    error: str = ""
    delay_s: float = 0.0


class JobContext:
    """A claimed job while it runs; use as a context manager (the lease heartbeat runs inside)."""

    def __init__(self, settings: Settings, sessions: sessionmaker, worker_id: str, job: Job) -> None:
        self.settings = settings
        self.sessions = sessions
        self.worker_id = worker_id
        self.job = job
        self._done = threading.Event()
        self._lost = False
        self._heartbeat = threading.Thread(target=self._beat, name=f"lease-{job.id}", daemon=True)

    def _beat(self) -> None:
        """Renew the lease every third of it; a database that fails a renewal (locked, read-only,
        unreachable for a moment) is tried again at the next beat, while the lease still runs."""
        interval = self.settings.job_lease_seconds / 3
        while not self._done.wait(interval):
            try:
                jobs.renew(self.sessions, self.job.id, self.worker_id, self.settings.job_lease_seconds)
            except jobs.LeaseLost as exc:
                logger.error("%s", exc)
                self._lost = True
                return
            except OperationalError as exc:
                logger.error("job %d: lease not renewed, trying again: %s", self.job.id, health.first_line(exc))

    def __enter__(self) -> Self:
        self._heartbeat.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._heartbeat.join()

    def checkpoint(self) -> None:
        """Raise `Stopped` if the job must not go on (read fresh from the database)."""
        if self._lost:
            raise Stopped("lease lost")
        reason = jobs.renew(self.sessions, self.job.id, self.worker_id, self.settings.job_lease_seconds)
        if reason:
            raise Stopped(reason)

    def github(self) -> GitHub:
        return GitHub(self.settings, self.installation_id())

    def installation_id(self) -> int | None:
        if not self.job.delivery_id:
            return self.job.args.get("installation_id")
        return store.delivery_installation(self.sessions, self.job.delivery_id) or self.job.args.get("installation_id")
