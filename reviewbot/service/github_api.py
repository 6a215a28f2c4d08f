"""PyGithub behind one retry policy, with metrics.

PyGithub's own retries are switched off (`retry=None`) so that every call goes through `call`:
- 5xx and connection errors: exponential backoff (`retry_backoff_seconds`, doubling);
- rate limits (429, or 403 with `X-RateLimit-Remaining: 0` or `Retry-After`): wait `Retry-After`
  seconds, else until `X-RateLimit-Reset`, at most `retry_max_wait_seconds`;
- any other 4xx: `GitHubFailed`, with the response logged at ERROR; the job fails. A status the
  caller handles (`expected`, e.g. the 404 of a deleted comment) is raised the same way but only
  logged at DEBUG: it is no error.
A POST is never repeated blindly: when its outcome is unknown (5xx, rate limit, lost connection)
`call` raises `OutcomeUnknown` after the wait, and `upsert` re-reads before creating again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import github
import requests
from github import Auth

from reviewbot.service import metrics
from reviewbot.service.settings import Settings

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _app_auth(settings: Settings) -> Auth.AppAuth:
    """The App's own credentials (`app_id`, the private key file), read from disk on each call."""
    return Auth.AppAuth(int(settings.app_id), Path(settings.app_private_key_file).read_text())


def app_integration(settings: Settings) -> github.GithubIntegration:
    """A client authenticated as the App itself (not an installation), without PyGithub's retries
    and paced like the bot's other clients (`github_seconds_between_requests`/`_writes`)."""
    return github.GithubIntegration(
        auth=_app_auth(settings),
        base_url=settings.github_api_url,
        retry=None,
        seconds_between_requests=settings.github_seconds_between_requests,
        seconds_between_writes=settings.github_seconds_between_writes,
    )


class GitHubFailed(RuntimeError):
    """A GitHub API operation failed for good (4xx, or retries exhausted)."""

    def __init__(self, op: str, status: int | None, data: Any) -> None:
        super().__init__(f"GitHub {op} failed: {status} {data}")
        self.status = status
        self.data = data


class OutcomeUnknown(RuntimeError):
    """A non-idempotent request may or may not have been applied; re-read before trying again."""


def _headers(exc: github.GithubException) -> dict[str, str]:
    return {k.lower(): v for k, v in (exc.headers or {}).items()}


class GitHub:
    def __init__(
        self, settings: Settings, installation_id: int | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.settings = settings
        self._sleep = sleep
        self._auth: Auth.Auth
        if settings.app_auth:
            if installation_id is None:
                raise ValueError("authenticated as an App but the delivery carries no installation id")
            self._auth = _app_auth(settings).get_installation_auth(int(installation_id))
        else:
            token = settings.secret("github_token")
            if not token:
                raise ValueError("set github_token(_file), or app_id and app_private_key_file")
            self._auth = Auth.Token(token)
        self.client = github.Github(
            auth=self._auth,
            base_url=settings.github_api_url,
            retry=None,
            timeout=int(settings.github_timeout_seconds),
            per_page=100,
            seconds_between_requests=settings.github_seconds_between_requests,
            seconds_between_writes=settings.github_seconds_between_writes,
        )
        self.uses_app = settings.app_auth
        self._login: str | None = settings.bot_login or None

    @property
    def token(self) -> str:
        """A token for `git fetch` over HTTPS (installation tokens are refreshed by PyGithub)."""
        return self._auth.token  # type: ignore[attr-defined]

    @property
    def login(self) -> str:
        if self._login is None:
            if self.uses_app:
                app = app_integration(self.settings)
                self._login = self.call("get_app", lambda: app.get_app().slug) + "[bot]"
            else:
                self._login = self.call("get_user", lambda: self.client.get_user().login)
        return self._login

    def _wait_for(self, op: str, exc: github.GithubException, attempt: int) -> float | None:
        """Seconds to wait before retrying after `exc`, or None when it is not retryable."""
        headers = _headers(exc)
        limited = exc.status == 429 or (
            exc.status == 403 and (headers.get("x-ratelimit-remaining") == "0" or "retry-after" in headers)
        )
        if limited:
            if "retry-after" in headers:
                wait = float(headers["retry-after"])
            elif "x-ratelimit-reset" in headers:
                wait = float(headers["x-ratelimit-reset"]) - time.time()
            else:
                wait = self.settings.retry_backoff_seconds * 2**attempt
            metrics.inc("reviewbot_github_api_retries_total", op=op, reason="rate-limit")
            return min(max(wait, 0.0), self.settings.retry_max_wait_seconds)
        if exc.status >= 500:
            metrics.inc("reviewbot_github_api_retries_total", op=op, reason=str(exc.status))
            return self.settings.retry_backoff_seconds * 2**attempt
        return None

    def call(self, op: str, fn: Callable[[], T], *, idempotent: bool = True, expected: tuple[int, ...] = ()) -> T:
        """`fn()` under the retry policy (module docstring). `expected`: 4xx statuses the caller
        catches (`GitHubFailed.status`) and handles, logged at DEBUG rather than ERROR."""
        attempts = self.settings.retry_max_attempts
        for attempt in range(attempts):
            try:
                result = fn()
            except github.GithubException as exc:
                metrics.inc("reviewbot_github_api_calls_total", op=op, result=str(exc.status))
                wait = self._wait_for(op, exc, attempt)
                if wait is None:
                    level = logging.DEBUG if exc.status in expected else logging.ERROR
                    logger.log(level, "GitHub %s: %s %s (headers %s)", op, exc.status, exc.data, exc.headers)
                    raise GitHubFailed(op, exc.status, exc.data) from exc
                logger.warning("GitHub %s: %s, retrying in %.2fs", op, exc.status, wait)
            except (requests.ConnectionError, requests.Timeout) as exc:
                metrics.inc("reviewbot_github_api_calls_total", op=op, result="connection-error")
                metrics.inc("reviewbot_github_api_retries_total", op=op, reason="connection-error")
                wait = self.settings.retry_backoff_seconds * 2**attempt
                logger.warning("GitHub %s: %s, retrying in %.2fs", op, exc, wait)
            else:
                metrics.inc("reviewbot_github_api_calls_total", op=op, result="ok")
                return result
            self._sleep(wait)
            if not idempotent:
                raise OutcomeUnknown(op)
        raise GitHubFailed(op, None, f"gave up after {attempts} attempts")

    def upsert(
        self, op: str, find: Callable[[], T | None], create: Callable[[], T], update: Callable[[T], T] | None = None
    ) -> T:
        """Find the object (by marker); update it when found, else create it, re-reading after an
        uncertain create instead of posting a second copy."""
        for _ in range(self.settings.retry_max_attempts):
            existing = self.call(f"{op}.find", find)
            if existing is not None:
                if update is None:
                    return existing
                return self._update(op, update, existing)
            try:
                return self.call(f"{op}.create", create, idempotent=False)
            except OutcomeUnknown:
                logger.warning("GitHub %s: create may have been applied; re-reading", op)
        raise GitHubFailed(op, None, "gave up re-reading after uncertain creates")

    def _update(self, op: str, update: Callable[[T], T], existing: T) -> T:
        return self.call(f"{op}.update", lambda: update(existing))
