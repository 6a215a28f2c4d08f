"""Turning a verified, parsed delivery into jobs, inside the ingest transaction that marks it processed.

Nothing here calls GitHub: the webhook answer must stay fast. Work that needs the API (the
permission check of a slash command, reactions, replies) is itself a job.
Importing this module registers the `pull_request` and `issue_comment` handlers in
`registry.EVENTS`; the GPU `actions` dispatch mode adds its `workflow_run` handler the same way.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from sqlalchemy.orm import Session

from reviewbot.service import commands, jobs
from reviewbot.service.registry import EVENT_FIELDS, EVENTS, EventHandler, FieldSpec, register_event
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)


class BadPayload(ValueError):
    """The payload lacks what its event needs; the message is the 400 reason."""


REVIEW_ACTIONS = ("opened", "reopened", "ready_for_review", "synchronize")


def handler_for(event: str) -> EventHandler | None:
    """The handler of `X-GitHub-Event: event`: a built-in one of this module or a plug-in's."""
    return EVENTS.get(event)


_MAX_INT = 2**63 - 1
_FORMATS: dict[str, tuple[re.Pattern[str], str]] = {
    "action": (re.compile(r"[a-z_]{1,64}"), "an action name"),
    "repo": (re.compile(r"[A-Za-z0-9_.-]{1,39}/[A-Za-z0-9_.-]{1,100}"), "an owner/name repository"),
    "sha": (re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?"), "a commit SHA"),
    "login": (re.compile(r"[A-Za-z0-9-]{1,39}(?:\[bot\])?"), "a GitHub login"),
    # GitHub's webhook timestamps; `/rerun-gpu` compares them as strings (`jobs.pushed_after`)
    "time": (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"), "a UTC time such as 2026-01-31T12:00:00Z"),
}


def require(payload: dict[str, Any], *path: str) -> Any:
    value: Any = payload
    for depth, key in enumerate(path):
        if not isinstance(value, dict) or key not in value or value[key] is None:
            raise BadPayload(f"payload lacks {'.'.join(path[: depth + 1])}")
        value = value[key]
    return value


def _optional(payload: dict[str, Any], *path: str) -> Any:
    """The value at `path`, or None where a level is missing or null (a non-object level is refused)."""
    value: Any = payload
    for depth, key in enumerate(path):
        if value is None:
            return None
        if not isinstance(value, dict):
            raise BadPayload(f"payload field {'.'.join(path[:depth])} must be an object")
        value = value.get(key)
    return value


def _check(value: Any, kind: str, path: tuple[str, ...]) -> None:
    """`kind`: object, bool, str, int (1 .. 2**63-1), pr (a PR number, 1 .. 2**31-1), or a `_FORMATS` key."""
    name = ".".join(path)
    if kind == "object":
        ok, what = isinstance(value, dict), "an object"
    elif kind == "bool":
        ok, what = isinstance(value, bool), "a boolean"
    elif kind == "str":
        ok, what = isinstance(value, str), "a string"
    elif kind in ("int", "pr"):
        top = 2**31 - 1 if kind == "pr" else _MAX_INT
        ok, what = (
            isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= top,
            f"an integer in 1..{top}",
        )
    else:
        pattern, what = _FORMATS[kind]
        ok = isinstance(value, str) and pattern.fullmatch(value) is not None
    if not ok:
        raise BadPayload(f"payload field {name} must be {what}, not {_describe(value)}")


def _describe(value: Any) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("..." if len(value) > 40 else "")
    return {dict: "an object", list: "an array", bool: "a boolean"}.get(type(value), type(value).__name__)


def is_fork(pull: dict[str, Any]) -> bool:
    head_repo = pull["head"].get("repo")
    if head_repo is None:  # the fork was deleted
        return True
    return bool(head_repo.get("fork")) or head_repo.get("full_name") != pull["base"]["repo"]["full_name"]


# What each handler reads: (path, kind, required), registered with it. Everything a handler touches
# is here, so a signed payload of any other shape is refused with a 400 naming the field.
PULL_REQUEST_FIELDS: FieldSpec = (
    (("action",), "action", True),
    (("number",), "pr", True),
    (("repository", "full_name"), "repo", True),
    (("pull_request",), "object", True),
    (("pull_request", "head", "sha"), "sha", True),
    (("pull_request", "head", "repo"), "object", False),
    (("pull_request", "head", "repo", "fork"), "bool", False),
    (("pull_request", "head", "repo", "full_name"), "repo", False),
    (("pull_request", "base", "sha"), "sha", True),
    (("pull_request", "base", "repo", "full_name"), "repo", True),
    (("pull_request", "base", "repo", "clone_url"), "str", False),
    (("pull_request", "base", "ref"), "str", False),
    (("pull_request", "draft"), "bool", False),
    (("pull_request", "updated_at"), "time", False),
    (("installation",), "object", False),
    (("installation", "id"), "int", False),
)
ISSUE_COMMENT_FIELDS: FieldSpec = (
    (("action",), "action", True),
    (("repository", "full_name"), "repo", True),
    (("issue", "number"), "pr", True),
    (("issue", "pull_request"), "object", False),
    (("comment", "id"), "int", True),
    (("comment", "body"), "str", True),
    (("comment", "user", "login"), "login", True),
    (("comment", "user", "type"), "str", False),
    (("comment", "created_at"), "time", False),
    (("installation",), "object", False),
    (("installation", "id"), "int", False),
)


def validate(event: str, payload: dict[str, Any]) -> None:
    """Raise `BadPayload` naming the first field an event's handler needs that is missing or of
    the wrong type or form: the fields its handler registered (`register_event(name, fields)`, the
    built-in handlers' and a plug-in's alike; events without a handler are not checked: they are
    only recorded)."""
    for path, kind, required in EVENT_FIELDS.get(event) or ():
        value = require(payload, *path) if required else _optional(payload, *path)
        if value is not None:
            _check(value, kind, path)


@register_event("pull_request", PULL_REQUEST_FIELDS)
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
        "clone_url": pull["base"]["repo"].get("clone_url", ""),
        "base_ref": pull["base"].get("ref", ""),
    }
    if action == "synchronize":  # when the push happened (GitHub's clock): `/rerun-gpu` compares it
        args["pushed_at"] = str(pull.get("updated_at") or "")
    queued = _queue_for_delivery(session, action, "review", repo, number, head, args, delivery_id)
    if settings.auto_gpu:
        if fork:
            logger.info("%s#%d is a fork PR: GPU suites wait for a maintainer's /rerun-gpu", repo, number)
        else:
            gpu_args = {**args, "suites": list(settings.gpu_suites)}
            queued |= _queue_for_delivery(session, action, "gpu", repo, number, head, gpu_args, delivery_id)
    return "queued" if queued else "covered"


def _queue_for_delivery(
    session: Session,
    action: str,
    kind: str,
    repo: str,
    number: int,
    head: str,
    args: dict[str, Any],
    delivery_id: str,
) -> bool:
    """Queue a `kind` job of `head` for this delivery; returns whether it did. A push's
    `synchronize` may arrive after a job of the older head already saw the new head on GitHub and
    queued its job (`job_handlers`): that job, queued without a delivery, becomes this delivery's
    instead of a second one (which would post a second review of the same head)."""
    if action == "synchronize":
        covering = jobs.job_for_head(session, repo, number, kind, head)
        if covering is not None and covering.delivery_id is None:
            covering.delivery_id = delivery_id
            covering.args = {**covering.args, "pushed_at": args["pushed_at"]}
            logger.info(
                "%s#%d: the %s job of %s queued before its push's delivery is that delivery's",
                repo,
                number,
                kind,
                head[:12],
            )
            return False
    jobs.enqueue(session, kind, repo, number, head, args=args, delivery_id=delivery_id)
    return True


@register_event("issue_comment", ISSUE_COMMENT_FIELDS)
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
