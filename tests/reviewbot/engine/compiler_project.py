"""A repository shaped like a real compiler project, for `reviewbot init` and method-root tests:
the artifact-cache directory is built in a method of a backend class from a dataclass config and
a repository hashing helper; tests live under `tests/unit/` and `tests/gpu/` (the latter uses CUDA);
`probe.py` prints the reference keys."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine_gitrepos import Repo

REPO_ROOT = Path(__file__).resolve().parents[3]


def run_reviewbot(repo: Repo, command: str, *args: str) -> subprocess.CompletedProcess:
    """`python -m reviewbot COMMAND --repo REPO ARGS...` with none of the caller's reviewbot or
    magi_compiler settings and the repository's parent directory as HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REVIEWBOT_", "MAGI_COMPILE_"))}
    env.update(PYTHONPATH=str(REPO_ROOT), HOME=str(repo.path.parent))
    return subprocess.run(
        [sys.executable, "-m", "reviewbot", command, "--repo", str(repo.path), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


CONFIG = '''
import dataclasses


@dataclasses.dataclass
class CompileConfig:
    """What changes compiled code."""

    opt_level: int = 2
    cache_root: str = "/tmp/mycc-cache"
'''

UTILS = """
import hashlib


def stable_hash(obj) -> str:
    return hashlib.sha256(repr(obj).encode()).hexdigest()[:16]


def pretty(obj) -> str:
    return repr(obj)
"""

BACKEND = """
import dataclasses
from pathlib import Path

from mycc.config import CompileConfig
from mycc.utils import pretty, stable_hash

BACKEND_VERSION = "1"


class MyBackend:
    def __init__(self, config: CompileConfig) -> None:
        self.config = config
        self.compiled = 0

    def artifact_key(self, graph_code: str) -> str:
        return stable_hash([graph_code, self.config_factors(self.config), self._version()])

    @staticmethod
    def config_factors(config: CompileConfig) -> dict:
        return dataclasses.asdict(config)

    def cache_dir(self, graph_code: str) -> Path:
        return Path(self.config.cache_root) / self.artifact_key(graph_code)

    def _version(self) -> str:
        return BACKEND_VERSION

    def compile(self, graph_code: str) -> str:
        self.compiled += 1
        return pretty(graph_code)

    def log_stats(self) -> str:
        return f"compiled {self.compiled}"
"""

PROBE = """
import json

from mycc.backend import MyBackend
from mycc.config import CompileConfig

cases = {}
for name, config in {"O1": CompileConfig(opt_level=1), "O2": CompileConfig()}.items():
    backend = MyBackend(config)
    cases[name] = {"factors": {"version": backend._version()}, "key": backend.artifact_key("graph")}
print(json.dumps({"cases": cases}))
"""

FILES = {
    "mycc/__init__.py": "",
    "mycc/config.py": CONFIG,
    "mycc/utils.py": UTILS,
    "mycc/backend.py": BACKEND,
    "probe.py": PROBE,
    "tests/unit/test_config.py": "from mycc.config import CompileConfig\n\n\ndef test_default():\n    assert CompileConfig().opt_level == 2\n",
    "tests/gpu/test_backend_cuda.py": "import torch\n\n\ndef test_cuda():\n    assert torch.cuda.is_available()\n",
    "pyproject.toml": '[project]\nname = "mycc"\nversion = "0.1"\n',
}


def compiler_repo(path: Path, reviewbot_yml: str | None = None, replace: dict[str, str] | None = None) -> Repo:
    """The project committed on `main` (with `.reviewbot.yml` when given, files of `replace`
    instead of the project's own)."""
    repo = Repo(path)
    files = {**FILES, **(replace or {})}
    if reviewbot_yml is not None:
        files[".reviewbot.yml"] = reviewbot_yml
    repo.commit(files, "initial")
    return repo
