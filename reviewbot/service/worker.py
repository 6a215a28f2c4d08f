"""The worker: claims jobs, keeps their lease alive, runs them, and never posts for a stopped job.

A job runs under a lease renewed by a heartbeat thread. Its `stop_reason` is set when a newer
head arrives or the PR closes; handlers call `ctx.checkpoint()` (which reads it) before every
write to GitHub, so a superseded or cancelled job stops and posts nothing.
A worker killed mid-job leaves the job `running` with a lease that runs out; the next claim
re-runs it, and the marker-keyed upserts in `posting.py` make that rerun post once.

`JOB_HANDLERS` maps a job kind to its handler; `register_job` adds kinds (the GPU `actions` mode).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import sessionmaker

from reviewbot import logger
from reviewbot.repo_config import ConfigError
from reviewbot.service import commands, health, ingest, jobs, metrics, posting, retention
from reviewbot.service.checkout import CheckoutError, checkout
from reviewbot.service.db import Authorisation, Delivery, Job, ReviewRecord, SuiteRun, WorkerBeat
from reviewbot.service.github_api import GitHub, GitHubFailed
from reviewbot.service.gpu_dispatch import GpuOutcome, GpuRequest, load_plugins, make_dispatcher
from reviewbot.service.review_call import review
from reviewbot.service.settings import Settings


class Stopped(Exception):
    """The job was superseded or cancelled while it ran."""


class JobContext:
    def __init__(self, worker: Worker, job: Job) -> None:
        self.worker = worker
        self.job = job
        self.settings = worker.settings
        self.sessions = worker.sessions
        self._done = threading.Event()
        self._lost = False
        self._heartbeat = threading.Thread(target=self._beat, name=f"lease-{job.id}", daemon=True)

    def _beat(self) -> None:
        interval = self.settings.job_lease_seconds / 3
        while not self._done.wait(interval):
            try:
                jobs.renew(self.sessions, self.job.id, self.worker.id, self.settings.job_lease_seconds)
            except jobs.LeaseLost as exc:
                logger.error("%s", exc)
                self._lost = True
                return

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
        reason = jobs.renew(self.sessions, self.job.id, self.worker.id, self.settings.job_lease_seconds)
        if reason:
            raise Stopped(reason)

    def github(self) -> GitHub:
        return GitHub(self.settings, self.installation_id())

    def installation_id(self) -> int | None:
        if not self.job.delivery_id:
            return self.job.args.get("installation_id")
        with self.sessions() as session:
            delivery = session.scalar(select(Delivery).where(Delivery.guid == self.job.delivery_id))
            installation = (delivery.payload.get("installation") or {}) if delivery else {}
        return installation.get("id") or self.job.args.get("installation_id")


WRITE_GAP_SECONDS = 0.002
Handler = Callable[[JobContext], str]
JOB_HANDLERS: dict[str, Handler] = {}


def register_job(kind: str, *, pr_exclusive: bool = False) -> Callable[[Handler], Handler]:
    """`pr_exclusive`: the kind writes the PR's summary, so it waits while another such job of the
    PR runs (a job parked as running, such as a deadline, must not be exclusive)."""

    def add(handler: Handler) -> Handler:
        JOB_HANDLERS[kind] = handler
        if pr_exclusive:
            jobs.PR_EXCLUSIVE_KINDS.add(kind)
        return handler

    return add


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
        load_plugins()
        self.settings = settings
        self.sessions = sessions
        self.parent_pid = parent_pid
        self.id = f"{name}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
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
        job = jobs.claim(self.sessions, self.id, self.settings.job_lease_seconds, self.settings.job_max_attempts)
        if job is None:
            return False
        started = time.monotonic()
        handler = JOB_HANDLERS.get(job.kind)
        assert handler is not None, f"no handler for job kind {job.kind!r}"
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
        error = ""
        with JobContext(self, job) as ctx:
            try:
                state = handler(ctx)
            except Stopped as exc:
                state = "superseded" if str(exc) == "superseded" else "cancelled"
                logger.info("job %d stopped (%s): nothing posted", job.id, exc)
            except (GitHubFailed, CheckoutError, ConfigError) as exc:
                state, error = "failed", str(exc)
                logger.error("job %d failed: %s", job.id, exc)
            except jobs.LeaseLost as exc:
                logger.error("job %d abandoned: %s", job.id, exc)
                return True
        try:
            jobs.finish(self.sessions, job.id, self.id, state, error)
        except jobs.LeaseLost as exc:
            logger.error("job %d: %s", job.id, exc)
            return True
        metrics.inc("reviewbot_jobs_total", kind=job.kind, state=state)
        metrics.observe("reviewbot_job_duration_seconds", time.monotonic() - started, kind=job.kind)
        return True

    def run_jobs_forever(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except OperationalError as exc:
                self._database_down("jobs", exc)
                continue
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
            with self.sessions.begin() as session:
                row = session.get(WorkerBeat, self.id)
                if row is None:
                    row = WorkerBeat(id=self.id, host=socket.gethostname(), pid=os.getpid(), started_at=time.time())
                    session.add(row)
                row.heartbeat_at, row.state, row.detail = time.time(), state, detail
                row.metrics = metrics.snapshot()
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


def _open_pull(ctx: JobContext, gh: GitHub) -> tuple[Any, Any]:
    """The repo and the PR, after checking the job is still about the PR's current head."""
    job = ctx.job
    repo = gh.call("get_repo", lambda: gh.client.get_repo(job.repo))
    pull = gh.call("get_pull", lambda: repo.get_pull(job.pr))
    if pull.state != "open":
        raise Stopped("closed")
    if job.head_sha and pull.head.sha != job.head_sha:
        logger.info("job %d: PR head is now %s, not %s", job.id, pull.head.sha[:12], job.head_sha[:12])
        raise Stopped("superseded")
    return repo, pull


def _authorised(ctx: JobContext, sha: str) -> bool:
    with ctx.sessions() as session:
        return (
            session.scalar(
                select(Authorisation).where(
                    Authorisation.repo == ctx.job.repo, Authorisation.pr == ctx.job.pr, Authorisation.head_sha == sha
                )
            )
            is not None
        )


def _checkout(ctx: JobContext, gh: GitHub, pull: Any, purpose: str = "review") -> Any:
    job = ctx.job
    clone_url = job.args.get("clone_url") or pull.base.repo.clone_url
    token = gh.token if clone_url.startswith("https://") else None
    return checkout(
        Path(ctx.settings.work_dir),
        job.repo,
        clone_url,
        job.pr,
        pull.base.ref,
        (pull.base.sha, job.head_sha),
        token,
        purpose,
    )


def _record(ctx: JobContext) -> ReviewRecord:
    with ctx.sessions.begin() as session:
        record = session.scalar(
            select(ReviewRecord).where(ReviewRecord.repo == ctx.job.repo, ReviewRecord.pr == ctx.job.pr)
        )
        if record is None:
            record = ReviewRecord(repo=ctx.job.repo, pr=ctx.job.pr, fingerprints=[])
            session.add(record)
            session.flush()
        session.expunge(record)
        return record


def _save_record(ctx: JobContext, **fields: Any) -> None:
    with ctx.sessions.begin() as session:
        record = session.scalar(
            select(ReviewRecord).where(ReviewRecord.repo == ctx.job.repo, ReviewRecord.pr == ctx.job.pr)
        )
        assert record is not None
        for key, value in fields.items():
            setattr(record, key, value)
        record.updated_at = time.time()


def summary_body(head_sha: str, static_section: str, gpu_section: str) -> str:
    parts = [posting.SUMMARY_MARKER, f"## reviewbot: review of `{head_sha[:12]}`", static_section.strip()]
    if gpu_section:
        parts += ["### GPU regression suites", gpu_section.strip()]
    return "\n\n".join(part for part in parts if part) + "\n"


def _publish_summary(ctx: JobContext, gh: GitHub, pull: Any, static_section: str, gpu_section: str) -> None:
    body = summary_body(ctx.job.head_sha, static_section, gpu_section)
    ctx.checkpoint()
    comment_id, sent = posting.upsert_summary(gh, pull, body)
    _save_record(
        ctx,
        summary_comment_id=comment_id,
        summary_sha256=hashlib.sha256(body.encode()).hexdigest(),
        head_sha=ctx.job.head_sha,
    )
    logger.info("job %d: summary comment %d %s", ctx.job.id, comment_id, "updated" if sent else "unchanged")


# --- handlers -------------------------------------------------------------------------------------


@register_job("review")
def run_review_job(ctx: JobContext) -> str:
    job = ctx.job
    gh = ctx.github()
    repo, pull = _open_pull(ctx, gh)
    ctx.checkpoint()
    posting.set_status(gh, repo, job.head_sha, posting.STATIC_CONTEXT, "pending", "review running")
    run_pr_code = not job.args.get("fork") or _authorised(ctx, job.head_sha)
    with _checkout(ctx, gh, pull) as path:
        try:
            outcome = review(
                path,
                pull.base.sha,
                job.head_sha,
                pull.body or "",
                run_pr_code=run_pr_code,
                pr_title=pull.title or "",
                log_dir=Path(ctx.settings.work_dir)
                / "review-logs"
                / f"{job.repo.replace('/', '__')}-{job.pr}-{job.id}",
            )
        except ConfigError as exc:
            ctx.checkpoint()
            posting.set_status(gh, repo, job.head_sha, posting.STATIC_CONTEXT, "error", f".reviewbot.yml: {exc}")
            raise
        lines = posting.diff_lines(path, pull.base.sha, job.head_sha)
    ctx.checkpoint()
    record = _record(ctx)
    already = set(record.fingerprints) | posting.posted_fingerprints(gh, pull)
    batch, old, rest = posting.split_findings(outcome.findings, lines, already, ctx.settings.max_inline_comments)
    static = outcome.markdown
    if not run_pr_code:
        static += (
            "\n\n> Fork PR: the cache-key probe, the test plan and the suites run this PR's code, so they wait "
            "for a maintainer's `/rerun-gpu` on this exact head."
        )
    static += f"\n\n<sub>{len(batch) + old} finding(s) commented inline; {len(rest)} in this summary only.</sub>"
    gpu_section = record.gpu_section if record.head_sha == job.head_sha else ""
    _save_record(ctx, static_section=static, p0=outcome.blocking)
    _publish_summary(ctx, gh, pull, static, gpu_section)
    ctx.checkpoint()
    posting.post_inline(gh, pull, job.head_sha, batch)
    _save_record(ctx, fingerprints=sorted(already | {f.fingerprint for f, _ in batch}))
    ctx.checkpoint()
    if outcome.blocking:
        posting.set_status(gh, repo, job.head_sha, posting.STATIC_CONTEXT, "failure", "a P0-BLOCKER finding stands")
    else:
        posting.set_status(
            gh, repo, job.head_sha, posting.STATIC_CONTEXT, "success", f"{len(outcome.findings)} finding(s), no blocker"
        )
    return "done"


@register_job("gpu")
def run_gpu_job(ctx: JobContext) -> str:
    job = ctx.job
    gh = ctx.github()
    repo, pull = _open_pull(ctx, gh)
    if job.args.get("fork") and not _authorised(ctx, job.head_sha):
        logger.warning("job %d: fork head %s not authorised: GPU suites not run", job.id, job.head_sha[:12])
        return "cancelled"
    ctx.checkpoint()
    posting.set_status(gh, repo, job.head_sha, posting.GPU_CONTEXT, "pending", "GPU suites running")
    dispatcher = make_dispatcher(ctx.settings)
    request = GpuRequest(
        job.repo,
        job.pr,
        job.head_sha,
        pull.base.sha,
        tuple(job.args.get("suites") or ctx.settings.gpu_suites),
        Path(),
        str(job.id),
    )
    with _checkout(ctx, gh, pull, "gpu") as path:
        try:
            outcome = dispatcher.dispatch(dataclasses.replace(request, checkout=path))
        except ConfigError as exc:
            ctx.checkpoint()
            posting.set_status(gh, repo, job.head_sha, posting.GPU_CONTEXT, "error", f".reviewbot.yml: {exc}")
            raise
    if outcome is None:
        logger.info("job %d: GPU suites dispatched; the outcome arrives later", job.id)
        return "done"
    publish_gpu_outcome(ctx, gh, repo, pull, outcome)
    return "done"


def publish_gpu_outcome(ctx: JobContext, gh: GitHub, repo: Any, pull: Any, outcome: GpuOutcome) -> None:
    """Store the suite runs, put them in the summary, set `reviewbot/gpu-regression`."""
    job = ctx.job
    ctx.checkpoint()
    with ctx.sessions.begin() as session:
        for suite in outcome.suites:
            session.add(
                SuiteRun(
                    job_id=job.id,
                    repo=job.repo,
                    pr=job.pr,
                    head_sha=job.head_sha,
                    suite=suite["name"],
                    status=suite["status"],
                    result=suite,
                )
            )
    record = _record(ctx)
    static = record.static_section if record.head_sha == job.head_sha else "_Static review pending._"
    _save_record(ctx, gpu_section=outcome.markdown)
    _publish_summary(ctx, gh, pull, static, outcome.markdown)
    ctx.checkpoint()
    description = {"success": "GPU suites passed", "failure": "a GPU suite failed"}.get(
        outcome.state, "GPU suites could not run"
    )
    posting.set_status(gh, repo, job.head_sha, posting.GPU_CONTEXT, outcome.state, description)


@register_job("command")
def run_command_job(ctx: JobContext) -> str:
    job = ctx.job
    gh = ctx.github()
    args = job.args
    if args["author"] == gh.login:
        logger.info("job %d: comment by the bot itself ignored", job.id)
        return "done"
    repo = gh.call("get_repo", lambda: gh.client.get_repo(job.repo))
    pull = gh.call("get_pull", lambda: repo.get_pull(job.pr))
    issue = gh.call("get_issue", lambda: repo.get_issue(job.pr))
    comment = gh.call("get_comment", lambda: issue.get_comment(args["comment_id"]))
    gh.upsert(
        "reaction",
        lambda: next((r for r in comment.get_reactions() if r.content == "eyes" and r.user.login == gh.login), None),
        lambda: comment.create_reaction("eyes"),
    )
    for index, command in enumerate(commands.parse(args["body"])):
        key = f"{args['comment_id']}:{index}"
        if command.name == "review":
            _enqueue_from_command(ctx, "review", pull)
        elif command.name == "rerun-gpu":
            permission = gh.call("get_permission", lambda: repo.get_collaborator_permission(args["author"]))
            if permission not in ("admin", "write"):
                logger.info("job %d: /rerun-gpu by %s refused (permission %s)", job.id, args["author"], permission)
                posting.reply_once(
                    gh,
                    issue,
                    key,
                    f"@{args['author']} `/rerun-gpu` runs the GPU suites on this "
                    f"PR's code, so only collaborators with **write** or **admin** permission on "
                    f"`{job.repo}` can use it (yours: `{permission}`). Ask a maintainer to comment "
                    f"`/rerun-gpu`.",
                )
                continue
            _enqueue_from_command(ctx, "gpu", pull, suites=list(command.args), granted_by=args["author"])
        else:
            posting.reply_once(
                gh,
                issue,
                key,
                ("" if command.known else f"Unknown command `/{command.name}`.\n\n") + commands.HELP_TEXT,
            )
    return "done"


def _enqueue_from_command(
    ctx: JobContext, kind: str, pull: Any, *, suites: list[str] | None = None, granted_by: str = ""
) -> None:
    from reviewbot.service.events import is_fork

    head = pull.head.sha
    fork = is_fork(pull.raw_data)
    base_args = {
        "base_sha": pull.base.sha,
        "fork": fork,
        "clone_url": pull.base.repo.clone_url,
        "base_ref": pull.base.ref,
        "installation_id": ctx.installation_id(),
    }
    with ctx.sessions.begin() as session:
        if kind == "gpu" and fork:
            exists = session.scalar(
                select(Authorisation).where(
                    Authorisation.repo == ctx.job.repo, Authorisation.pr == ctx.job.pr, Authorisation.head_sha == head
                )
            )
            if exists is None:
                session.add(Authorisation(repo=ctx.job.repo, pr=ctx.job.pr, head_sha=head, granted_by=granted_by))
                logger.info("%s#%d: %s authorised fork head %s", ctx.job.repo, ctx.job.pr, granted_by, head[:12])
            jobs.enqueue(session, "review", ctx.job.repo, ctx.job.pr, head, args=base_args)
        if kind == "gpu":
            jobs.enqueue(session, "gpu", ctx.job.repo, ctx.job.pr, head, args={**base_args, "suites": suites or []})
        else:
            jobs.enqueue(session, "review", ctx.job.repo, ctx.job.pr, head, args=base_args)
