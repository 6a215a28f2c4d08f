"""Turning a verified, parsed delivery into jobs, inside the transaction that stores it.

Nothing here calls GitHub: the webhook answer must stay fast. Work that needs the API (the
permission check of a slash command, reactions, replies) is itself a job.
`EVENT_HANDLERS` maps `X-GitHub-Event` to a handler; the GPU `actions` dispatch mode adds its
`workflow_run` handler with `register_event`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy.orm import Session

from reviewbot import logger
from reviewbot.service import commands, jobs
from reviewbot.service.settings import Settings


class BadPayload(ValueError):
    """The payload lacks what its event needs; the message is the 400 reason."""


EventHandler = Callable[[Session, str, dict[str, Any], Settings], str]
EVENT_HANDLERS: dict[str, EventHandler] = {}
REVIEW_ACTIONS = ("opened", "reopened", "ready_for_review", "synchronize")


def register_event(name: str) -> Callable[[EventHandler], EventHandler]:
    def add(handler: EventHandler) -> EventHandler:
        EVENT_HANDLERS[name] = handler
        return handler

    return add


def require(payload: dict[str, Any], *path: str) -> Any:
    value: Any = payload
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value or value[key] is None:
            raise BadPayload(f"payload lacks {'.'.join(path[: depth + 1])}")
        value = value[key]
    return value


def is_fork(pull: dict[str, Any]) -> bool:
    head_repo = pull["head"].get("repo")
    if head_repo is None:  # the fork was deleted
        return True
    return bool(head_repo.get("fork")) or head_repo.get("full_name") != pull["base"]["repo"]["full_name"]


def validate(event: str, payload: dict[str, Any]) -> None:
    """Raise `BadPayload` naming the first missing field an event's handler needs."""
    if event == "pull_request":
        for path in (
            ("action",),
            ("number",),
            ("repository", "full_name"),
            ("pull_request", "head", "sha"),
            ("pull_request", "base", "sha"),
            ("pull_request", "base", "repo", "full_name"),
        ):
            require(payload, *path)
        require(payload, "pull_request", "head")
    elif event == "issue_comment":
        for path in (
            ("action",),
            ("repository", "full_name"),
            ("issue", "number"),
            ("comment", "id"),
            ("comment", "body"),
            ("comment", "user", "login"),
        ):
            require(payload, *path)


@register_event("pull_request")
def on_pull_request(session: Session, delivery_id: str, payload: dict[str, Any], settings: Settings) -> str:
    action = payload["action"]
    repo = payload["repository"]["full_name"]
    pull = payload["pull_request"]
    number = int(payload["number"])
    head = pull["head"]["sha"]
    if action == "closed":
        stopped = jobs.stop_pr_jobs(session, repo, number, "closed")
        return f"cancelled {stopped}"
    if action not in REVIEW_ACTIONS:
        return "ignored"
    jobs.stop_pr_jobs(session, repo, number, "superseded", keep_head=head)
    if pull.get("draft"):
        logger.info("%s#%d is a draft: review waits for ready_for_review", repo, number)
        return "draft"
    fork = is_fork(pull)
    args = {
        "base_sha": pull["base"]["sha"],
        "fork": fork,
        "body": pull.get("body") or "",
        "clone_url": pull["base"]["repo"].get("clone_url", ""),
        "base_ref": pull["base"].get("ref", ""),
    }
    if action == "synchronize":  # when the push happened (GitHub's clock): `/rerun-gpu` compares it
        args["pushed_at"] = str(pull.get("updated_at") or "")
    jobs.enqueue(session, "review", repo, number, head, args=args, delivery_id=delivery_id)
    if settings.auto_gpu:
        if fork:
            logger.info("%s#%d is a fork PR: GPU suites wait for a maintainer's /rerun-gpu", repo, number)
        else:
            jobs.enqueue(
                session,
                "gpu",
                repo,
                number,
                head,
                args={**args, "suites": list(settings.gpu_suites)},
                delivery_id=delivery_id,
            )
    return "queued"


@register_event("issue_comment")
def on_issue_comment(session: Session, delivery_id: str, payload: dict[str, Any], settings: Settings) -> str:
    if payload["action"] != "created":
        return "ignored-" + payload["action"]
    if not payload["issue"].get("pull_request"):
        return "ignored-not-pr"
    comment = payload["comment"]
    parsed = commands.parse(comment["body"])
    if not parsed:
        return "ignored-no-command"
    login = comment["user"]["login"]
    if settings.bot_login and login == settings.bot_login:
        return "ignored-own"
    repo = payload["repository"]["full_name"]
    number = int(payload["issue"]["number"])
    jobs.enqueue(
        session,
        "command",
        repo,
        number,
        args={
            "comment_id": comment["id"],
            "author": login,
            "author_type": comment["user"].get("type", ""),
            "body": comment["body"],
            # What the author saw: when the comment was written (GitHub's clock) and the PR head
            # this service knew when it ingested the comment. `/rerun-gpu` authorises no other head.
            "comment_created_at": str(comment.get("created_at") or ""),
            "head_seen": jobs.latest_head(session, repo, number),
        },
        delivery_id=delivery_id,
    )
    return "queued"
