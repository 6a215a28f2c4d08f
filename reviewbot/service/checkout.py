"""Local clones of the reviewed repositories, one per repository under `<work_dir>/repos/`.

`checkout(...)` makes sure the base and head commits are present (fetching the base branch and
`refs/pull/<n>/head` from the base repository, which also carries fork heads) and holds a file
lock on the clone while the caller works in it, so jobs of one repository take turns.
The token travels in an `http.extraHeader`, never in a stored remote URL.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import logging
import subprocess
from collections.abc import Iterator
from pathlib import Path

logger = logging.getLogger(__name__)


class CheckoutError(RuntimeError):
    pass


def _git(repo: Path, *args: str, extra_config: tuple[str, ...] = ()) -> subprocess.CompletedProcess[str]:
    config: list[str] = []
    for item in extra_config:
        config += ["-c", item]
    return subprocess.run(
        ["git", *config, "-C", str(repo), *args], capture_output=True, text=True, check=False, timeout=600
    )


def has_commit(repo: Path, sha: str) -> bool:
    return _git(repo, "cat-file", "-e", f"{sha}^{{commit}}").returncode == 0


@contextlib.contextmanager
def checkout(
    work_dir: Path,
    full_name: str,
    clone_url: str,
    pr: int,
    base_ref: str,
    shas: tuple[str, ...],
    token: str | None = None,
    purpose: str = "review",
) -> Iterator[Path]:
    """`purpose` picks the clone: GPU runs hold theirs for long, so they get their own."""
    suffix = "" if purpose == "review" else f"--{purpose}"
    path = work_dir / "repos" / f"{full_name.replace('/', '__')}{suffix}"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.parent / f"{path.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (path / ".git").exists():
            subprocess.run(["git", "init", "-q", str(path)], check=True, capture_output=True)
        missing = [sha for sha in shas if not has_commit(path, sha)]
        if missing:
            auth: tuple[str, ...] = ()
            if token and clone_url.startswith("https://"):
                basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
                auth = (f"http.extraHeader=Authorization: Basic {basic}",)
            refspecs = [f"+refs/pull/{pr}/head:refs/heads/pull/{pr}"]  # a branch: the review names it
            if base_ref:
                refspecs.insert(0, f"+refs/heads/{base_ref}:refs/remotes/origin/{base_ref}")
            fetched = _git(path, "fetch", "--no-tags", "-q", clone_url, *refspecs, extra_config=auth)
            if fetched.returncode != 0:
                logger.warning("fetch of %s refs failed: %s", full_name, fetched.stderr.strip())
            still = [sha for sha in shas if not has_commit(path, sha)]
            if still:  # a push raced the fetch, or the ref is gone: ask for the commits themselves
                by_sha = _git(path, "fetch", "--no-tags", "-q", clone_url, *still, extra_config=auth)
                if by_sha.returncode != 0 or not all(has_commit(path, sha) for sha in still):
                    raise CheckoutError(f"cannot fetch {still} of {full_name}: {by_sha.stderr.strip()}")
        yield path
