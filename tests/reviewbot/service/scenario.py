"""A reviewed project for service tests: an upstream git repo, its fake-GitHub repo, and PRs.

The base has `pkg/core.py`; a "bad" head adds a function with `except Exception: return ""` on
lines inside the diff, and a CPU suite whose test shows the harm (a missing file must raise): the
failing test is the evidence that makes the review blocking (a pattern alone is an unconfirmed P2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.service.harness import Upstream
from tests.reviewbot.toy_pytest import NO_PLUGINS

BASE_CORE = '''"""Core helpers."""


def add(a: int, b: int) -> int:
    return a + b


def scale(values: list[float], factor: float) -> list[float]:
    return [v * factor for v in values]
'''

BAD_FUNCTION = """

def load(path: str) -> str:
    try:
        return open(path).read()
    except Exception:
        return ""
"""


SMOKE_SUITE_FILES = {
    ".reviewbot.yml": f"suites:\n  smoke:\n    command: python -m pytest -q -p no:cacheprovider {NO_PLUGINS} tests_smoke/test_smoke.py\n"
    "    gpus: 0\n    timeout_s: 120\n",
    "tests_smoke/test_smoke.py": "from pkg.core import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
}


class Project:
    """One repository on the fake GitHub. Its commits have the harness's fixed author and git's
    one-second dates, so two projects committing the same files in the same second get the same
    SHAs (as a fork does): what a test reads from the shared fake GitHub must name `full_name`,
    not only a SHA or a PR number."""

    def __init__(
        self, tmp: Path, github: FakeGitHub, full_name: str, extra_files: dict[str, str] | None = None
    ) -> None:
        self.github = github
        self.full_name = full_name
        self.upstream = Upstream(tmp / full_name.replace("/", "__"))
        files = {"pkg/__init__.py": "", "pkg/core.py": BASE_CORE, **(extra_files or {})}
        self.base_sha = self.upstream.commit(files, "base")
        github.state.add_repo(full_name, clone_url=str(self.upstream.path))
        self._branch_tips: dict[int, str] = {}

    def push(self, number: int, files: dict[str, str | bytes], message: str = "change") -> str:
        """Commit on the PR's branch (on top of its previous push) and publish refs/pull/<n>/head."""
        branch = f"pr-{number}"
        sha = self.upstream.commit(files, message, branch=branch)
        self.upstream.publish_pull(number, sha)
        self._branch_tips[number] = sha
        return sha

    def open_pull(
        self,
        number: int,
        files: dict[str, str | bytes],
        *,
        fork_of: str | None = None,
        draft: bool = False,
        author: str = "contributor",
        body: str = "",
    ) -> tuple[dict[str, Any], str]:
        sha = self.push(number, files)
        pull = self.github.state.add_pull(
            self.full_name,
            number,
            sha,
            self.base_sha,
            head_repo=fork_of,
            draft=draft,
            author=author,
            body=body,
            head_ref=f"pr-{number}",
        )
        return pull, sha

    def new_head(self, number: int, files: dict[str, str | bytes]) -> str:
        sha = self.push(number, files, "another push")
        self.github.state.set_head(self.full_name, number, sha)
        return sha


BAD_FUNCTION_SUITE = {
    ".reviewbot.yml": f"suites:\n  load:\n    command: python -m pytest -q -p no:cacheprovider {NO_PLUGINS} tests_load/test_load.py\n"
    "    gpus: 0\n    timeout_s: 120\n",
    "tests_load/test_load.py": "import pytest\n\nfrom pkg.core import load\n\n\n"
    "def test_missing_file_raises():\n    with pytest.raises(OSError):\n"
    "        load('/nonexistent/reviewbot-scenario/missing.txt')\n",
}


def bad_core(extra: str = "") -> dict[str, str]:
    return {"pkg/core.py": BASE_CORE + BAD_FUNCTION + extra, **BAD_FUNCTION_SUITE}


def good_core(extra: str = "") -> dict[str, str]:
    return {"pkg/core.py": BASE_CORE + "\n\ndef neg(x: int) -> int:\n    return -x\n" + extra}
