"""Read-only access to a git repository by revision, plus throw-away worktrees.

Blob reads go through one long-lived `git cat-file --batch` process per `GitRepo`, so reading
hundreds of files costs milliseconds. Nothing here touches the user's checkout: code that must run
a revision gets a detached worktree in a temp dir (`worktree()`), removed afterwards.
"""

from __future__ import annotations

import contextlib
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Self

from reviewbot import logger


class GitError(RuntimeError):
    """A git command failed; the message holds the command and git's stderr."""


class GitRepo:
    def __init__(self, path: Path | str) -> None:
        self.path = Path(path).resolve()
        self._batch: subprocess.Popen[bytes] | None = None
        self._blob_cache: dict[tuple[str, str], str | None] = {}
        self._tree_cache: dict[str, list[str]] = {}

    def git(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(["git", *args], cwd=self.path, capture_output=True, text=True, check=False)
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def rev_parse(self, rev: str) -> str:
        return self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()

    def has_revision(self, rev: str) -> bool:
        return self.git("rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False).strip() != ""

    def merge_base(self, base: str, head: str) -> str:
        return self.git("merge-base", base, head).strip()

    def current_branch(self) -> str:
        return self.git("rev-parse", "--abbrev-ref", "HEAD").strip()

    def toplevel(self) -> Path:
        return Path(self.git("rev-parse", "--show-toplevel").strip())

    def list_files(self, rev: str) -> list[str]:
        """Paths of all files at `rev` (cached per revision string)."""
        if rev not in self._tree_cache:
            out = self.git("-c", "core.quotepath=false", "ls-tree", "-r", "--name-only", rev)
            self._tree_cache[rev] = [line for line in out.splitlines() if line]
        return self._tree_cache[rev]

    def read(self, rev: str, path: str) -> str | None:
        """The file's text at `rev`, or None when it does not exist there (or is not text)."""
        key = (rev, path)
        if key not in self._blob_cache:
            self._blob_cache[key] = self._read_batch(f"{rev}:{path}")
        return self._blob_cache[key]

    def _read_batch(self, spec: str) -> str | None:
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
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return None

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
