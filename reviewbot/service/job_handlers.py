"""The service's job kinds: `review` (the static review of a head, with the key probe and suites
where its code may run), `gpu` (the GPU suites through the configured dispatch mode) and
`command` (a maintainer's slash command). Each handler gets a `JobContext`, calls
`ctx.checkpoint()` before every write to GitHub (a superseded job stops there and posts nothing),
and returns the job's final state. A job that finds the PR's head moved on makes sure the current
head has a review queued before it stops, so whatever order GitHub delivers pushes in, the current
head ends reviewed.

Importing this module registers the kinds (`registry.register_job`; the worker imports it);
`review` and `gpu` write the PR's summary, so they are registered `pr_exclusive`. What the
handlers keep in the database goes through `store.py` and the queue (`jobs.py`): no SQL here.
`publish_gpu_outcome` is also what the `actions` dispatch mode calls when its run completes, and
`give_up` what the worker's error boundary calls when a job fails for good.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from pathlib import Path
from typing import Any

from reviewbot import sandbox, validation
from reviewbot.repo_config import CONFIG_FILE, ConfigError, parse_config
from reviewbot.results.run import SUITE_GROUPS
from reviewbot.service import commands, jobs, posting, store
from reviewbot.service.checkout import checkout
from reviewbot.service.db import ReviewRecord
from reviewbot.service.events import is_fork
from reviewbot.service.github_api import GitHub, GitHubFailed
from reviewbot.service.gpu_dispatch import GpuOutcome, GpuRequest, make_dispatcher
from reviewbot.service.job_context import JobContext, JobEnd, Stopped
from reviewbot.service.registry import register_job
from reviewbot.service.review_call import review

logger = logging.getLogger(__name__)


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
            if not jobs.has_job_for_head(session, job.repo, job.pr, kind, head):
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


def give_up(ctx: JobContext, reason: str, error: str) -> JobEnd:
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
    return store.is_authorised(ctx.sessions, ctx.job.repo, ctx.job.pr, sha)


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
    return store.review_record(ctx.sessions, ctx.job.repo, ctx.job.pr)


def _save_record(ctx: JobContext, **fields: Any) -> None:
    store.save_review_record(ctx.sessions, ctx.job.repo, ctx.job.pr, **fields)


def summary_body(head_sha: str, static_section: str, gpu_section: str) -> str:
    parts = [posting.SUMMARY_MARKER, f"## reviewbot: review of `{head_sha[:12]}`", static_section.strip()]
    if gpu_section:
        parts += ["### GPU regression suites", gpu_section.strip()]
    return posting.fit("\n\n".join(part for part in parts if part) + "\n")


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


@register_job("review", pr_exclusive=True)
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
    with _checkout(ctx, gh, pull) as path, sandbox.time_budget(ctx.settings.review_timeout_seconds):
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


@register_job("gpu", pr_exclusive=True)
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
    store.add_suite_runs(ctx.sessions, job, outcome.suites)
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
    try:
        comment = gh.call("get_comment", lambda: issue.get_comment(args["comment_id"]), expected=(404,))
    except GitHubFailed as exc:
        if exc.status != 404:
            raise
        # deleted before the bot read it: its author took the commands back, so none of them runs
        logger.info("job %d: comment %s was deleted before it was handled: ignored", job.id, args["comment_id"])
        return "done"
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
            unknown = _suites_refusal(gh, repo, head, target.suites)
            if unknown:
                logger.info("job %d: /rerun-gpu by %s refused: %s", job.id, args["author"], unknown)
                posting.reply_once(gh, issue, key, f"@{args['author']} the GPU suites did not run: {unknown}.")
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


def _suites_refusal(gh: GitHub, repo: Any, head: str, suites: tuple[str, ...]) -> str:
    """'' when the `.reviewbot.yml` at `head` configures every suite of `suites` (or `suites` is
    empty or one of the runner's group names, `all`, `gpu`, `cpu`), else why not, naming the suites it
    has. Read through the contents API (one request, no checkout), so a misspelt suite is refused in
    the command's reply instead of failing the GPU run later."""
    if not suites or (len(suites) == 1 and suites[0] in SUITE_GROUPS):
        return ""
    try:
        found = gh.call("get_config", lambda: repo.get_contents(CONFIG_FILE, ref=head), expected=(404,))
    except GitHubFailed as exc:
        if exc.status != 404:
            raise
        found = None  # no configuration at the head: no suites
    where = f"`{CONFIG_FILE}` at `{head[:12]}`"
    configured: dict[str, Any] = {}
    if found is not None and not isinstance(found, list):  # a list: a directory of that name
        try:
            configured = parse_config(validation.decode_utf8(found.decoded_content)).suites
        except ValueError as exc:  # ConfigError, or not UTF-8
            return f"{where} is not valid: {exc}"
    unknown = [name for name in suites if name not in configured]
    if not unknown:
        return ""
    has = ", ".join(f"`{name}`" for name in configured) or "none"
    return f"{where} has no suite {', '.join(f'`{name}`' for name in unknown)} (its suites: {has})"


def _head_to_run(ctx: JobContext, pull: Any, sha_prefix: str) -> tuple[str, str]:
    """The head `/rerun-gpu` runs: (sha, '') or ('', why not).

    `/rerun-gpu <sha>` names it: a prefix (7+ hex digits) of the PR's current head; on a fork PR,
    not a head pushed after the comment was written (a prefix that short can be matched by a
    commit made for it), and, for a prefix shorter than the SHA, not a head whose push no stored
    `pull_request` delivery named yet (its time is unknown: it may be such a commit, pushed after
    the comment, whose delivery has not arrived). Without one, on a fork PR, the comment authorises the head its author
    saw: refused when a push arrived after the comment was written (a recorded `synchronize`
    delivery at or after its time on GitHub's clock) or when the head is no longer the one the
    service knew when it took the comment in. A same-repository PR runs its current head.
    """
    job, current = ctx.job, pull.head.sha
    if sha_prefix and not current.startswith(sha_prefix):
        return "", f"`{sha_prefix}` is not this PR's head"
    if not is_fork(pull.raw_data):
        return current, ""
    seen, written = str(job.args.get("head_seen") or ""), str(job.args.get("comment_created_at") or "")
    with ctx.sessions() as session:
        later = jobs.pushed_after(session, job.repo, job.pr, written) if written else []
        short = bool(sha_prefix) and len(sha_prefix) < len(current) and current != seen
        undelivered = short and current not in jobs.delivered_heads(session, job.repo, job.pr)
    if sha_prefix:
        if current in later:
            return "", f"`{current[:12]}`, which `{sha_prefix}` names, was pushed after your comment was written"
        if undelivered:
            return "", (
                f"the push of `{current[:12]}` has not reached this service yet, so it cannot tell whether it came "
                f"after your comment; try again in a minute, or name the whole SHA (`/rerun-gpu {current}`)"
            )
        return current, ""
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
            if store.authorise(session, ctx.job.repo, ctx.job.pr, head, granted_by):
                logger.info("%s#%d: %s authorised fork head %s", ctx.job.repo, ctx.job.pr, granted_by, head[:12])
            jobs.enqueue(session, "review", ctx.job.repo, ctx.job.pr, head, args=base_args)
        if kind == "gpu":
            jobs.enqueue(session, "gpu", ctx.job.repo, ctx.job.pr, head, args={**base_args, "suites": suites or []})
        else:
            jobs.enqueue(session, "review", ctx.job.repo, ctx.job.pr, head, args=base_args)
    return fork
