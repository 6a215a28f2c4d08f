"""The key probe's interpreter: the reviewed project's dependencies never enter the bot's environment.

Three cases, by `cache_key.probe` (`reviewbot.repo_config.ProbeConfig`):

- neither `python` nor `setup`: the reviewing interpreter, whose site-packages are visible (the
  probe of magi_compiler needs the bot's torch), but with the `reviewbot` package masked: a
  directory after the revision's tree on `PYTHONPATH` holds a `reviewbot` that raises
  `ModuleNotFoundError`, so `import reviewbot` fails unless the revision is the bot's own
  repository (its tree comes first). `PYTHONPATH` holds only those two entries.
- `python`: that interpreter (an absolute path, or a program name looked up on `PATH`), as it is.
- `setup`: a virtual environment made with `python -m venv` from `python` (default: the reviewing
  interpreter; no system site-packages) and `setup` run in it once, both in a box of the
  revision's worktree (`setup` with network, the environment's `bin` first on `PATH`: nothing the
  revision's configuration names runs outside a box); the probe then runs that environment's
  interpreter. Once built, the environment belongs to the bot's user again and probes see it
  read-only: the probe of one revision (one PR's code) cannot change what the probes of the
  other revisions sharing it run. Environments are cached under `probe_env_root` keyed on the base interpreter, the setup
  command and the revision's dependency files (`DEPENDENCY_FILES` and `requirements*.txt` at the
  top of the tree), so revisions with the same dependencies share one. A lock file serialises
  builders of one key; an environment whose setup failed or was interrupted is rebuilt next time.
"""

from __future__ import annotations

import dataclasses
import fcntl
import fnmatch
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.repo_config import ProbeConfig
from reviewbot.sandbox import Box, Captured, SandboxError, box, build_argv, child_env, give_back
from reviewbot.suites import reviewbot_dir

DEPENDENCY_FILES = ("pyproject.toml", "setup.py", "setup.cfg")
REQUIREMENTS_PATTERN = "requirements*.txt"
READY_MARK = ".reviewbot-ready"
MASK_SOURCE = (
    "raise ModuleNotFoundError(\n"
    '    "reviewbot is not importable from the key probe: the probe sees the reviewed revision, not the bot",\n'
    '    name="reviewbot",\n'
    ")\n"
)


class ProbeSetupError(RuntimeError):
    """The probe's interpreter could not be made ready (the message says why, naming the key)."""


@dataclasses.dataclass(frozen=True)
class Interpreter:
    """`python`: what a leading `python` of the probe command becomes; `env`: variables added to
    the probe's environment; `keep`: what a sandboxed run sees besides its tree (`reviewbot.sandbox.box`),
    read-only; `mask_bot`: whether `reviewbot` must be masked on the probe's path."""

    python: str
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    keep: tuple[str, ...] = ()
    mask_bot: bool = False


def installation_paths(python: str) -> tuple[str, ...]:
    """What a sandboxed run of `python` must see besides the bot's own interpreter: the
    installation around it (`PREFIX` of `PREFIX/bin/python`) and, when it is a link (a virtual
    environment's), the installation of the file it links to. `ProbeSetupError` when one of them
    is `/` (a sandbox that keeps `/` hides nothing)."""
    paths = {str(Path(os.path.realpath(Path(python).parent)).parent), str(Path(os.path.realpath(python)).parent.parent)}
    if "/" in paths:
        raise ProbeSetupError(f"cache_key.probe.python: {python} is installed at / (a sandbox cannot keep all of /)")
    return tuple(sorted(paths))


def _configured_python(probe: ProbeConfig) -> str | None:
    if probe.python is None:
        return None
    found = probe.python if probe.python.startswith("/") else shutil.which(probe.python)
    if found is None or not os.access(found, os.X_OK):
        raise ProbeSetupError(f"cache_key.probe.python: {probe.python}: no such interpreter on this machine")
    return found


def dependency_digest(git: GitRepo, revision: str, base_python: str, setup: str) -> str:
    """Key of the environment `setup` makes for `revision` (a commit id: `GitRepo` caches file
    lists per revision string): the base interpreter, the command and the contents of the
    revision's dependency files."""
    names = [n for n in git.list_files(revision) if "/" not in n]
    chosen = sorted(n for n in names if n in DEPENDENCY_FILES or fnmatch.fnmatch(n, REQUIREMENTS_PATTERN))
    digest = hashlib.sha256(json.dumps([os.path.realpath(base_python), setup]).encode())
    for name in chosen:
        digest.update(f"\0{name}\0".encode())
        digest.update((git.read(revision, name) or "").encode())
    return digest.hexdigest()


def probe_env_root(git: GitRepo) -> Path:
    """Where setup environments are cached: `.reviewbot/probe-envs` of the repository (in the
    service: of its checkout in the work directory)."""
    return reviewbot_dir(git.toplevel()) / "probe-envs"


def prepare(git: GitRepo, revision: str, tree: Path, probe: ProbeConfig, env_root: Path | None = None) -> Interpreter:
    """The interpreter the probe of `revision` (checked out at `tree`) runs; makes the setup
    environment under `env_root` (default `probe_env_root(git)`) when it is not cached.
    `ProbeSetupError` says what failed."""
    python = _configured_python(probe)
    if probe.setup is None:
        if python is None:
            return Interpreter(sys.executable, mask_bot=True)
        return Interpreter(python, keep=installation_paths(python))
    base = python or sys.executable
    env_root = env_root or probe_env_root(git)
    env_root.mkdir(parents=True, exist_ok=True)
    venv = env_root / dependency_digest(git, revision, base, probe.setup)[:24]
    with open(env_root / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (venv / READY_MARK).is_file():
            _build(tree, probe, base, venv)
    venv_python = str(venv / "bin" / "python")
    return Interpreter(
        venv_python,
        env={"VIRTUAL_ENV": str(venv)},
        keep=(*installation_paths(base), str(venv)),
    )


def _build(tree: Path, probe: ProbeConfig, base: str, venv: Path) -> None:
    """Make the environment and run `setup` in it, both in a box of `tree` (nothing the
    revision's configuration names runs outside one)."""
    assert probe.setup is not None
    if venv.exists():
        shutil.rmtree(venv)
    venv.mkdir()
    with box(tree, keep=installation_paths(base), own=(venv,)) as runs:
        env = child_env(tree, runs.scratch, {"VIRTUAL_ENV": str(venv)})
        made = _setup_run(runs, [base, "-I", "-m", "venv", str(venv)], env, 600, network=False)
        if made.returncode != 0:
            raise ProbeSetupError(f"cache_key.probe.setup: `{base} -m venv` failed: {_tail(made)}")
        env["PATH"] = os.pathsep.join((str(venv / "bin"), env["PATH"]))
        argv = build_argv(probe.setup, python=str(venv / "bin" / "python"))
        run = _setup_run(runs, argv, env, probe.setup_timeout_s, network=True)
        if runs.uid is not None:  # the probes of every revision sharing it read it; none may change it
            give_back(venv, runs.uid)
    if run.returncode != 0:
        raise ProbeSetupError(f"cache_key.probe.setup: exited with code {run.returncode}:\n{_tail(run)}")
    (venv / READY_MARK).write_text(probe.setup + "\n")


def _setup_run(runs: Box, argv: list[str], env: dict[str, str], timeout_s: float, *, network: bool) -> Captured:
    """One run of the setup; `ProbeSetupError` when it cannot start or exceeds `timeout_s`."""
    try:
        run = runs.run_captured(argv, env, timeout_s, network=network)
    except FileNotFoundError as exc:
        raise ProbeSetupError(f"cache_key.probe.setup: command not found: {exc.filename}") from exc
    except SandboxError as exc:
        raise ProbeSetupError(f"cache_key.probe.setup: the sandbox could not be built: {exc}") from exc
    if run.returncode is None:
        raise ProbeSetupError(f"cache_key.probe.setup: `{' '.join(argv)}` killed after {timeout_s:.0f}s")
    return run


def _tail(run: Captured) -> str:
    return "\n".join((run.stdout + run.stderr).splitlines()[-15:])


def write_mask(directory: Path) -> Path:
    """A directory to put after the revision on `PYTHONPATH` so `import reviewbot` fails."""
    package = directory / "reviewbot"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(MASK_SOURCE)
    for path in (directory, package):  # readable by a sandbox's uid whatever the umask
        path.chmod(0o755)
    (package / "__init__.py").chmod(0o644)
    return directory
