"""Real git histories in temp dirs for the release-notes tests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

_ENV = {
    "GIT_AUTHOR_NAME": "Ada Author",
    "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Author",
    "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_CONFIG_NOSYSTEM": "1",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


class GitRepo:
    """A repository on branch `main`, built commit by commit like a GitHub project's history."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        result = subprocess.run(["git", *args], cwd=self.path, env=_ENV, capture_output=True, text=True, check=True)
        return result.stdout.strip()

    def write(self, files: dict[str, str]) -> None:
        for name, text in files.items():
            target = self.path / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)

    def commit(self, message: str, files: dict[str, str] | None = None) -> str:
        """A commit on the current branch; with no files, an empty commit."""
        self.write(files or {})
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def tag(self, name: str) -> None:
        self.git("tag", name)

    def merge_pr(self, number: int, title: str, commits: list[tuple[str, dict[str, str]]]) -> str:
        """A PR branch with `commits`, merged into main with GitHub's merge-commit message."""
        branch = f"pr-{number}"
        self.git("checkout", "-q", "-b", branch, "main")
        for message, files in commits:
            self.commit(message, files)
        self.git("checkout", "-q", "main")
        self.git(
            "merge", "-q", "--no-ff", branch, "-m", f"Merge pull request #{number} from octo/{branch}", "-m", title
        )
        return self.head()

    def squash_pr(self, number: int, title: str, files: dict[str, str]) -> str:
        return self.commit(f"{title} (#{number})", files)


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    r = GitRepo(tmp_path / "project")
    r.commit("Initial commit", {"README.md": "project\n"})
    r.tag("v0.1.0")
    return r
