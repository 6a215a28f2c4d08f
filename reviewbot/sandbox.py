"""Running code of the reviewed revision: the only way the bot executes it.

Suites, the key probe, test-plan runs and experiments start the revision's code in a `Box` (see
`box(tree)`): every run is a fresh process group with a time limit (the whole group is killed when
it is exceeded) and the environment from `child_env`, built from an allow-list (locale, `PATH`, GPU
selection; the revision's tree first on `PYTHONPATH`, a fixed hash seed, offline switches for the
model hubs, `HOME` and `TMPDIR` in the box's own scratch directory): no token, secret, database
URL or proxy reaches it.

Where the machine allows it (`availability()`: the bot runs as root on Linux with util-linux's
`unshare`), each run is sandboxed (`reviewbot/sandbox_enter.py` does the inside part):
- as a uid of its own, drawn per box from `UID_RANGE` (no account, no file of the service's), with
  no supplementary group and `no_new_privs`; the worktree and the scratch directory are handed to
  that uid for the run;
- in new user, PID (a fresh /proc: no other process is visible), mount, network (loopback only),
  IPC and UTS namespaces;
- seeing fresh empty /tmp, /var/tmp and /dev/shm, and the service's state (`hide_service_state`:
  database, secret files, work directory) as empty.
Elsewhere `availability()` says why not, and runs go unsandboxed (the environment still cleaned,
the network cut where `unshare -rn` works): the service then refuses to run PR code unless its
operator allowed it for same-repository PRs (`REVIEWBOT_UNSANDBOXED=1`); the CLI, reviewing the
user's own checkout, runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import json
import logging
import os
import random
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import sysconfig
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path

logger = logging.getLogger(__name__)


UID_RANGE = range(200_000, 265_536)  # one uid per box; /etc/subuid ranges conventionally start at 100000
ENV_ALLOWED = {"PATH", "LANG", "LANGUAGE", "TZ", "TERM", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST"}
ENV_ALLOWED_PREFIXES = ("LC_", "CUDA_", "NVIDIA_", "NCCL_", "OMP_", "MKL_")
SANDBOX_USER = "reviewbot-sandbox"
FRESH_DIRS = ("/tmp", "/var/tmp", "/dev/shm")
FRESH_SIZE = "1g"  # each fresh tmpfs: memory of the machine, which a run may fill (it has no cgroup)
# processes and threads of one run (its uid is its own): a fork bomb meets this, not the machine's
# limit; a test process with torch holds a thread per core, and Inductor starts up to 32 compile
# workers, each with its own threads, so the bound leaves room for that on a machine of 128 cores
MAX_PROCESSES = 16384
EXIT_SETUP_FAILED = 125  # sandbox_enter.py's exit code when it could not build the sandbox
_ENTER = Path(__file__).with_name("sandbox_enter.py")
_hidden: set[str] = set()
_budget = threading.local()  # `at`: the monotonic time this thread's runs must end by (`time_budget`)


class SandboxError(RuntimeError):
    """The sandbox could not be built for a run (the message says why)."""


def build_argv(command: str, junit_path: Path | None = None, *, python: str | None = None) -> list[str]:
    """Split a configured command; `python`/`torchrun` become `python` (default: this
    interpreter); JUnit path inserted."""
    argv = shlex.split(command)
    assert argv, "empty command"
    interpreter = python or sys.executable
    if argv[0] in ("python", "python3"):
        argv[0] = interpreter
    elif argv[0] == "torchrun":
        argv[:1] = [interpreter, "-m", "torch.distributed.run"]
    if junit_path is not None:
        if any("{junit}" in a for a in argv):
            argv = [a.replace("{junit}", str(junit_path)) for a in argv]
        elif "pytest" in argv:
            argv.append(f"--junitxml={junit_path}")
    return argv


def child_env(worktree: Path, scratch: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for code of the reviewed revision: allow-listed variables of this process
    (`ENV_ALLOWED`, `ENV_ALLOWED_PREFIXES`), its tree first on PYTHONPATH, a fixed hash seed,
    offline switches for common hubs, home and temp files in `scratch`; then `extra`."""
    env = {k: v for k, v in os.environ.items() if k in ENV_ALLOWED or k.startswith(ENV_ALLOWED_PREFIXES)}
    env.setdefault("PATH", os.defpath)
    env.update(
        PYTHONPATH=str(worktree),
        PYTHONHASHSEED="0",
        PYTHONDONTWRITEBYTECODE="1",
        NO_PROXY="*",
        no_proxy="*",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HOME=str(scratch),
        TMPDIR=str(scratch),
        XDG_CACHE_HOME=str(scratch / ".cache"),
        USER=SANDBOX_USER,
        LOGNAME=SANDBOX_USER,
    )
    if extra:
        env.update(extra)
    return env


def hide_service_state(paths: Iterable[Path | str]) -> None:
    """Register the service's state (database file, secret files, work directory) so every
    sandbox of this process sees it empty, and make it private to the service's user (umask 077
    from now on, group and other bits removed from what exists): two walls, either one enough.
    A path that is private already is not touched, so a database file that refuses changes for a
    moment (immutable, read-only mount) does not stop a worker from starting."""
    os.umask(0o077)
    for raw in paths:
        path = Path(raw).resolve()
        mode = path.stat().st_mode if path.exists() else 0
        if mode & 0o077:
            path.chmod(mode & 0o700)
        _hidden.add(str(path))


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Runs this thread starts inside the block end `seconds` from now at the latest: each run's own
    limit is cut to what is left (one started after that is killed at once and reported as killed at
    its limit). The service bounds a review with it: the limits in a PR's `.reviewbot.yml` are the
    PR author's, and a run that never ends would hold a worker for good."""
    if seconds <= 0:
        raise ValueError(f"time budget must be positive, got {seconds}")
    outer = getattr(_budget, "at", None)
    at = time.monotonic() + seconds
    _budget.at = at if outer is None else min(outer, at)
    try:
        yield
    finally:
        _budget.at = outer


def _within_budget(timeout_s: float) -> float:
    at = getattr(_budget, "at", None)
    return timeout_s if at is None else max(0.0, min(timeout_s, at - time.monotonic()))


@dataclasses.dataclass(frozen=True)
class Availability:
    ok: bool
    reason: str = ""


@functools.cache
def availability() -> Availability:
    """Whether runs are sandboxed here; `reason` says why not (checked once per process by
    building a sandbox and looking at it from inside)."""
    if sys.platform != "linux":
        return Availability(False, f"namespaces need Linux (this is {sys.platform})")
    if os.geteuid() != 0:
        return Availability(
            False, f"the bot runs as uid {os.geteuid()}, not root, so it cannot run PR code as a user of its own"
        )
    if shutil.which("unshare") is None:
        return Availability(False, "util-linux's `unshare` is not installed")
    check = (
        "import os, socket; assert os.getuid() != 0 and os.getpid() == 1, (os.getuid(), os.getpid()); "
        "names = sorted(n for _, n in socket.if_nameindex()); assert names == ['lo'], names; print('sandboxed')"
    )
    with tempfile.TemporaryDirectory(prefix="reviewbot-sandbox-check-") as tmp, box(Path(tmp), force=True) as b:
        try:
            run = b.run_captured([sys.executable, "-I", "-S", "-c", check], {"PATH": os.defpath}, 120)
        except SandboxError as exc:
            logger.warning("sandbox unavailable: %s", exc)
            return Availability(False, f"building the sandbox failed: {exc}")
    if run.returncode == 0 and run.stdout.strip() == "sandboxed":
        return Availability(True)
    detail = (run.stderr.strip().splitlines() or ["no output"])[-1]
    logger.warning("sandbox unavailable: %s", detail)
    return Availability(False, f"building the sandbox failed: {detail}")


@functools.cache
def network_isolation_prefix() -> tuple[str, ...]:
    """`("unshare", "-rn")` when an empty network namespace can be made here, else `()` (for
    unsandboxed runs)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        logger.info("unshare not found: revision code runs with a cleaned environment but with network access")
        return ()
    proc = subprocess.run([unshare, "-rn", "true"], capture_output=True, check=False)
    if proc.returncode != 0:
        logger.info("unshare -rn refused (%s): revision code runs with network access", proc.stderr.decode().strip())
        return ()
    return (unshare, "-rn")


def _outermost(paths: Iterable[str]) -> list[str]:
    """The existing paths among `paths`, resolved, without those inside another one."""
    resolved = sorted({str(Path(p).resolve()) for p in paths if p and Path(p).exists()})
    return [p for p in resolved if not any(p != q and p.startswith(q + "/") for q in resolved)]


def _interpreter_paths() -> list[str]:
    """What a sandboxed `python` needs to see: this interpreter, its prefixes and libraries."""
    paths = {
        str(Path(sys.executable).resolve().parent),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        sys.base_exec_prefix,
        *(sysconfig.get_paths().get(key, "") for key in ("stdlib", "platstdlib", "purelib", "platlib")),
    }
    return _outermost(paths)


@dataclasses.dataclass(frozen=True)
class Captured:
    """`returncode` is None when the run was killed at its time limit."""

    returncode: int | None
    stdout: str
    stderr: str
    seconds: float
    isolated: bool


@dataclasses.dataclass(frozen=True)
class Box:
    """Where runs of one worktree happen: `scratch` is the run's home and temp directory (and the
    place for reports such as JUnit files); `uid` None means unsandboxed; `keep`: further paths a
    sandboxed run sees (another interpreter, a virtual environment)."""

    tree: Path
    scratch: Path
    uid: int | None
    keep: tuple[str, ...] = ()

    @property
    def sandboxed(self) -> bool:
        return self.uid is not None

    def _argv(self, argv: Sequence[str], env: Mapping[str, str], network: bool) -> list[str]:
        if self.uid is None:
            return [*(network_isolation_prefix() if not network else ()), *argv]
        unshare = shutil.which("unshare")
        if unshare is None:
            raise SandboxError("util-linux's `unshare` is not installed")
        spec = {
            "uid": self.uid,
            "gid": self.uid,
            "argv": list(argv),
            "cwd": str(self.tree),
            "env": dict(env),
            "keep": [str(self.tree), str(self.scratch), *_outermost([*_interpreter_paths(), *self.keep]), unshare],
            "fresh": list(FRESH_DIRS),
            "fresh_size": FRESH_SIZE,
            "max_processes": MAX_PROCESSES,
            "hide": sorted(_hidden),
            "unshare": unshare,
        }
        return [sys.executable, "-I", "-S", str(_ENTER), json.dumps(spec)]

    def run_logged(
        self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float, log_path: Path
    ) -> tuple[int | None, float]:
        """Run with stdout and stderr to `log_path`; on timeout kill the process group.

        Returns (returncode or None on timeout, seconds). `FileNotFoundError` when the program is
        missing; `SandboxError` when the sandbox could not be built.
        """
        self._require_program(argv, env)
        timeout_s = _within_budget(timeout_s)
        start = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                self._argv(argv, env, network=True),
                cwd=self.tree,
                env=dict(env),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
        if rc == EXIT_SETUP_FAILED and self.sandboxed:
            self._raise_if_setup_failed(log_path.read_text(errors="replace"))
        return rc, time.monotonic() - start

    def run_captured(
        self, argv: Sequence[str], env: Mapping[str, str], timeout_s: float, *, network: bool = False
    ) -> Captured:
        """Run and return its output; on timeout kill the process group. Without `network`, an
        unsandboxed run is put in an empty network namespace where `unshare -rn` works.
        `FileNotFoundError` when the program is missing; `SandboxError` when the sandbox could
        not be built."""
        self._require_program(argv, env)
        timeout_s = _within_budget(timeout_s)
        full = self._argv(argv, env, network)
        start = time.monotonic()
        proc = subprocess.Popen(
            full,
            cwd=self.tree,
            env=dict(env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
            rc: int | None = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            rc = None
        if rc == EXIT_SETUP_FAILED and self.sandboxed:
            self._raise_if_setup_failed(stderr)
        isolated = self.sandboxed or (not network and bool(network_isolation_prefix()))
        return Captured(rc, stdout, stderr, time.monotonic() - start, isolated)

    def _require_program(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        program = argv[0]
        if "/" in program:
            found = program if os.path.exists(self.tree / program) else None
        else:
            found = shutil.which(program, path=env.get("PATH", os.defpath))
        if found is None:
            raise FileNotFoundError(2, "No such file or directory", program)

    def take(self, name: str, dest: Path, limit_bytes: int = 256 * 1024 * 1024) -> bool:
        """Copy the regular file `name` a run left in `scratch` to `dest` (never through a link;
        at most `limit_bytes`); False when there is none."""
        try:
            fd = os.open(self.scratch / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            logger.warning("%s left by the run is a symbolic link: not read", name)
            return False
        with os.fdopen(fd, "rb") as src:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            dest.write_bytes(src.read(limit_bytes))
        return True

    @staticmethod
    def _raise_if_setup_failed(output: str) -> None:
        lines = [line for line in output.splitlines() if line.startswith("sandbox: ")]
        if lines:
            raise SandboxError(lines[-1].removeprefix("sandbox: "))


@contextlib.contextmanager
def box(tree: Path, *, force: bool = False, keep: Sequence[str] = (), own: Sequence[Path] = ()) -> Iterator[Box]:
    """Runs in `tree` (a throw-away worktree): sandboxed where `availability()` allows (or with
    `force`, which only the availability check uses), with a fresh scratch directory removed on
    exit. A sandboxed box hands `tree` and the directories `own` (a virtual environment the runs
    write to or read) to its uid (the tree is thrown away afterwards) and lets its runs see the
    paths `keep` too."""
    sandboxed = force or availability().ok
    scratch = Path(tempfile.mkdtemp(prefix="reviewbot-scratch-"))
    uid = random.choice(UID_RANGE) if sandboxed else None
    try:
        if uid is not None:
            for path in (tree, scratch, *own):
                _chown_tree(path, uid)
        yield Box(tree, scratch, uid, tuple(keep) + tuple(str(p) for p in own))
    finally:
        shutil.rmtree(scratch)


def give_back(root: Path, uid: int) -> None:
    """Take back a tree a box of `uid` wrote (a cached environment): what `uid` owns becomes this
    process's, read-only to everyone else (no write, setuid or setgid bits); so later boxes may read
    and run it, never change it. Entries of other owners (hard links to files of others) are left
    alone, and links are never followed."""
    for directory, dirs, files in os.walk(root):
        for path in [directory, *(os.path.join(directory, name) for name in dirs + files)]:
            info = os.lstat(path)
            if info.st_uid != uid:
                continue
            os.chown(path, os.geteuid(), os.getegid(), follow_symlinks=False)
            if not stat.S_ISLNK(info.st_mode):
                readable = 0o555 if stat.S_ISDIR(info.st_mode) else 0o444
                os.chmod(path, (stat.S_IMODE(info.st_mode) & 0o755) | readable)


def _chown_tree(root: Path, uid: int) -> None:
    os.chown(root, uid, uid, follow_symlinks=False)
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            os.chown(os.path.join(directory, name), uid, uid, follow_symlinks=False)
