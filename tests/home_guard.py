"""The test session leaves the user's home and the repository tree alone (see tests/conftest.py).

`isolate(home)` points every home and cache variable the code under test reads at `home` (a
session temp directory, with a `.gitconfig` naming a test identity). `snapshot(real_home, repo)`
records what a test could leave behind: every entry under `~/.cache` (path, kind, size, mtime),
the entries directly in `~`, and the repository's untracked and ignored paths (without pytest's
and Python's own caches); `changes(before, after)` names the paths that appeared, changed or
went away.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, MutableMapping
from pathlib import Path

Entry = tuple[str, int, int]  # kind ("d" or "f"), size, mtime_ns
Snapshot = dict[str, Entry]

ISOLATED_VARIABLES = (
    "HOME",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "MAGI_COMPILE_CACHE_ROOT_DIR",
    "TORCHINDUCTOR_CACHE_DIR",
    "TRITON_CACHE_DIR",
    "MPLCONFIGDIR",
)
REPO_NOISE = ("__pycache__", ".pytest_cache", ".hypothesis", ".ruff_cache", ".coverage")


def isolate(home: Path, environ: MutableMapping[str, str]) -> None:
    """Point the home and cache variables of `environ` into `home`."""
    places = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "MAGI_COMPILE_CACHE_ROOT_DIR": home / ".cache" / "magi_compiler",
        "TORCHINDUCTOR_CACHE_DIR": home / ".cache" / "torchinductor",
        "TRITON_CACHE_DIR": home / ".cache" / "triton",
        "MPLCONFIGDIR": home / ".config" / "matplotlib",
    }
    assert set(places) == set(ISOLATED_VARIABLES)
    (home / ".cache").mkdir(parents=True, exist_ok=True)
    (home / ".gitconfig").write_text("[user]\n\tname = reviewbot tests\n\temail = tests@example.invalid\n")
    for name, path in places.items():
        environ[name] = str(path)


def _walk(root: Path) -> Iterator[tuple[str, Entry]]:
    try:
        entries = list(os.scandir(root))
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return
    for entry in entries:
        info = entry.stat(follow_symlinks=False)
        is_dir = entry.is_dir(follow_symlinks=False)
        yield entry.path, ("d" if is_dir else "f", 0 if is_dir else info.st_size, info.st_mtime_ns)
        if is_dir:
            yield from _walk(Path(entry.path))


def _repo_paths(repo: Path) -> Snapshot:
    # safe.directory: the suites of this repository also run in the reviewbot sandbox, under a uid
    # that does not own the checkout, where git refuses the repository as of "dubious ownership"
    out = subprocess.run(
        ["git", "-c", f"safe.directory={repo}", "status", "--porcelain=v1", "--untracked-files=all", "--ignored", "-z"],
        cwd=repo,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths: Snapshot = {}
    for record in out.split("\0"):
        if record[:2] not in ("??", "!!"):
            continue
        rel = record[3:]
        if any(part in REPO_NOISE for part in Path(rel).parts) or rel.startswith(".venv"):
            continue
        full = repo / rel
        if full.is_file():
            info = full.stat()
            paths[str(full)] = ("f", info.st_size, info.st_mtime_ns)
        else:
            paths[str(full)] = ("d", 0, 0)
    return paths


def snapshot(real_home: Path, repo: Path) -> Snapshot:
    """What the session must not change (see the module docstring)."""
    shot: Snapshot = dict(_walk(real_home / ".cache"))
    for entry in os.scandir(real_home):
        if entry.name != ".cache":
            is_dir = entry.is_dir(follow_symlinks=False)
            shot[entry.path] = (
                "d" if is_dir else "f",
                0,
                0 if is_dir else entry.stat(follow_symlinks=False).st_mtime_ns,
            )
    shot.update(_repo_paths(repo))
    return shot


def changes(before: Snapshot, after: Snapshot) -> list[str]:
    """`+ path` (new), `~ path` (changed), `- path` (gone), sorted."""
    lines = [f"+ {p}" for p in after.keys() - before.keys()]
    lines += [f"- {p}" for p in before.keys() - after.keys()]
    lines += [f"~ {p}" for p in before.keys() & after.keys() if before[p] != after[p] and before[p][0] == "f"]
    return sorted(lines, key=lambda line: line[2:])
