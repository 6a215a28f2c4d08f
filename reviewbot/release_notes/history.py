"""The changes between two refs, read from git.

Only the first-parent line of `--to` is walked (`git log --first-parent FROM..TO`), so a
merged pull request appears once, as its merge commit, and the commits of its branch do not
appear on their own. A merge commit `Merge pull request #N from owner/branch` carries the PR
title in its body (GitHub's format); a squash commit ends its subject with `(#N)`. Every other
commit is listed with no PR number.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

_MERGE_PR = re.compile(r"^Merge pull request #(?P<number>\d+)\b")
_SQUASH_PR = re.compile(r"\s*\(#(?P<number>\d+)\)\s*$")
_FIELD = "\x1f"
_RECORD = "\x1e"


@dataclass(frozen=True)
class Change:
    """One entry of the release notes: a merged PR or a commit without a PR number."""

    sha: str
    parents: tuple[str, ...]
    number: int | None
    title: str
    author: str
    labels: tuple[str, ...] = ()
    url: str | None = None

    @property
    def is_merge(self) -> bool:
        return len(self.parents) > 1

    @property
    def from_github(self) -> bool:
        """Whether title, labels and author were read from the GitHub API (else from git)."""
        return self.url is not None

    def with_github(self, title: str, author: str, labels: tuple[str, ...], url: str) -> Change:
        return replace(self, title=title, author=author, labels=labels, url=url)


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` and return stdout; a failing git raises CalledProcessError with its stderr."""
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise subprocess.CalledProcessError(result.returncode, ["git", *args], result.stdout, result.stderr)
    return result.stdout


def resolve(repo: Path, ref: str) -> str:
    """The commit sha of `ref`; an unknown ref is a ValueError naming it."""
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
    except subprocess.CalledProcessError as err:
        raise ValueError(f"unknown git ref {ref!r} in {repo}") from err


def _is_ancestor(repo: Path, ancestor: str, descendant: str) -> bool:
    """Whether commit `ancestor` is reachable from commit `descendant` (`git merge-base --is-ancestor`
    exits 0 for yes, 1 for no)."""
    result = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, descendant], cwd=repo, capture_output=True, check=False
    )
    if result.returncode not in (0, 1):
        raise subprocess.CalledProcessError(result.returncode, result.args, result.stdout, result.stderr)
    return result.returncode == 0


def parse_commit(sha: str, parents: tuple[str, ...], author: str, subject: str, body: str) -> Change:
    merge = _MERGE_PR.match(subject)
    if merge:
        body_lines = [line.strip() for line in body.splitlines() if line.strip()]
        title = body_lines[0] if body_lines else subject
        return Change(sha, parents, int(merge["number"]), title, author)
    squash = _SQUASH_PR.search(subject)
    if squash:
        return Change(sha, parents, int(squash["number"]), subject[: squash.start()].strip(), author)
    return Change(sha, parents, None, subject.strip(), author)


def check_order(repo: Path, from_sha: str, to_sha: str, from_ref: str, to_ref: str) -> None:
    """Raise ValueError when `to_sha` (resolved from `to_ref`) is a strict ancestor of `from_sha`
    (from `from_ref`): the refs swapped, the notes of `from_ref..to_ref` would be empty though
    commits lie between them."""
    if from_sha != to_sha and _is_ancestor(repo, to_sha, from_sha):
        raise ValueError(
            f"--to {to_ref!r} is older than --from {from_ref!r} (an ancestor of it): the notes list what "
            f"--to adds to --from; swap them"
        )


def collect_changes(repo: Path, from_ref: str, to_ref: str) -> list[Change]:
    """Changes reachable from `to_ref` and not from `from_ref`, oldest first. A shallow clone whose
    history is cut inside the range is a ValueError: the changes below the cut are not there."""
    from_sha, to_sha = resolve(repo, from_ref), resolve(repo, to_ref)
    out = git(
        repo,
        "log",
        "--first-parent",
        "--reverse",
        f"--format=%H{_FIELD}%P{_FIELD}%an{_FIELD}%s{_FIELD}%b{_RECORD}",
        f"{from_sha}..{to_sha}",
    )
    changes = []
    for record in out.split(_RECORD):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, author, subject, body = record.split(_FIELD, 4)
        changes.append(parse_commit(sha, tuple(parents.split()), author, subject, body))
    cut = _shallow_commits(repo).intersection(change.sha for change in changes)
    if cut:
        raise ValueError(
            f"this clone is shallow and its history between {from_ref[:10]} and {to_ref[:10]} is cut at "
            f"{min(cut)[:10]} (its parents were not fetched), so changes would be missing: fetch more "
            "history (git fetch --unshallow, or fetch-depth: 0 in actions/checkout)"
        )
    return changes


def _shallow_commits(repo: Path) -> frozenset[str]:
    """The commits of a shallow clone whose parents were not fetched (git's `shallow` file)."""
    path = repo / git(repo, "rev-parse", "--git-path", "shallow").strip()
    return frozenset(path.read_text().split()) if path.is_file() else frozenset()
