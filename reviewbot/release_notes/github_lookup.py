"""GitHub through PyGithub: PR titles, labels and authors, and the draft release.

`connect` takes the API base URL and the token from its caller: `reviewbot release-notes` reads
them from `GITHUB_API_URL` (GitHub Actions and Enterprise set it; tests point it at a local
server) and `GITHUB_TOKEN`.
"""

from __future__ import annotations

import logging
import re

import requests
from github import Auth, Github, GithubException, UnknownObjectException
from github.GitRelease import GitRelease
from github.Repository import Repository

from reviewbot.release_notes.history import Change

logger = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"


def connect(full_name: str, token: str | None, api_url: str = DEFAULT_API_URL) -> Repository:
    """The repository `OWNER/REPO` (one GET, which also checks the token can see it); no token:
    anonymous access. ValueError (one line) when the API cannot be reached or refuses the request
    (an unknown repository, a bad token): the command's input or environment is wrong."""
    if full_name.count("/") != 1 or not all(full_name.split("/")):
        raise ValueError(f"--github: expected OWNER/REPO, got {full_name!r}")
    client = Github(base_url=api_url.rstrip("/"), auth=Auth.Token(token) if token else None)
    try:
        return client.get_repo(full_name)
    except GithubException as exc:
        message = exc.data.get("message") if isinstance(exc.data, dict) else None
        raise ValueError(f"--github {full_name}: {api_url} answered {exc.status} ({message or 'no message'})") from None
    except requests.ConnectionError as exc:
        errno_text = re.search(r"\[Errno -?\d+\] [^'\")]+", str(exc))
        reason = errno_text.group(0) if errno_text else " ".join(str(exc).split())[:200]
        raise ValueError(f"--github {full_name}: cannot reach {api_url}: {reason}") from None


def enrich(changes: list[Change], repo: Repository) -> list[Change]:
    """Each change with a PR number gets the PR's title, labels, author and URL from the API.

    A number GitHub does not know as a pull request (an issue reference in a subject, a PR
    from another fork's history) keeps the git data; that is logged.
    """
    enriched = []
    for change in changes:
        if change.number is None:
            enriched.append(change)
            continue
        try:
            pull = repo.get_pull(change.number)
        except UnknownObjectException:
            logger.warning("#%d is not a pull request on GitHub; keeping the commit subject", change.number)
            enriched.append(change)
            continue
        labels = tuple(label.name for label in pull.labels)
        enriched.append(change.with_github(pull.title, pull.user.login, labels, pull.html_url))
    return enriched


def _find_release(repo: Repository, tag: str) -> GitRelease | None:
    # Listing, not GET /releases/tags/{tag}: drafts are only visible in the list.
    for release in repo.get_releases():
        if release.tag_name == tag:
            return release
    return None


def upsert_draft_release(repo: Repository, tag: str, name: str, body: str, target: str) -> tuple[GitRelease, bool]:
    """Create the draft release `tag`, or update its name, body and target if the draft exists.

    Returns the release and whether it was created. A prerelease flag set by hand on the draft is
    kept. A published release with that tag is never touched: that is a ValueError.
    """
    existing = _find_release(repo, tag)
    if existing is None:
        release = repo.create_git_release(tag, name=name, message=body, draft=True, target_commitish=target)
        return release, True
    if not existing.draft:
        raise ValueError(f"release {tag!r} is already published; refusing to overwrite it")
    release = existing.update_release(
        name=name, message=body, draft=True, prerelease=existing.prerelease, target_commitish=target
    )
    return release, False
