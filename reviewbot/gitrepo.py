"""Read-only access to a git repository by revision, plus throw-away worktrees.

Blob reads go through one long-lived `git cat-file --batch` process per `GitRepo`, so reading
hundreds of files costs milliseconds. Nothing here touches the user's checkout: code that must run
a revision gets a detached worktree in a temp dir (`worktree()`), removed afterwards.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Self

logger = logging.getLogger(__name__)


class GitError(RuntimeError):
    """A git command failed; the message holds the command and git's stderr."""


class NoMergeBase(GitError):
    """Two revisions share no commit in the repository as cloned."""


class GitRepo:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).resolve()
        self._batch: subprocess.Popen[bytes] | None = None
        self._blob_cache: dict[tuple[str, str], str | None] = {}
        self._tree_cache: dict[str, list[str]] = {}
        # (rev, path) -> (line, offset) of the first byte that is not UTF-8, for text read with replacement
        self.not_utf8: dict[tuple[str, str], tuple[int, int]] = {}

    def git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.path, capture_output=True, text=True, errors="replace", check=False
        )
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def rev_parse(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()

    def has_revision(self, rev: str) -> bool:
        return self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip() != ""

    def merge_base(self, base: str, head: str) -> str:
        """`base` and `head` name commits. Raises `NoMergeBase` where the two share no commit:
        unrelated histories, or a shallow clone cut above their merge base (the message says which,
        and how to fetch more)."""
        found = self.git("merge-base", base, head, check=False).strip()
        if found:
            return found
        if self.is_shallow():
            raise NoMergeBase(
                f"{base} and {head} share no commit in this shallow clone: fetch the history down to "
                "their merge base (git fetch --unshallow, or fetch-depth: 0 in actions/checkout)"
            )
        raise NoMergeBase(f"{base} and {head} have no common ancestor (unrelated histories): nothing to compare")

    def is_shallow(self) -> bool:
        """A shallow clone: some commits' parents were not fetched, so history walks stop early."""
        return self.git("rev-parse", "--is-shallow-repository").strip() == "true"

    def current_branch(self) -> str:
        return self.git("rev-parse", "--abbrev-ref", "HEAD").strip()

    def toplevel(self) -> Path:
        return Path(self.git("rev-parse", "--show-toplevel").strip())

    def git_dir(self) -> Path:
        """The repository's git directory, the one its worktrees share (absolute)."""
        return Path(self.git("rev-parse", "--path-format=absolute", "--git-common-dir").strip())

    def list_files(self, rev: str) -> list[str]:
        """Paths of all files at `rev` (cached per revision string)."""
        if rev not in self._tree_cache:
            out = self.git("-c", "core.quotepath=false", "ls-tree", "-r", "--name-only", rev)
            self._tree_cache[rev] = [line for line in out.splitlines() if line]
        return self._tree_cache[rev]

    def list_blobs(self, rev: str) -> list[tuple[str, str]]:
        """(path, blob id) of the files at `rev` that are blobs (not submodules), paths as
        `list_files` spells them; the ids come from the tree objects, no blob is read."""
        out = self.git("-c", "core.quotepath=false", "ls-tree", "-r", rev)
        blobs: list[tuple[str, str]] = []
        for line in out.splitlines():
            meta, _, path = line.partition("\t")
            _, kind, oid = meta.split()
            if kind == "blob":
                blobs.append((path, oid))
        return blobs

    def read(self, rev: str, path: str) -> str | None:
        """The file's text at `rev`, or None when it does not exist there or is binary (a NUL byte
        in its first 8000 bytes, git's own test). Text that is not UTF-8 is decoded with
        replacement characters, and `not_utf8[(rev, path)]` keeps the line and offset of its first bad
        byte."""
        key = (rev, path)
        if key not in self._blob_cache:
            data = self._read_batch(f"{rev}:{path}")
            self._blob_cache[key] = None if data is None else self._decode(key, data)
        return self._blob_cache[key]

    def _decode(self, key: tuple[str, str], data: bytes) -> str | None:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            if b"\0" in data[:8000]:
                return None
            self.not_utf8[key] = (data[: exc.start].count(b"\n") + 1, exc.start)
            return data.decode("utf-8", errors="replace")

    def _read_batch(self, spec: str) -> bytes | None:
        if self._batch is None:
            self._batch = subprocess.Popen(
                ["git", "cat-file", "--batch"], cwd=self.path, stdin=subprocess.PIPE, stdout=subprocess.PIPE
            )
        assert self._batch.stdin is not None and self._batch.stdout is not None
        self._batch.stdin.write(spec.encode() + b"\n")
        self._batch.stdin.flush()
        header = self._batch.stdout.readline().decode().split()
        if len(header) < 3 or header[1] != "blob":
            return None
        data = self._batch.stdout.read(int(header[2]))
        self._batch.stdout.read(1)
        return data

    def close(self) -> None:
        if self._batch is not None:
            assert self._batch.stdin is not None
            self._batch.stdin.close()
            self._batch.wait()
            self._batch = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextlib.contextmanager
    def worktree(self, rev: str) -> Iterator[Path]:
        """A detached worktree of `rev` in a temp dir, removed (with its admin entry) on exit."""
        sha = self.rev_parse(rev)
        with tempfile.TemporaryDirectory(prefix="reviewbot-wt-") as tmp:
            path = Path(tmp) / "wt"
            self.git("worktree", "add", "--detach", "--quiet", str(path), sha)
            logger.debug("worktree of %s at %s", sha[:12], path)
            try:
                yield path
            finally:
                self.git("worktree", "remove", "--force", str(path), check=False)
                self.git("worktree", "prune", check=False)
