"""The `actions` GPU dispatch mode: run the suites through `.github/workflows/gpu-regression.yml`.

Round trip:
1. `ActionsDispatcher.dispatch` (inside the service's `gpu` job) records the request in
   `gpu_dispatches`, POSTs a `workflow_dispatch` of the workflow on the repository's default
   branch (the workflow definition never comes from the PR) with the inputs `pr_number`,
   `head_sha` (exact), `suites` (the named ones, else `gpu`: every suite asking for a GPU) and
   `request_id`, sets `reviewbot/gpu-regression` to pending, and parks a deadline job (below).
   It returns None: the outcome arrives later.
2. The workflow puts ``req-<request_id>`` in its run name. The `workflow_run` `completed` webhook
   (`on_workflow_run`, inside the delivery's transaction, no API calls) finds the request by that
   name and queues a `gpu-actions-result` job.
3. `run_result_job` downloads the run's `gpu-regression-results` artifact, reads `results.json`
   (checked against the requested SHA and request id), and publishes it through the service's
   `publish_gpu_outcome`: the summary's GPU section and the `reviewbot/gpu-regression` status.
   A run without usable results (cancelled, failed before uploading, artifact missing or invalid)
   publishes an `error` saying so.
4. A dispatched run that never completes: the deadline job fires `gpu_timeout_seconds` after the
   dispatch and, if no result arrived, publishes an `error` status "no result within ...".
   It is parked as a `running` job whose lease ends at the deadline under the pseudo-worker
   `DEADLINE_WORKER`; the worker's expired-lease path claims it then, so the deadline survives
   restarts without a scheduler. The `workflow_run` webhook releases it early (lease 0): it then
   finds the request completed and ends without posting.
A newer dispatch for the same PR, or a newer head, supersedes a request: its result and its
deadline post nothing.
"""

from __future__ import annotations

import functools
import logging
import re
import time
import uuid
from typing import Any

import github
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from reviewbot.gpu_dispatch import store
from reviewbot.gpu_dispatch.artifacts import ArtifactError, fetch_results
from reviewbot.gpu_dispatch.outcome import error_outcome, outcome_from_results
from reviewbot.service import jobs, posting
from reviewbot.service.db import Job, make_sessionmaker
from reviewbot.service.github_api import GitHub, GitHubFailed, OutcomeUnknown, app_integration
from reviewbot.service.gpu_dispatch import GpuOutcome, GpuRequest, register_dispatcher
from reviewbot.service.job_context import JobContext, Stopped
from reviewbot.service.job_handlers import publish_gpu_outcome
from reviewbot.service.registry import register_event, register_job
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)

WORKFLOW_FILE = "gpu-regression.yml"
RESULT_JOB = "gpu-actions-result"
DEADLINE_JOB = "gpu-actions-deadline"
DEADLINE_WORKER = "gpu-actions-deadline"
REQUEST_IN_RUN_NAME = re.compile(r"\breq-([A-Za-z0-9_.-]{1,64})(?:\s|$)")


@functools.cache
def _sessions(database_url: str) -> sessionmaker:
    return make_sessionmaker(database_url)


def _installation_id(settings: Settings, full_name: str) -> int | None:
    """The App installation on `full_name` (None when authenticating with a plain token)."""
    if not settings.app_auth:
        return None
    integration = app_integration(settings)
    owner, name = full_name.split("/")
    try:
        return integration.get_repo_installation(owner, name).id
    except github.GithubException as exc:
        raise GitHubFailed("get_repo_installation", exc.status, exc.data) from exc


def request_id_from_run(run: dict[str, Any]) -> str | None:
    """The request id the workflow put in its run name (`display_title`), or None (e.g. a push run)."""
    for field in ("display_title", "name"):
        match = REQUEST_IN_RUN_NAME.search(str(run.get(field) or ""))
        if match:
            return match.group(1)
    return None


def _park_deadline_job(session: Session, record: store.GpuDispatch, installation_id: int | None) -> None:
    session.add(
        Job(
            kind=DEADLINE_JOB,
            repo=record.repo,
            pr=record.pr,
            head_sha=record.head_sha,
            args={"request_id": record.request_id, "installation_id": installation_id},
            state="running",
            worker_id=DEADLINE_WORKER,
            lease_until=record.deadline,
        )
    )


def _release_deadline_job(session: Session, record: store.GpuDispatch) -> None:
    """Let the parked deadline job run now: it finds the request completed and ends quietly."""
    for job in session.scalars(
        select(Job).where(
            Job.kind == DEADLINE_JOB,
            Job.repo == record.repo,
            Job.pr == record.pr,
            Job.state == "running",
            Job.worker_id == DEADLINE_WORKER,
        )
    ):
        if job.args.get("request_id") == record.request_id:
            job.lease_until = 0.0


class ActionsDispatcher:
    """`gpu_dispatch: actions`. The request id is the service's, plus a random suffix so that a
    re-run of the same job after a crash is recognised (the row exists) and never collides."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def dispatch(self, request: GpuRequest) -> GpuOutcome | None:
        sessions = _sessions(self.settings.database_url)
        with sessions.begin() as session:
            record = store.by_service_request(session, request.request_id)
            if record is not None and record.state != "dispatching":
                logger.info("GPU request %s already dispatched as %s", request.request_id, record.request_id)
                return None
            if record is None:
                record = store.GpuDispatch(
                    request_id=f"{request.request_id}-{uuid.uuid4().hex[:8]}",
                    service_request=request.request_id,
                    repo=request.repo,
                    pr=request.pr,
                    head_sha=request.head_sha,
                    suites=",".join(request.suites) or "gpu",
                    state="dispatching",
                    dispatched_at=time.time(),
                    deadline=time.time() + self.settings.gpu_timeout_seconds,
                )
                session.add(record)
            request_id, suites = record.request_id, record.suites
        installation_id = _installation_id(self.settings, request.repo)
        gh = GitHub(self.settings, installation_id)
        repo = gh.call("get_repo", lambda: gh.client.get_repo(request.repo))
        inputs = {
            "pr_number": str(request.pr),
            "head_sha": request.head_sha,
            "suites": suites,
            "request_id": request_id,
        }
        try:
            workflow = gh.call("get_workflow", lambda: repo.get_workflow(WORKFLOW_FILE))
        except GitHubFailed as exc:
            return self._refused(request_id, repo.default_branch, exc)
        try:
            gh.call(
                "workflow_dispatch",
                lambda: workflow.create_dispatch(repo.default_branch, inputs, throw=True),
                idempotent=False,
            )
        except OutcomeUnknown:
            logger.warning("GPU request %s: dispatch outcome unknown; the deadline reports if no run comes", request_id)
        except GitHubFailed as exc:
            return self._refused(request_id, repo.default_branch, exc)
        with sessions.begin() as session:
            record = session.get(store.GpuDispatch, request_id)
            assert record is not None
            record.state = "dispatched"
            _park_deadline_job(session, record, installation_id)
        logger.info(
            "GPU request %s: dispatched %s for %s#%d at %s", request_id, WORKFLOW_FILE, request.repo, request.pr,
            request.head_sha[:12],
        )  # fmt: skip
        posting.set_status(
            gh, repo, request.head_sha, posting.GPU_CONTEXT, "pending", f"dispatched to GitHub Actions ({request_id})"
        )
        return None

    def _refused(self, request_id: str, ref: str, exc: GitHubFailed) -> GpuOutcome:
        with _sessions(self.settings.database_url).begin() as session:
            record = session.get(store.GpuDispatch, request_id)
            assert record is not None, request_id
            record.state, record.note = "completed", f"dispatch refused: {exc}"
        return error_outcome(
            f"Could not dispatch `{WORKFLOW_FILE}` on `{ref}`: GitHub answered {exc.status} {exc.data}. "
            "Is the workflow on the default branch, with these inputs?"
        )


# What `on_workflow_run` reads; the webhook refuses (400) a payload that lacks one or has it of
# another type, naming the field (`events.validate`)
WORKFLOW_RUN_FIELDS = (
    (("action",), "action", True),
    (("repository", "full_name"), "repo", True),
    (("workflow_run",), "object", True),
    (("workflow_run", "id"), "int", True),
    (("workflow_run", "path"), "str", False),
    (("workflow_run", "display_title"), "str", False),
    (("workflow_run", "name"), "str", False),
    (("workflow_run", "html_url"), "str", False),
    (("workflow_run", "conclusion"), "str", False),
)


def on_workflow_run(session: Session, delivery_id: str, payload: dict[str, Any], settings: Settings) -> str:
    """`workflow_run` webhook: queue the result job of a completed run the bot dispatched (the
    payload passed `events.validate` with `WORKFLOW_RUN_FIELDS`)."""
    action = payload["action"]
    run = payload["workflow_run"]
    full_name = payload["repository"]["full_name"]
    if action != "completed":
        return f"ignored-{action}"
    if not str(run.get("path", "")).endswith(f"/{WORKFLOW_FILE}"):
        return "ignored-other-workflow"
    request_id = request_id_from_run(run)
    if request_id is None:
        return "ignored-not-dispatched-by-bot"
    record = store.get(session, request_id)
    if record is None or record.repo != full_name:
        logger.warning("workflow_run %s names unknown request %s", run["id"], request_id)
        return "ignored-unknown-request"
    record.run_id, record.run_url, record.conclusion = (
        int(run["id"]),
        str(run.get("html_url", "")),
        str(run.get("conclusion") or ""),
    )
    if record.state in ("dispatching", "dispatched", "timed-out"):
        record.state = "completed"
    _release_deadline_job(session, record)
    jobs.enqueue(
        session,
        RESULT_JOB,
        record.repo,
        record.pr,
        record.head_sha,
        args={"request_id": request_id, "run_id": record.run_id},
        delivery_id=delivery_id,
    )
    return "queued"


def _current_pull(ctx: JobContext, gh: GitHub) -> tuple[Any, Any]:
    """Repo and PR, or `Stopped` when the PR closed or moved past the request's head."""
    repo = gh.client.get_repo(ctx.job.repo, lazy=True)
    pull = gh.call("get_pull", lambda: repo.get_pull(ctx.job.pr))
    if pull.state != "open":
        raise Stopped("closed")
    if pull.head.sha != ctx.job.head_sha:
        raise Stopped("superseded")
    return repo, pull


def _superseded(ctx: JobContext, request_id: str) -> bool:
    with ctx.sessions.begin() as session:
        record = store.get(session, request_id)
        assert record is not None, request_id
        if store.newer_dispatch_exists(session, record):
            record.state = "superseded"
            return True
    return False


def run_result_job(ctx: JobContext) -> str:
    request_id, run_id = ctx.job.args["request_id"], int(ctx.job.args["run_id"])
    if _superseded(ctx, request_id):
        logger.info("GPU request %s superseded by a newer dispatch: result of run %d not posted", request_id, run_id)
        return "superseded"
    gh = ctx.github()
    repo, pull = _current_pull(ctx, gh)
    with ctx.sessions() as session:
        record = store.get(session, request_id)
        assert record is not None, request_id
        run_url, conclusion = record.run_url, record.conclusion
    source = f"GitHub Actions run [{run_id}]({run_url})" if run_url else f"GitHub Actions run {run_id}"
    try:
        results = fetch_results(gh, repo, run_id)
        if results.revision != ctx.job.head_sha or results.request_id != request_id:
            raise ArtifactError(
                f"results.json is for revision {results.revision[:12]} / request {results.request_id}, "
                f"not {ctx.job.head_sha[:12]} / {request_id}"
            )
        outcome = outcome_from_results(results, source)
    except ArtifactError as exc:
        logger.warning("GPU request %s: run %d has no usable results: %s", request_id, run_id, exc)
        outcome = error_outcome(f"{source} concluded `{conclusion or 'unknown'}` without usable results: {exc}.")
    publish_gpu_outcome(ctx, gh, repo, pull, outcome)
    return "done"


def run_deadline_job(ctx: JobContext) -> str:
    request_id = ctx.job.args["request_id"]
    with ctx.sessions.begin() as session:
        record = store.get(session, request_id)
        assert record is not None, request_id
        if record.state not in ("dispatching", "dispatched"):
            return "done"
    if _superseded(ctx, request_id):
        return "superseded"
    gh = ctx.github()
    repo, pull = _current_pull(ctx, gh)
    with ctx.sessions.begin() as session:
        record = store.get(session, request_id)
        assert record is not None, request_id
        if record.state not in ("dispatching", "dispatched"):
            return "done"
        record.state = "timed-out"
        waited = time.time() - record.dispatched_at
    logger.warning("GPU request %s: no workflow result %.0fs after dispatch", request_id, waited)
    publish_gpu_outcome(
        ctx,
        gh,
        repo,
        pull,
        error_outcome(
            f"No result from `{WORKFLOW_FILE}` {waited:.0f}s after it was dispatched (request `{request_id}`, "
            f"limit {ctx.settings.gpu_timeout_seconds:.0f}s): no self-hosted GPU runner took the run, or it "
            "ended without reporting. Check the repository's Actions tab; `/rerun-gpu` dispatches again."
        ),
    )
    return "done"


register_dispatcher("actions", ActionsDispatcher)
register_event("workflow_run", WORKFLOW_RUN_FIELDS)(on_workflow_run)
# The result job writes the PR's summary: it takes turns with the PR's other summary writers. The
# deadline job is parked as running for hours, so it must not hold the PR (see register_job).
register_job(RESULT_JOB, pr_exclusive=True)(run_result_job)
register_job(DEADLINE_JOB)(run_deadline_job)
