"""In-memory state of the fake GitHub: repositories, pull requests, comments, reviews, statuses.

All mutation goes through the server's single lock (handlers run one at a time), so handlers and
tests read and write plain dicts and lists. Tests seed state with the `add_*` helpers and assert
on the recorded collections and on `requests` (every request seen, in order).
"""

from __future__ import annotations

import itertools
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

API_ORIGIN = "https://api.github.com"


@dataclass
class Fault:
    """Answer the next `times` requests matching `method` and `path_regex` with `status`/`headers`
    (status None: serve normally), after sleeping `delay` seconds."""

    method: str
    path_regex: str
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: Any = None
    delay: float = 0.0
    times: int = 1
    apply_then_fail: bool = False

    def matches(self, method: str, path: str) -> bool:
        return self.times > 0 and self.method == method and re.search(self.path_regex, path) is not None


@dataclass
class Recorded:
    method: str
    path: str
    status: int
    body: bytes
    at: float = field(default_factory=time.monotonic)


def public(value: Any) -> Any:
    """`value` without the `_`-prefixed bookkeeping keys the state keeps inside objects."""
    if isinstance(value, dict):
        return {k: public(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [public(v) for v in value]
    return value


class FakeState:
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._ids = itertools.count(1000)
        self.repos: dict[str, dict[str, Any]] = {}
        self.pulls: dict[tuple[str, int], dict[str, Any]] = {}
        self.issue_comments: dict[int, dict[str, Any]] = {}
        self.review_comments: dict[int, dict[str, Any]] = {}
        self.reviews: dict[int, dict[str, Any]] = {}
        self.statuses: list[dict[str, Any]] = []
        self.check_runs: dict[int, dict[str, Any]] = {}
        self.reactions: list[dict[str, Any]] = []
        self.permissions: dict[tuple[str, str], str] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.authenticated_login = "reviewbot-test[bot]"
        self.installation_tokens: list[str] = []
        self.faults: list[Fault] = []
        self.requests: list[Recorded] = []
        self.extra: dict[str, Any] = {}

    def next_id(self) -> int:
        return next(self._ids)

    def now(self) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())

    # seeding -----------------------------------------------------------------------------------
    def user(self, login: str, type_: str = "User") -> dict[str, Any]:
        if login not in self.users:
            self.users[login] = {
                "login": login,
                "id": self.next_id(),
                "type": type_,
                "url": f"{API_ORIGIN}/users/{login}",
                "html_url": f"https://github.com/{login}",
                "site_admin": False,
            }
        return self.users[login]

    def add_repo(self, full_name: str, clone_url: str = "", default_branch: str = "main") -> dict[str, Any]:
        owner, name = full_name.split("/")
        repo = {
            "id": self.next_id(),
            "name": name,
            "full_name": full_name,
            "private": False,
            "fork": False,
            "owner": self.user(owner),
            "url": f"{API_ORIGIN}/repos/{full_name}",
            "html_url": f"https://github.com/{full_name}",
            "clone_url": clone_url or f"https://github.com/{full_name}.git",
            "default_branch": default_branch,
        }
        self.repos[full_name] = repo
        return repo

    def add_pull(
        self,
        full_name: str,
        number: int,
        head_sha: str,
        base_sha: str,
        *,
        head_repo: str | None = None,
        author: str = "contributor",
        draft: bool = False,
        body: str = "",
        head_ref: str = "feature",
    ) -> dict[str, Any]:
        repo = self.repos[full_name]
        head_full = head_repo or full_name
        head = self.repos.get(head_full) or self.add_repo(head_full)
        url = f"{API_ORIGIN}/repos/{full_name}/pulls/{number}"
        pull = {
            "url": url,
            "id": self.next_id(),
            "number": number,
            "state": "open",
            "title": f"PR {number}",
            "body": body,
            "draft": draft,
            "user": self.user(author),
            "html_url": f"https://github.com/{full_name}/pull/{number}",
            "issue_url": f"{API_ORIGIN}/repos/{full_name}/issues/{number}",
            "comments_url": f"{API_ORIGIN}/repos/{full_name}/issues/{number}/comments",
            "review_comments_url": f"{url}/comments",
            "statuses_url": f"{API_ORIGIN}/repos/{full_name}/statuses/{head_sha}",
            "head": {
                "sha": head_sha,
                "ref": head_ref,
                "label": f"{head_full.split('/')[0]}:{head_ref}",
                "repo": head,
                "user": head["owner"],
            },
            "base": {
                "sha": base_sha,
                "ref": repo["default_branch"],
                "label": f"{repo['owner']['login']}:main",
                "repo": repo,
                "user": repo["owner"],
            },
            "merged": False,
            "labels": [],
        }
        if head_full != full_name:
            head["fork"] = True
        self.pulls[(full_name, number)] = pull
        return pull

    def set_head(self, full_name: str, number: int, head_sha: str) -> None:
        pull = self.pulls[(full_name, number)]
        pull["head"]["sha"] = head_sha
        pull["statuses_url"] = f"{API_ORIGIN}/repos/{full_name}/statuses/{head_sha}"

    def set_permission(self, full_name: str, login: str, permission: str) -> None:
        self.permissions[(full_name, login)] = permission

    def add_fault(self, method: str, path_regex: str, **kwargs: Any) -> Fault:
        fault = Fault(method=method.upper(), path_regex=path_regex, **kwargs)
        with self.lock:
            self.faults.append(fault)
        return fault

    def take_fault(self, method: str, path: str) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    return fault
        return None

    # queries for tests -------------------------------------------------------------------------
    def comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.issue_comments.values() if c["_repo"] == full_name and c["_issue"] == number]

    def review_comments_on(self, full_name: str, number: int) -> list[dict[str, Any]]:
        with self.lock:
            return [c for c in self.review_comments.values() if c["_repo"] == full_name and c["_pull"] == number]

    def labels_on(self, full_name: str, number: int) -> list[str]:
        with self.lock:
            return [label["name"] for label in self.pulls[(full_name, number)]["labels"]]

    def statuses_for(self, full_name: str, sha: str, context: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [
                s
                for s in self.statuses
                if s["_repo"] == full_name and s["_sha"] == sha and (context is None or s["context"] == context)
            ]

    def requests_matching(self, method: str, path_regex: str) -> list[Recorded]:
        """The recorded requests a fault with this `method` and `path_regex` would match, in order.

        Name the repository in `path_regex`: projects of one fake GitHub share head SHAs when their
        commits have the same content and the same second (see `scenario.Project`)."""
        with self.lock:
            return [r for r in self.requests if r.method == method and re.search(path_regex, r.path)]

    def count_requests(self, method: str, path_regex: str) -> int:
        return len(self.requests_matching(method, path_regex))
