"""Issue comments (the PR conversation), their reactions, and the PR's labels."""

from __future__ import annotations

import urllib.parse
from typing import Any

from tests.reviewbot.fake_github.router import Request, Response, route
from tests.reviewbot.fake_github.routes.common import body_too_long, not_found, repo_name, requester, unprocessable

REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


@route("GET", "/repos/{owner}/{repo}/issues/{number}")
def get_issue(request: Request) -> Response | dict[str, Any]:
    name = repo_name(request)
    pull = request.state.pulls.get((name, int(request.params["number"])))
    if pull is None:
        return not_found()
    return {
        "number": pull["number"],
        "title": pull["title"],
        "body": pull["body"],
        "state": pull["state"],
        "user": pull["user"],
        "url": pull["issue_url"],
        "comments_url": pull["comments_url"],
        "html_url": pull["html_url"],
        "labels": pull["labels"],
        "pull_request": {"url": pull["url"], "html_url": pull["html_url"]},
    }


@route("GET", "/repos/{owner}/{repo}/issues/{number}/labels")
def list_labels(request: Request) -> Response | list[dict[str, Any]]:
    pull = request.state.pulls.get((repo_name(request), int(request.params["number"])))
    return not_found() if pull is None else pull["labels"]


@route("POST", "/repos/{owner}/{repo}/issues/{number}/labels")
def add_labels(request: Request) -> Response | list[dict[str, Any]]:
    """GitHub creates a label the repository lacks; adding one the issue has changes nothing."""
    name = repo_name(request)
    pull = request.state.pulls.get((name, int(request.params["number"])))
    if pull is None:
        return not_found()
    data = request.json()
    wanted = data.get("labels", []) if isinstance(data, dict) else data
    for label in wanted:
        if label not in {existing["name"] for existing in pull["labels"]}:
            pull["labels"].append(
                {
                    "id": request.state.next_id(),
                    "name": label,
                    "color": "ededed",
                    "default": False,
                    "description": None,
                    "url": f"https://api.github.com/repos/{name}/labels/{urllib.parse.quote(label)}",
                }
            )
    return pull["labels"]


@route("DELETE", "/repos/{owner}/{repo}/issues/{number}/labels/{label}")
def remove_label(request: Request) -> Response | list[dict[str, Any]]:
    pull = request.state.pulls.get((repo_name(request), int(request.params["number"])))
    label = urllib.parse.unquote(request.params["label"])
    if pull is None or label not in {existing["name"] for existing in pull["labels"]}:
        return not_found()
    pull["labels"] = [existing for existing in pull["labels"] if existing["name"] != label]
    return pull["labels"]


@route("GET", "/repos/{owner}/{repo}/issues/{number}/comments")
def list_comments(request: Request) -> list[dict[str, Any]]:
    comments = request.state.comments_on(repo_name(request), int(request.params["number"]))
    return sorted(comments, key=lambda c: c["id"])


@route("POST", "/repos/{owner}/{repo}/issues/{number}/comments")
def create_comment(request: Request) -> Response:
    name = repo_name(request)
    number = int(request.params["number"])
    if (name, number) not in request.state.pulls:
        return not_found()
    body = request.json().get("body")
    if not body:
        return unprocessable("Validation Failed", [{"field": "body", "code": "missing_field"}])
    if refused := body_too_long(body):
        return refused
    return Response(201, add_comment(request.state, name, number, body, requester(request)))


def add_comment(state: Any, name: str, number: int, body: str, user: dict[str, Any]) -> dict[str, Any]:
    """Store an issue comment (also used by tests to seed comments written by people)."""
    comment_id = state.next_id()
    comment = {
        "id": comment_id,
        "body": body,
        "user": user,
        "url": f"https://api.github.com/repos/{name}/issues/comments/{comment_id}",
        "html_url": f"https://github.com/{name}/pull/{number}#issuecomment-{comment_id}",
        "issue_url": f"https://api.github.com/repos/{name}/issues/{number}",
        "created_at": state.now(),
        "updated_at": state.now(),
        "_repo": name,
        "_issue": number,
        "_edits": 0,
    }
    state.issue_comments[comment_id] = comment
    return comment


def _comment(request: Request) -> dict[str, Any] | None:
    comment = request.state.issue_comments.get(int(request.params["comment_id"]))
    if comment is None or comment["_repo"] != repo_name(request):
        return None
    return comment


@route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def get_comment(request: Request) -> Response | dict[str, Any]:
    return _comment(request) or not_found()


@route("PATCH", "/repos/{owner}/{repo}/issues/comments/{comment_id}")
def edit_comment(request: Request) -> Response | dict[str, Any]:
    comment = _comment(request)
    if comment is None:
        return not_found()
    if refused := body_too_long(request.json()["body"]):
        return refused
    comment["body"] = request.json()["body"]
    comment["updated_at"] = request.state.now()
    comment["_edits"] += 1
    return comment


@route("POST", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
def create_reaction(request: Request) -> Response:
    comment = _comment(request)
    if comment is None:
        return not_found()
    content = request.json().get("content")
    if content not in REACTIONS:
        return unprocessable("Validation Failed", [{"field": "content", "code": "invalid"}])
    user = requester(request)
    for reaction in request.state.reactions:
        if (
            reaction["_comment"] == comment["id"]
            and reaction["content"] == content
            and reaction["user"]["login"] == user["login"]
        ):
            return Response(200, reaction)
    reaction = {
        "id": request.state.next_id(),
        "content": content,
        "user": user,
        "created_at": request.state.now(),
        "_comment": comment["id"],
    }
    request.state.reactions.append(reaction)
    return Response(201, reaction)


@route("GET", "/repos/{owner}/{repo}/issues/comments/{comment_id}/reactions")
def list_reactions(request: Request) -> Response | list[dict[str, Any]]:
    comment = _comment(request)
    if comment is None:
        return not_found()
    return [r for r in request.state.reactions if r["_comment"] == comment["id"]]
