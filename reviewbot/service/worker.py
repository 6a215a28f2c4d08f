"""The worker: claims jobs, keeps their lease alive, runs them, and never posts for a stopped job.

A job runs under a lease renewed by a heartbeat thread. Its `stop_reason` is set when a newer
head arrives or the PR closes; handlers call `ctx.checkpoint()` (which reads it) before every
write to GitHub, so a superseded or cancelled job stops and posts nothing.
A worker killed mid-job leaves the job `running` with a lease that runs out; the next claim
re-runs it, and the marker-keyed upserts in `posting.py` make that rerun post once.

Each job runs under its own error boundary (`Worker.run_once`): an unexpected exception fails that
job only. It runs again after a backoff (`job_retry_backoff_seconds`, doubling) until
`job_max_attempts`, then fails for good, and its PR gets a summary saying the review could not run
and why (no internals) with an `error` status, never a pending one left behind. A job that finds
the PR's head moved on makes sure the current head has a review queued before it stops, so
whatever order GitHub delivers pushes in, the current head ends reviewed.

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

from reviewbot import logger, sandbox
from reviewbot.repo_config import ConfigError
from reviewbot.service import commands, health, ingest, jobs, metrics, posting, retention
from reviewbot.service.checkout import CheckoutError, checkout
from reviewbot.service.db import Authorisation, Delivery, Job, ReviewRecord, SuiteRun, WorkerBeat
from reviewbot.service.events import is_fork
from reviewbot.service.github_api import GitHub, GitHubFailed
from reviewbot.service.gpu_dispatch import GpuOutcome, GpuRequest, load_plugins, make_dispatcher
from reviewbot.service.review_call import review
from reviewbot.service.settings import Settings


class Stopped(Exception):
    """The job was superseded or cancelled while it ran."""


@dataclasses.dataclass(frozen=True)
class JobEnd:
    """How a run of a job ended: `state` is final, or "retry" (pending again after `delay_s`)."""

    state: str
    error: str = ""
    delay_s: float = 0.0


def service_state_paths(settings: Settings) -> list[Path]:
    """What of the service a sandboxed run must not see: the SQLite file (and its journals), the
    secret files, the work directory."""
    paths = [Path(settings.work_dir)]
    if settings.database_url.startswith("sqlite:///"):
        database = settings.database_url.removeprefix("sqlite:///")
        paths += [Path(database + suffix) for suffix in ("", "-wal", "-shm", "-journal")]
    for name in ("webhook_secret_file", "github_token_file", "app_private_key_file"):
        if settings.values[name]:
            paths.append(Path(settings.values[name]))
    return paths


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
        job = jobs.claim(self.sessions, self.id, self.settings.job_lease_seconds)
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
        with JobContext(self, job) as ctx:
            if job.attempts > self.settings.job_max_attempts:  # its earlier runs never came back
                end = _give_up(ctx, "the worker running it stopped (killed or crashed) on every attempt", "")
            else:
                end = self._run_guarded(ctx, handler)
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

    def _run_guarded(self, ctx: JobContext, handler: Handler) -> JobEnd | None:
        """The job's error boundary: whatever the handler raises ends this job only. None when
        another worker holds the job now."""
        job = ctx.job
        try:
            return JobEnd(handler(ctx))
        except Stopped as exc:
            logger.info("job %d stopped (%s): nothing posted", job.id, exc)
            return JobEnd("superseded" if str(exc) == "superseded" else "cancelled")
        except ConfigError as exc:
            logger.error("job %d failed: %s", job.id, exc)
            return JobEnd("failed", str(exc))
        except GitHubFailed as exc:  # already retried by `GitHub.call`
            logger.error("job %d failed: %s", job.id, exc)
            return _give_up(ctx, "GitHub's API refused or kept failing a request the review needs", str(exc))
        except jobs.LeaseLost as exc:
            logger.error("job %d abandoned: %s", job.id, exc)
            return None
        except Exception as exc:  # noqa: BLE001 - the job's error boundary: anything else fails this job only
            logger.exception("job %d (%s %s#%d): unexpected error", job.id, job.kind, job.repo, job.pr)
            error = f"{type(exc).__name__}: {exc}"
            if job.attempts < self.settings.job_max_attempts:
                return JobEnd("retry", error, self.settings.job_retry_backoff_seconds * 2 ** (job.attempts - 1))
            reason = (
                "the PR's commits could not be fetched"
                if isinstance(exc, CheckoutError)
                else f"the bot hit an internal error (logged on its worker as job {job.id})"
            )
            return _give_up(ctx, reason, error)

    def run_jobs_forever(self) -> None:
        while not self._stop.is_set():
            try:
                ran = self.run_once()
            except OperationalError as exc:
                self._database_down("jobs", exc)
                continue
            except Exception:  # noqa: BLE001 - the loop's boundary: a failed claim must not end the loop
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
        _queue_current_head(ctx, pull)
        raise Stopped("superseded")
    return repo, pull


def _pull_args(ctx: JobContext, pull: Any) -> dict[str, Any]:
    """Job arguments of a review of `pull`'s current head, from the API's view of the PR."""
    return {
        "base_sha": pull.base.sha,
        "fork": is_fork(pull.raw_data),
        "clone_url": pull.base.repo.clone_url,
        "base_ref": pull.base.ref,
        "installation_id": ctx.installation_id(),
    }


def _queue_current_head(ctx: JobContext, pull: Any) -> None:
    """The PR's head moved on from this job's: make sure the current head gets reviewed. Its own
    job may be gone: a late delivery of an older push supersedes the newer head's job."""
    job, head = ctx.job, pull.head.sha
    args = _pull_args(ctx, pull)
    kinds = ["review"]
    if job.kind == "gpu" and ctx.settings.auto_gpu and not args["fork"]:
        kinds.append("gpu")
    with ctx.sessions.begin() as session:
        jobs.stop_pr_jobs(session, job.repo, job.pr, "superseded", keep_head=head)
        for kind in kinds:
            covered = select(Job.id).where(
                Job.repo == job.repo,
                Job.pr == job.pr,
                Job.kind == kind,
                Job.head_sha == head,
                Job.state.in_(("pending", "running", "done", "failed")),
            )
            if session.scalar(covered.limit(1)) is None:
                extra = {"suites": list(ctx.settings.gpu_suites)} if kind == "gpu" else {}
                jobs.enqueue(session, kind, job.repo, job.pr, head, args={**args, **extra})
                logger.info("job %d: queued a %s of the current head %s", job.id, kind, head[:12])


def _sandbox_refusal(ctx: JobContext, fork: bool) -> str:
    """'' when the PR's code may run on this worker, else why not (the review says it)."""
    available = sandbox.availability()
    if available.ok:
        return ""
    if ctx.settings.unsandboxed and not fork:
        logger.warning("job %d: PR code runs unsandboxed (unsandboxed=true): %s", ctx.job.id, available.reason)
        return ""
    allowed = (
        "unsandboxed runs are allowed for same-repository PRs only"
        if ctx.settings.unsandboxed
        else "its operator may allow unsandboxed runs for same-repository PRs (`REVIEWBOT_UNSANDBOXED=1`)"
    )
    return f"no sandbox can be built on this worker ({available.reason}); {allowed}"


def _give_up(ctx: JobContext, reason: str, error: str) -> JobEnd:
    """A final failure: tell the PR why (`reason`: no internals) and end the job `failed`."""
    try:
        _report_failure(ctx, reason)
    except Stopped as exc:
        return JobEnd("superseded" if str(exc) == "superseded" else "cancelled", error or reason)
    except GitHubFailed as exc:
        logger.error("job %d: could not tell the PR that it failed: %s", ctx.job.id, exc)
    return JobEnd("failed", error or reason)


def _report_failure(ctx: JobContext, reason: str) -> None:
    """Review and GPU jobs: the summary says the work could not run, and the status is `error`.
    Command jobs: a reply to the comment. Reads the PR only through its issue and commit, which
    work when reading the pull request itself is what fails."""
    job = ctx.job
    gh = ctx.github()
    repo = gh.call("get_repo", lambda: gh.client.get_repo(job.repo))
    issue = gh.call("get_issue", lambda: repo.get_issue(job.pr))
    tries = min(job.attempts, ctx.settings.job_max_attempts)
    if job.kind == "command":
        ctx.checkpoint()
        posting.reply_once(
            gh, issue, f"{job.args.get('comment_id')}:error", f"reviewbot could not act on this comment: {reason}."
        )
        return
    if job.kind not in ("review", "gpu") or not job.head_sha:
        return
    what, again = ("review", "/review") if job.kind == "review" else ("GPU suites run", "/rerun-gpu")
    text = (
        f"**The {what} of `{job.head_sha[:12]}` could not run:** {reason}. "
        f"It was tried {tries} time(s); comment `{again}` to try again."
    )
    record = _record(ctx)
    same_head = record.head_sha == job.head_sha
    if job.kind == "review":
        static, gpu = text, record.gpu_section if same_head else ""
        _save_record(ctx, static_section=static, p0=False)
    else:
        static, gpu = (record.static_section if same_head else "_Static review pending._"), text
        _save_record(ctx, gpu_section=gpu)
    _publish_summary(ctx, gh, issue, static, gpu)
    ctx.checkpoint()
    context = posting.STATIC_CONTEXT if job.kind == "review" else posting.GPU_CONTEXT
    posting.set_status(gh, repo, job.head_sha, context, "error", f"could not run: {reason}")


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


def _publish_summary(ctx: JobContext, gh: GitHub, issue: Any, static_section: str, gpu_section: str) -> None:
    body = summary_body(ctx.job.head_sha, static_section, gpu_section)
    ctx.checkpoint()
    comment_id, sent = posting.upsert_summary(gh, issue, body)
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
    fork = bool(job.args.get("fork"))
    authorised = not fork or _authorised(ctx, job.head_sha)
    refusal = _sandbox_refusal(ctx, fork) if authorised else ""
    run_pr_code = authorised and not refusal
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
    if not authorised:
        static += (
            "\n\n> Fork PR: the cache-key probe, the test plan and the suites run this PR's code, so they wait "
            "for a maintainer's `/rerun-gpu` on this exact head."
        )
    elif refusal:
        static += f"\n\n> This PR's code did not run (the cache-key probe, the test plan and the suites): {refusal}."
    static += f"\n\n<sub>{len(batch) + old} finding(s) commented inline; {len(rest)} in this summary only.</sub>"
    gpu_section = record.gpu_section if record.head_sha == job.head_sha else ""
    _save_record(ctx, static_section=static, p0=outcome.blocking)
    issue = gh.call("get_issue", pull.as_issue)
    _publish_summary(ctx, gh, issue, static, gpu_section)
    ctx.checkpoint()
    posting.post_inline(gh, pull, job.head_sha, batch)
    _save_record(ctx, fingerprints=sorted(already | {f.fingerprint for f, _ in batch}))
    if outcome.cache_label is not None:
        ctx.checkpoint()
        if posting.set_label(gh, issue, posting.CACHE_LABEL, outcome.cache_label):
            logger.info("job %d: label %r %s", job.id, posting.CACHE_LABEL, "set" if outcome.cache_label else "removed")
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
    refusal = _sandbox_refusal(ctx, bool(job.args.get("fork"))) if ctx.settings.gpu_dispatch == "local" else ""
    if refusal:
        publish_gpu_outcome(ctx, gh, repo, pull, GpuOutcome("error", [], f"The GPU suites did not run: {refusal}."))
        return "done"
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
    _publish_summary(ctx, gh, gh.call("get_issue", pull.as_issue), static, outcome.markdown)
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
            _enqueue_from_command(ctx, "review", pull, pull.head.sha)
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
            target = commands.rerun_target(command.args)
            head, refusal = _head_to_run(ctx, pull, target.sha_prefix) if not target.error else ("", target.error)
            if refusal:
                logger.info("job %d: /rerun-gpu by %s refused: %s", job.id, args["author"], refusal)
                posting.reply_once(
                    gh,
                    issue,
                    key,
                    f"@{args['author']} the GPU suites did not run: {refusal}. This PR's head is now "
                    f"`{pull.head.sha}`; once you have looked at it, comment `/rerun-gpu {pull.head.sha[:12]}` "
                    "to run them on exactly that commit.",
                )
                continue
            fork = _enqueue_from_command(ctx, "gpu", pull, head, suites=list(target.suites), granted_by=args["author"])
            posting.reply_once(
                gh,
                issue,
                key,
                f"@{args['author']} GPU suites queued for `{head}`"
                + (" (this fork's code is authorised at exactly this commit)." if fork else "."),
            )
        else:
            posting.reply_once(
                gh,
                issue,
                key,
                ("" if command.known else f"Unknown command `/{command.name}`.\n\n") + commands.HELP_TEXT,
            )
    return "done"


def _head_to_run(ctx: JobContext, pull: Any, sha_prefix: str) -> tuple[str, str]:
    """The head `/rerun-gpu` runs: (sha, '') or ('', why not).

    `/rerun-gpu <sha>` names it: a prefix (7+ hex digits) of the PR's current head. Without one,
    on a fork PR, the comment authorises the head its author saw: refused when a push arrived
    after the comment was written (a recorded `synchronize` delivery at or after its time on
    GitHub's clock) or when the head is no longer the one the service knew when it took the
    comment in. A same-repository PR runs its current head.
    """
    job, current = ctx.job, pull.head.sha
    if sha_prefix:
        if current.startswith(sha_prefix):
            return current, ""
        return "", f"`{sha_prefix}` is not this PR's head"
    if not is_fork(pull.raw_data):
        return current, ""
    seen, written = str(job.args.get("head_seen") or ""), str(job.args.get("comment_created_at") or "")
    with ctx.sessions() as session:
        later = jobs.pushed_after(session, job.repo, job.pr, written) if written else []
    if later:
        return "", f"a push (`{later[-1][:12]}`) reached this PR after your comment was written"
    if not seen or not written:
        return "", "this service cannot tell which commit you saw when you wrote the comment"
    if seen != current:
        return "", f"the PR's head moved from `{seen[:12]}` to `{current[:12]}` after your comment arrived"
    return current, ""


def _enqueue_from_command(
    ctx: JobContext, kind: str, pull: Any, head: str, *, suites: list[str] | None = None, granted_by: str = ""
) -> bool:
    """Queue a review (`kind` "review") or the GPU suites with a review of `head` (on a fork,
    authorising `head`). Returns whether the PR is a fork's."""
    base_args = _pull_args(ctx, pull)
    fork = bool(base_args["fork"])
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
    return fork
