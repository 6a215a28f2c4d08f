"""The index of one cache directory, ``index.json``, and atomic file writes.

The index maps ``(runtime_shape, graph_index, compiler_name)`` to an artifact path relative
to the cache directory, separately for each Dynamo graph of the model (graphs are numbered
in the order the backend first compiled them), and records how many restarts
(``RestartAnalysis``) each graph took before it compiled and a hash of what its artifacts
were compiled from (the graph's code plus grad mode and autocast state). Graph numbers
follow call order, so a process that calls the model in another order, or under another
grad/autocast mode, can meet a different graph under the same number: the backend compares
that hash before loading and then looks the graph up by its hash (`graph_with_code`), storing a
graph found nowhere under a new number (`free_graph`) instead of over the other one. Artifact
file names carry the hash, so processes storing different graphs under one number never mix
their files. Updates are read-modify-write
under an exclusive ``fcntl`` lock on ``index.lock`` and land through a temp file and
``os.replace``, so concurrent processes never see a half-written index. An unreadable index
is treated as empty (every lookup a miss) with a warning.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import tempfile
from collections.abc import Iterator

from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))


INDEX_FILE = "index.json"
LOCK_FILE = "index.lock"
INDEX_VERSION = 1


@dataclasses.dataclass(frozen=True)
class ArtifactKey:
    runtime_shape: str
    graph_index: int
    compiler_name: str

    def encode(self) -> str:
        return f"{self.runtime_shape}|{self.graph_index}|{self.compiler_name}"


def atomic_write_bytes(path: str, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temp file in the same directory and ``os.replace``."""
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix=os.path.basename(path))
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


class ArtifactIndex:
    """The index of the cache directory ``cache_dir``."""

    def __init__(self, cache_dir: str) -> None:
        self.cache_dir = cache_dir
        self.path = os.path.join(cache_dir, INDEX_FILE)

    def _read(self) -> dict:
        try:
            with open(self.path, encoding="utf-8") as handle:
                data = json.load(handle)
        except FileNotFoundError:
            return {"version": INDEX_VERSION, "graphs": {}}
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            logger.warning("cache index %s is corrupt (%s); treating it as empty", self.path, err)
            return {"version": INDEX_VERSION, "graphs": {}}
        if (
            not isinstance(data, dict)
            or data.get("version") != INDEX_VERSION
            or not isinstance(data.get("graphs"), dict)
        ):
            logger.warning("cache index %s has an unknown layout; treating it as empty", self.path)
            return {"version": INDEX_VERSION, "graphs": {}}
        return data

    def _graph(self, graph: int) -> dict:
        entry = self._read()["graphs"].get(str(graph), {})
        return entry if isinstance(entry, dict) else {}

    def restart_count(self, graph: int) -> int:
        count = self._graph(graph).get("restarts", 0)
        return count if isinstance(count, int) else 0

    def graph_code_hash(self, graph: int) -> str | None:
        value = self._graph(graph).get("code_hash")
        return value if isinstance(value, str) else None

    def graph_with_code(self, code_hash: str) -> int | None:
        """The lowest graph number recorded with ``code_hash``, or None."""
        numbers = [
            int(number)
            for number, entry in self._read()["graphs"].items()
            if number.isdigit() and isinstance(entry, dict) and entry.get("code_hash") == code_hash
        ]
        return min(numbers, default=None)

    def free_graph(self) -> int:
        """A graph number no entry uses: one past the highest recorded."""
        numbers = [int(number) for number in self._read()["graphs"] if number.isdigit()]
        return max(numbers, default=-1) + 1

    def lookup(self, graph: int, key: ArtifactKey) -> str | None:
        """Absolute path of the artifact stored for ``key`` of Dynamo graph ``graph``, or None."""
        artifacts = self._graph(graph).get("artifacts", {})
        relative = artifacts.get(key.encode()) if isinstance(artifacts, dict) else None
        if not isinstance(relative, str) or os.path.isabs(relative):
            return None
        return os.path.join(self.cache_dir, relative)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        os.makedirs(self.cache_dir, exist_ok=True)
        with open(os.path.join(self.cache_dir, LOCK_FILE), "a+b") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def record(self, graph: int, restarts: int, code_hash: str, artifacts: dict[ArtifactKey, str]) -> None:
        """Record ``graph``'s restart count, code hash and artifacts (paths relative to the
        cache directory); a new code hash replaces the artifacts recorded under the old one."""
        assert all(not os.path.isabs(p) for p in artifacts.values()), "artifact paths must be relative"
        with self._locked():
            data = self._read()
            entry = data["graphs"].setdefault(str(graph), {})
            if entry.get("code_hash") != code_hash:
                entry["artifacts"] = {}
            entry["restarts"] = restarts
            entry["code_hash"] = code_hash
            stored = entry.setdefault("artifacts", {})
            stored.update({key.encode(): path for key, path in artifacts.items()})
            atomic_write_bytes(self.path, json.dumps(data, indent=1, sort_keys=True).encode())
