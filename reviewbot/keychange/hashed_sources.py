"""Which of a change's files the cache key hashes by their bytes, as the probe at base lists them.

The probe may name, under `"sources"`, the files a factor hashes by their bytes (magi_compiler's
`compiler_source`: the modules that shape generated code). Any edit to one of them changes the key,
whatever the static closure diff says (a logging line in a hashed module rebakes every cache).

`base_listing` reads that listing for the base revision, cheaply:

- only a change that modifies, deletes or renames a file existing at base can touch a listed file
  (`listable_paths`; a file the change adds is not in the base's listing), so nothing runs otherwise;
- a listing is cached per base commit and probe configuration under
  `.reviewbot/hashed-sources/` of the repository (a JSON file; the service reviews many pull
  requests against one base);
- a probe run at base that already happened (the closure changed) is reused, not repeated;
- `run=False` (the review runs no code: `--suites none`) reads the cache only.

The probe runs the base revision's code (the merge base: already in the target branch).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path

from reviewbot.gitrepo import GitRepo
from reviewbot.keychange.probe import ProbeRun, parse_probe_sources, run_probe
from reviewbot.repo_config import ProbeConfig
from reviewbot.suites import reviewbot_dir

logger = logging.getLogger(__name__)

FROM_PROBE = "probe"  # the probe ran at base in this review
FROM_CACHE = "cache"  # a listing an earlier review's probe at this base gave


@dataclasses.dataclass(frozen=True)
class Listing:
    """`sources`: factor -> files it hashes at base (empty: the probe names none); `origin`:
    `FROM_PROBE` or `FROM_CACHE`."""

    sources: dict[str, tuple[str, ...]]
    origin: str


def listable_paths(git: GitRepo, base: str, head: str) -> list[str]:
    """Files existing at `base` that differ at `head` (modified, type-changed, deleted; a rename
    counts as the deletion of its old path): the only ones the base's listing can name."""
    out = git.git("diff", "--name-only", "-z", "--no-renames", "--diff-filter=DMT", base, head)
    return [path for path in out.split("\0") if path]


def cache_root(git: GitRepo) -> Path:
    """Where listings are cached: `.reviewbot/hashed-sources` of the repository."""
    return reviewbot_dir(git.toplevel()) / "hashed-sources"


def setup_note(probe: ProbeConfig) -> str:
    """What a progress line announcing a run of `probe` adds when the probe has a `setup`: its
    environment is built first when none is cached, which may take minutes (an install)."""
    if probe.setup is None:
        return ""
    return " (first building its environment with cache_key.probe.setup unless one is cached for these dependencies)"


def _cache_file(root: Path, base: str, probe: ProbeConfig) -> Path:
    """One file per base commit and probe configuration (another command may list other files)."""
    recipe = json.dumps([probe.command, probe.python, probe.setup])
    return root / f"{base}-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}.json"


def base_listing(
    git: GitRepo,
    base: str,
    probe: ProbeConfig,
    *,
    run: bool,
    known: ProbeRun | None = None,
    root: Path | None = None,
    progress: Callable[[str], None] = logger.info,
) -> Listing | None:
    """The files the key hashes at `base` (a full commit id), per factor. `known`: a probe run at
    `base` this review already made (used when it succeeded; when it failed, the probe is not run
    again for the listing: it would fail the same way, at the same cost); `run`: may the probe run when neither
    that nor a cached listing exists; `root`: the cache directory (default `cache_root(git)`);
    `progress`: told when the probe runs and how it went.
    None when the listing is not known (the probe failed, timed out or was not allowed to run)."""
    assert len(base) in (40, 64), f"base must be a full commit id, got {base!r}"
    path = _cache_file(root if root is not None else cache_root(git), base, probe)
    if known is not None and known.status == "ok":
        _store(path, known.sources)
        return Listing(dict(known.sources), FROM_PROBE)
    if path.is_file():
        try:
            return Listing(parse_probe_sources(path.read_text(encoding="utf-8")), FROM_CACHE)
        except ValueError as exc:  # a damaged cache file (JSONDecodeError is a ValueError): probe again
            logger.warning("ignoring the cached hashed-file listing %s: %s", path, exc)
    if not run or known is not None:
        return None
    progress(f"cache key: running the probe at base {base[:12]} for the files the key hashes{setup_note(probe)}")
    result = run_probe(git, base, probe)
    progress(f"cache key: probe at base {result.status} in {result.seconds:.1f}s")
    if result.status != "ok":
        logger.warning(
            "the key probe at base %s %s; its hashed files are not known: %s", base[:12], result.status, result.error
        )
        return None
    _store(path, result.sources)
    return Listing(dict(result.sources), FROM_PROBE)


def _store(path: Path, sources: dict[str, tuple[str, ...]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")  # concurrent reviews of one base each write whole files
    tmp.write_text(json.dumps({"sources": {f: list(p) for f, p in sources.items()}}), encoding="utf-8")
    tmp.replace(path)
