"""Webhook deliveries built from the shared GitHub payload examples (`shared/fixtures/github-webhooks/`,
copied verbatim into `payloads/`).

`load_payload` reads one published example and rewrites its api.github.com URLs to the fake
server's origin; the `*_event` builders adapt an example to a test's repository and pull request
(the examples are about `Codertocat/Hello-World`), and `sign` computes `X-Hub-Signature-256`.
"""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import time
import uuid
from pathlib import Path
from typing import Any

from tests.reviewbot.fake_github.state import API_ORIGIN

# A verbatim copy of shared/fixtures/github-webhooks (octokit/webhooks examples, MIT licence, see
# payloads/LICENSE.octokit-webhooks), so the tests also run where only the repository is checked
# out (CI); test_fake_github checks the copy against the shared original where that exists.
FIXTURES_DIR = Path(__file__).resolve().parent / "payloads"


def load_payload(event: str, name: str, origin: str | None = None) -> dict[str, Any]:
    """The example `FIXTURES_DIR/event/name.json` (name without `.json`), URLs pointed at `origin`."""
    text = (FIXTURES_DIR / event / f"{name}.json").read_text()
    if origin is not None:
        text = text.replace(API_ORIGIN, origin)
    return json.loads(text)


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_headers(event: str, body: bytes, secret: str | None, delivery: str | None = None) -> dict[str, str]:
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
        "User-Agent": "GitHub-Hookshot/test",
    }
    if secret is not None:
        headers["X-Hub-Signature-256"] = sign(secret, body)
    return headers


def _retarget_repo(repo: dict[str, Any], pulled: dict[str, Any]) -> None:
    for key in ("id", "name", "full_name", "fork", "clone_url", "url", "html_url", "default_branch"):
        if key in pulled:
            repo[key] = pulled[key]
    repo["owner"] = dict(repo["owner"], login=pulled["owner"]["login"])


def github_time(at: float | None = None) -> str:
    """A timestamp as GitHub writes them (UTC, seconds): `at` (UNIX seconds) or now."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if at is None else at))


def pull_request_event(
    action: str,
    pull: dict[str, Any],
    origin: str,
    *,
    installation_id: int | None = None,
    sender: str | None = None,
    updated_at: str | None = None,
) -> dict[str, Any]:
    """A `pull_request` delivery for `pull` (a fake-state pull), based on the published examples;
    `pull_request.updated_at` is `updated_at`, default now (for `synchronize`: when the push happened)."""
    example = {
        "opened": "opened.payload",
        "reopened": "reopened.payload",
        "synchronize": "synchronize.payload",
        "closed": "closed.payload",
        "ready_for_review": "ready_for_review.with-installation.payload",
        "converted_to_draft": "converted_to_draft.with-installation.payload",
    }.get(action, "labeled.payload")
    payload = load_payload("pull_request", example, origin)
    payload["action"] = action
    payload["number"] = pull["number"]
    pr = payload["pull_request"]
    for key in (
        "number",
        "url",
        "html_url",
        "issue_url",
        "comments_url",
        "review_comments_url",
        "statuses_url",
        "title",
        "body",
        "draft",
        "state",
        "id",
    ):
        pr[key] = copy.deepcopy(pull[key])
    pr["user"] = dict(pr["user"], login=pull["user"]["login"])
    pr["updated_at"] = updated_at or github_time()
    for side in ("head", "base"):
        pr[side]["sha"] = pull[side]["sha"]
        pr[side]["ref"] = pull[side]["ref"]
        pr[side]["label"] = pull[side]["label"]
        _retarget_repo(pr[side]["repo"], pull[side]["repo"])
    _retarget_repo(payload["repository"], pull["base"]["repo"])
    if sender is not None:
        payload["sender"] = dict(payload["sender"], login=sender)
    if installation_id is not None:
        payload["installation"] = {"id": installation_id, "node_id": "x"}
    return json.loads(json.dumps(payload).replace(API_ORIGIN, origin))


def issue_comment_event(
    pull: dict[str, Any],
    body: str,
    author: str,
    origin: str,
    *,
    action: str = "created",
    comment_id: int = 1,
    author_type: str = "User",
    created_at: str | None = None,
) -> dict[str, Any]:
    """An `issue_comment` delivery on `pull`'s conversation: the published example plus
    `issue.pull_request`; the comment was written at `created_at`, default now."""
    payload = load_payload("issue_comment", "edited.payload" if action == "edited" else "created.payload", origin)
    payload["action"] = action
    issue = payload["issue"]
    issue["number"] = pull["number"]
    issue["url"] = pull["issue_url"]
    issue["html_url"] = pull["html_url"]
    issue["pull_request"] = {
        "url": pull["url"],
        "html_url": pull["html_url"],
        "diff_url": pull["html_url"] + ".diff",
        "patch_url": pull["html_url"] + ".patch",
    }
    comment = payload["comment"]
    comment["id"] = comment_id
    comment["body"] = body
    comment["created_at"] = comment["updated_at"] = created_at or github_time()
    comment["user"] = dict(comment["user"], login=author, type=author_type)
    comment["url"] = f"{API_ORIGIN}/repos/{pull['base']['repo']['full_name']}/issues/comments/{comment_id}"
    payload["sender"] = dict(payload["sender"], login=author, type=author_type)
    _retarget_repo(payload["repository"], pull["base"]["repo"])
    return json.loads(json.dumps(payload).replace(API_ORIGIN, origin))
