"""The worker: claims jobs, keeps their lease alive, runs them, and never posts for a stopped job.

A job runs under a lease renewed by a heartbeat thread (`job_context.py`). Its `stop_reason` is set
when a newer head arrives or the PR closes; handlers (`job_handlers.py`) call `ctx.checkpoint()`
(which reads it) before every write to GitHub, so a superseded or cancelled job stops and posts
nothing.
A worker killed mid-job leaves the job `running` with a lease that runs out; the next claim
re-runs it, and the marker-keyed upserts in `posting.py` make that rerun post once.

Each job runs under its own error boundary (`Worker.run_once`): an unexpected exception fails that
job only. It runs again after a backoff (`job_retry_backoff_seconds`, doubling) until
`job_max_attempts`, then fails for good, and its PR gets a summary saying the review could not run
and why (no internals) with an `error` status, never a pending one left behind. A job that finds
the PR's head moved on makes sure the current head has a review queued before it stops, so
whatever order GitHub delivers pushes in, the current head ends reviewed.

Job kinds are looked up in `registry.JOBS`: the built-in ones of `job_handlers.py` and those a
plug-in adds (the GPU `actions` mode). The heartbeat row is written through `store.py`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from reviewbot import sandbox
from reviewbot.repo_config import ConfigError
from reviewbot.service import health, ingest, job_handlers, jobs, metrics, plugins, registry, retention, store
from reviewbot.service.checkout import CheckoutError
from reviewbot.service.github_api import GitHubFailed
from reviewbot.service.job_context import JobContext, JobEnd, Stopped
from reviewbot.service.registry import JobHandler
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)


def service_state_paths(settings: Settings) -> list[Path]:
    """What of the service a sandboxed run must not see: the SQLite file (and its journals), the
    secret files, the settings file (it may hold secrets too), the work directory."""
    paths = [Path(settings.work_dir)]
    if settings.database_url.startswith("sqlite:///"):
        database = settings.database_url.removeprefix("sqlite:///")
        paths += [Path(database + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    for name in ("webhook_secret_file", "github_token_file", "app_private_key_file", "config_file"):
        if settings.values[name]:
            paths.append(Path(settings.values[name]))
    return paths


WRITE_GAP_SECONDS = 0.002


class Worker:
    """Loops in threads: ingesting deliveries into jobs (so a newer push supersedes a job while that
    job runs), `worker_threads` job loops, and a heartbeat (table `workers`, read by /healthz) that
    also prunes expired rows (`retention.py`) once an hour. A loop that cannot reach the database
    retries after a pause and says so in the heartbeat; `run_forever` ends the process when a loop
    thread died, for the supervisor (serve, systemd) to start a fresh one."""

    def __init__(
        self, settings: Settings, sessions: sessionmaker, name: str = "worker", parent_pid: int | None = None
    ) -> None:
        """`parent_pid`: stop (after the current jobs) once that process is gone (serve's worker)."""
        plugins.load()
        self.settings = settings
        self.sessions = sessions
        self.parent_pid = parent_pid
        self.id = f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        sandbox.hide_service_state(service_state_paths(settings))
        available = sandbox.availability()
        if available.ok:
            logger.info("PR code runs sandboxed (a uid of its own, new namespaces)")
        else:
            logger.warning(
                "no sandbox for PR code: %s; %s",
                available.reason,
                "same-repository PRs run unsandboxed (unsandboxed=true)"
                if settings.unsandboxed
                else "PR code will not run",
            )
        self._stop = threading.Event()
        self.wake = threading.Event()
        self._jobs_waiting = threading.Event()
        self._threads: list[threading.Thread] = []
        self._problems: dict[str, str] = {}  # loop -> what keeps it from working now (heartbeat detail)
        # SQLite has one writer at a time and no fair queue: between its transactions a worker leaves
        # the write lock free for a moment, so that the webhook's inserts get it (delivery_writer.py)
        self._gap_s = WRITE_GAP_SECONDS if sessions.kw["bind"].dialect.name == "sqlite" else 0.0

    def _database_down(self, loop: str, exc: OperationalError) -> None:
        self._problems[loop] = f"{loop}: database unavailable: {health.first_line(exc)}"
        logger.error("worker %s: %s", self.id, self._problems[loop])
        self.sessions.kw["bind"].dispose()  # reconnect next time: a repaired database is seen
        self._stop.wait(min(5.0, self.settings.worker_poll_interval * 10))

    def ingest_forever(self) -> None:
        while not self._stop.is_set():
            try:
                processed = ingest.ingest(self.sessions, self.settings, gap_s=self._gap_s)
            except OperationalError as exc:
                self._database_down("ingest", exc)
                continue
            self._problems.pop("ingest", None)
            if processed:
                self._jobs_waiting.set()
                continue
            self.wake.wait(self.settings.worker_poll_interval)
            self.wake.clear()

    def run_once(self) -> bool:
        job = jobs.claim(self.sessions, self.id, self.settings.job_lease_seconds, registry.pr_exclusive_kinds())
        if job is None:
            return False
        started = time.monotonic()
        kind = registry.JOBS.get(job.kind)
        assert kind is not None, f"no handler for job kind {job.kind!r}"
        logger.info(
            "job %d (%s %s#%d %s) claimed by %s, attempt %d",
            job.id,
            job.kind,
            job.repo,
            job.pr,
            job.head_sha[:12],
            self.id,
            job.attempts,
        )
        with JobContext(self.settings, self.sessions, self.id, job) as ctx:
            if job.attempts > self.settings.job_max_attempts:  # its earlier runs never came back
                end = job_handlers.give_up(
                    ctx, "the worker running it stopped (killed or crashed) on every attempt", ""
                )
            else:
                end = self._run_guarded(ctx, kind.handler)
        if end is None:
            return True
        try:
            if end.state == "retry":
                jobs.retry_later(self.sessions, job.id, self.id, end.error, end.delay_s)
                logger.warning("job %d: attempt %d failed; runs again in %.0fs", job.id, job.attempts, end.delay_s)
            else:
                jobs.finish(self.sessions, job.id, self.id, end.state, end.error)
        except jobs.LeaseLost as exc:
            logger.error("job %d: %s", job.id, exc)
            return True
        metrics.inc("reviewbot_jobs_total", kind=job.kind, state=end.state)
        metrics.observe("reviewbot_job_duration_seconds", time.monotonic() - started, kind=job.kind)
        return True

    def _run_guarded(self, ctx: JobContext, handler: JobHandler) -> JobEnd | None:
        """The job's error boundary: whatever the handler raises ends this job only. None when
        another worker holds the job now."""
        job = ctx.job
        try:
            return JobEnd(handler(ctx))
        except Stopped as exc:
            logger.info("job %d stopped (%s): nothing posted", job.id, exc)
            return JobEnd("superseded" if str(exc) == "superseded" else "cancelled")
        except ConfigError as exc:  # the PR's .reviewbot.yml: its status already says so
            logger.error("job %d failed: .reviewbot.yml: %s", job.id, exc)
            return JobEnd("failed", f".reviewbot.yml: {exc}")
        except GitHubFailed as exc:  # already retried by `GitHub.call`
            logger.error("job %d failed: %s", job.id, exc)
            return job_handlers.give_up(
                ctx, "GitHub's API refused or kept failing a request the review needs", str(exc)
            )
        except jobs.LeaseLost as exc:
            logger.error("job %d abandoned: %s", job.id, exc)
            return None
        except Exception as exc:  # the job's error boundary: anything else fails this job only
            logger.exception("job %d (%s %s#%d): unexpected error", job.id, job.kind, job.repo, job.pr)
            return self._job_failed(ctx, exc)

    def _job_failed(self, ctx: JobContext, exc: Exception) -> JobEnd:
        """How a job that raised an unexpected error ends: retried with exponential backoff while it
        has attempts left, then given up with an error summary on the PR."""
        job = ctx.job
        error = f"{type(exc).__name__}: {exc}"
        if job.attempts < self.settings.job_max_attempts:
            return JobEnd("retry", error, self.settings.job_retry_backoff_seconds * 2 ** (job.attempts - 1))
        reason = (
            "the PR's commits could not be fetched"
            if isinstance(exc, CheckoutError)
            else f"the bot hit an internal error (logged on its worker as job {job.id})"
        )
        return job_handlers.give_up(ctx, reason, error)

    def run_jobs_forever(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except OperationalError as exc:
                self._database_down("jobs", exc)
                continue
            except Exception:  # the loop's boundary: a failed claim must not end the loop
                logger.exception("job loop: claiming or finishing a job failed; trying again")
                ran = False
            self._problems.pop("jobs", None)
            if ran:
                time.sleep(self._gap_s)
            else:
                self._jobs_waiting.wait(self.settings.worker_poll_interval)
                self._jobs_waiting.clear()

    def _beat(self, state: str) -> None:
        """Record this worker's heartbeat; a database error is logged (the heartbeat then goes stale)."""
        detail = "; ".join(sorted(self._problems.values()))
        try:
            store.record_heartbeat(
                self.sessions, self.id, state, detail, metrics.snapshot(), self.settings.worker_heartbeat_seconds
            )
        except OperationalError as exc:
            logger.error("worker %s: heartbeat not recorded: %s", self.id, health.first_line(exc))

    def _prune(self) -> None:
        try:
            pruned = retention.prune(self.sessions, self.settings.delivery_retention_days * 86400)
        except OperationalError as exc:
            logger.error("worker %s: pruning failed: %s", self.id, health.first_line(exc))
            return
        if pruned.jobs or pruned.deliveries or pruned.workers:
            logger.info(
                "pruned %d job(s), %d deliveries, %d worker record(s)", pruned.jobs, pruned.deliveries, pruned.workers
            )

    def heartbeat_forever(self) -> None:
        next_prune = time.monotonic()
        while not self._stop.is_set():
            self._beat("running")
            if time.monotonic() >= next_prune:
                self._prune()
                next_prune = time.monotonic() + retention.PRUNE_INTERVAL_SECONDS
            if self.parent_pid is not None and os.getppid() != self.parent_pid:
                logger.warning("worker %s: parent process %d is gone: stopping", self.id, self.parent_pid)
                self.stop_soon()
            self._stop.wait(self.settings.worker_heartbeat_seconds)

    def _start(self, target: Callable[[], None], suffix: str) -> None:
        thread = threading.Thread(target=target, name=f"{self.id}-{suffix}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def run_forever(self) -> int:
        """Run until `stop_soon` (0) or until a loop thread dies (1, after the other loops' current
        jobs are done): a worker missing a loop must not look alive."""
        self._start(self.ingest_forever, "ingest")
        for index in range(self.settings.worker_threads):
            self._start(self.run_jobs_forever, f"jobs{index}")
        self._start(self.heartbeat_forever, "heartbeat")
        code = 0
        while not self._stop.wait(1.0):
            dead = [thread.name for thread in self._threads if not thread.is_alive()]
            if dead:
                logger.error("worker %s: thread(s) %s died: stopping", self.id, ", ".join(dead))
                code = 1
                self.stop_soon()
        self.wake.set()
        self._jobs_waiting.set()
        for thread in self._threads:
            thread.join()
        self._beat("stopped")
        return code

    def stop_soon(self) -> None:
        """Stop polling once the current jobs are finished."""
        self._stop.set()


# --- shared steps ---------------------------------------------------------------------------------
