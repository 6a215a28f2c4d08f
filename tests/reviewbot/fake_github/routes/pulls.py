"""Pull requests, their review comments and reviews.

A pull may carry `_diff_lines` (`{path: {right-side line, ...}}`, set by the test): review comments
on other lines are then refused with 422, as GitHub refuses lines outside the diff.
"""

from __future__ import annotations

from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import body_too_long, not_found, repo_name, requester, unprocessable


def _pull(request: Request) -> dict[str, Any] | None:
    return request.state.pulls.get((repo_name(request), int(request.params["number"])))


@route("GET", "/repos/{owner}/{repo}/pulls/{number}")
def get_pull(request: Request) -> Response | dict[str, Any]:
    return _pull(request) or not_found()


@route("GET", "/repos/{owner}/{repo}/pulls/{number}/comments")
def list_review_comments(request: Request) -> Response | list[dict[str, Any]]:
    pull = _pull(request)
    if pull is None:
        return not_found()
    return request.state.review_comments_on(repo_name(request), pull["number"])


@route("GET", "/repos/{owner}/{repo}/pulls/{number}/reviews")
def list_reviews(request: Request) -> Response | list[dict[str, Any]]:
    pull = _pull(request)
    if pull is None:
        return not_found()
    name = repo_name(request)
    return [r for r in request.state.reviews.values() if r["_repo"] == name and r["_pull"] == pull["number"]]


@route("POST", "/repos/{owner}/{repo}/pulls/{number}/reviews")
def create_review(request: Request) -> Response | dict[str, Any]:
    pull = _pull(request)
    if pull is None:
        return not_found()
    state = request.state
    data = request.json()
    name = repo_name(request)
    diff_lines = pull.get("_diff_lines")
    comments = data.get("comments") or []
    if refused := body_too_long(data.get("body"), *(comment.get("body") for comment in comments)):
        return refused
    for comment in comments:
        if "line" not in comment or comment.get("side", "RIGHT") not in ("RIGHT", "LEFT"):
            return unprocessable("Unprocessable Entity", [{"message": "line and side are required"}])
        if diff_lines is not None and comment["line"] not in diff_lines.get(comment["path"], set()):
            return unprocessable(
                "Unprocessable Entity", [{"message": "Pull request review thread line must be part of the diff"}]
            )
    review_id = state.next_id()
    commit_id = data.get("commit_id") or pull["head"]["sha"]
    review = {
        "id": review_id,
        "user": requester(request),
        "body": data.get("body", ""),
        "state": {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}.get(
            data.get("event", ""), "PENDING"
        ),
        "commit_id": commit_id,
        "html_url": f"{pull['html_url']}#pullrequestreview-{review_id}",
        "pull_request_url": pull["url"],
        "submitted_at": state.now(),
        "_repo": name,
        "_pull": pull["number"],
    }
    state.reviews[review_id] = review
    for comment in comments:
        comment_id = state.next_id()
        state.review_comments[comment_id] = {
            "id": comment_id,
            "pull_request_review_id": review_id,
            "path": comment["path"],
            "line": comment["line"],
            "side": comment.get("side", "RIGHT"),
            "body": comment["body"],
            "commit_id": commit_id,
            "user": requester(request),
            "url": f"https://api.github.com/repos/{name}/pulls/comments/{comment_id}",
            "html_url": f"{pull['html_url']}#discussion_r{comment_id}",
            "pull_request_url": pull["url"],
            "created_at": state.now(),
            "updated_at": state.now(),
            "_repo": name,
            "_pull": pull["number"],
        }
    return review
