"""Real git repositories in temp dirs with crafted branches, for the engine tests."""

from __future__ import annotations

import os
import subprocess
import textwrap
from pathlib import Path

from reviewbot.engine import run_review
from reviewbot.findings import Finding

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.invalid",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def sub(text: str, old: str, new: str) -> str:
    """`text` with `old` replaced by `new`; fails when `old` is absent (a crafted branch must change)."""
    assert old in text, f"fixture text lacks {old!r}"
    return text.replace(old, new)


TORCH_PROJECT = "import torch\n"
"""A file that makes a shapes repository a torch project: `runtime-error-fallback` reports only where
some file of the revision imports torch."""


def review_shapes(path: Path, base: dict[str, str], shapes: dict[str, str]) -> list[Finding]:
    """The findings of a static review (`--suites none`) of branch `shapes` against `main`: a repository
    at `path` whose `main` holds `base` and whose `shapes` adds or rewrites the files in `shapes`."""
    repo = Repo(path)
    repo.commit(base, "base")
    repo.branch("shapes", "main")
    repo.commit(shapes, "shapes")
    return run_review(repo.path, "main", "shapes", suites="none").findings


def findings_by_rule(findings: list[Finding], path: str, qualname: str) -> dict[str, Finding]:
    """The findings in `qualname` of `path`, by rule; fails when a rule has two there."""
    here = [f for f in findings if f.path == path and f.qualname == qualname]
    out = {f.rule: f for f in here}
    assert len(out) == len(here), f"two findings of one rule in {path}:{qualname}"
    return out


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True, exist_ok=True)
        self.git("init", "-q", "-b", "main")

    def git(self, *args: str) -> str:
        env = {**os.environ, **GIT_ENV}
        proc = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True, check=True)
        return proc.stdout

    def write(self, files: dict[str, str | None]) -> None:
        for rel, text in files.items():
            target = self.path / rel
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text).lstrip("\n"))

    def commit(self, files: dict[str, str | None], message: str = "change") -> str:
        self.write(files)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.sha("HEAD")

    def branch(self, name: str, start: str = "main") -> None:
        self.git("checkout", "-q", "-b", name, start)

    def checkout(self, name: str) -> None:
        self.git("checkout", "-q", name)

    def sha(self, rev: str) -> str:
        return self.git("rev-parse", rev).strip()

    def mv(self, old: str, new: str) -> None:
        self.git("mv", old, new)


KEYED_CONFIG = '''
import dataclasses
import hashlib
import json


@dataclasses.dataclass
class CompileConfig:
    """Options that change compiled code."""

    mode: str = "jit"
    level: int = 1

    def hash(self) -> str:
        return hashlib.sha256(json.dumps(dataclasses.asdict(self), sort_keys=True).encode()).hexdigest()[:12]
'''

KEYED_CACHE_KEY = '''
"""The cache key hashes the compile config and the input placements."""

import hashlib
import json

from pkg.config import CompileConfig

VERSION = "1"


def _h(value, legacy=None):
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def cache_key_factors(config, placements):
    """Factor hashes of one compiled graph."""
    return {
        "compile_config": config.hash(),
        "compiler_version": _h(VERSION),
        "input_placements": _h(placements),
    }


def key(factors):
    return _h(sorted(factors.items()))


CASES = {"default": (CompileConfig(), "replicate"), "sharded": (CompileConfig(level=2), "shard0")}

if __name__ == "__main__":
    out = {"cases": {}}
    for name, (cfg, placement) in CASES.items():
        factors = cache_key_factors(cfg, placement)
        out["cases"][name] = {"factors": factors, "key": key(factors)}
    print(json.dumps(out))
'''

KEYED_REVIEWBOT_YML = """
cache_key:
  roots:
    - pkg.cache_key.cache_key_factors
    - pkg.config.CompileConfig
  probe:
    command: python -m pkg.cache_key
    timeout_s: 60
  vocabulary:
    compile config: compile_config
    compiler version: compiler_version
    placements: input_placements
    graph.code: graph_code
    dtype: input_dtypes
"""


def keyed_repo(path: Path, extra: dict[str, str] | None = None) -> Repo:
    """A repo on `main` whose key function, config class and probe mimic magi_compiler's shape."""
    repo = Repo(path)
    files = {
        "pkg/__init__.py": "",
        "pkg/config.py": KEYED_CONFIG,
        "pkg/cache_key.py": KEYED_CACHE_KEY,
        ".reviewbot.yml": KEYED_REVIEWBOT_YML,
        **(extra or {}),
    }
    repo.commit(files, "initial")
    return repo
