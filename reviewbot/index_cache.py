"""The exception index's per-file facts, kept across reviews of one repository.

    with FactsCache.at(git_common_dir) as cache:   # <git dir>/reviewbot/exception-index.sqlite3
        found = cache.get(digests)                  # digest -> facts (JSON-ready data) of the hits
        cache.put({digest: facts, ...})

A digest names a file's content (its git blob id) *and* the code that computed its facts
(`exception_index.blob_digest`), so an entry is never stale: an edited file, or another version of
the scanner, has another digest.
The store is one SQLite file in the repository's git directory (shared by its worktrees, never part of
a checkout or of `git status`); the service's clones and a developer's repository keep theirs
between reviews. Readers and writers of several processes or threads take turns through SQLite's
locking. A file that is not a readable cache (corrupt, or another program's) is moved aside once
with a warning naming it, and the index is built without it; so is the index where the directory
cannot be made (a read-only git directory), with a warning: a cache is only ever a speed-up.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

logger = logging.getLogger(__name__)

CACHE_FILE = Path("reviewbot") / "exception-index.sqlite3"
_BATCH = 500  # digests per SELECT (SQLite's default limit on host parameters is 999 before 3.32)


class FactsCache:
    """One open cache file; use as a context manager. `get` and `put` never raise for a bad file:
    the first failure moves it aside (logged) and the cache is empty from then on."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None

    @classmethod
    def at(cls, git_dir: Path) -> FactsCache:
        """The cache of the repository whose (common) git directory is `git_dir`."""
        return cls(Path(git_dir) / CACHE_FILE)

    def __enter__(self) -> Self:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a read-only git directory, say
            logger.warning("exception index cache %s cannot be made (%s); indexing without it", self.path, error)
            return self
        try:
            self._db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            self._db.execute("CREATE TABLE IF NOT EXISTS facts (digest TEXT PRIMARY KEY, data TEXT NOT NULL)")
        except sqlite3.DatabaseError as error:
            self._set_aside(error)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None

    def get(self, digests: Iterable[str]) -> dict[str, Any]:
        """The facts stored under each of `digests` that has an entry."""
        wanted = list(digests)
        found: dict[str, Any] = {}
        for start in range(0, len(wanted), _BATCH):
            if self._db is None:
                break
            chunk = wanted[start : start + _BATCH]
            query = f"SELECT digest, data FROM facts WHERE digest IN ({','.join('?' * len(chunk))})"
            try:
                rows = self._db.execute(query, chunk).fetchall()
                found.update((digest, json.loads(data)) for digest, data in rows)
            except (sqlite3.DatabaseError, json.JSONDecodeError) as error:
                self._set_aside(error)
                return {}
        return found

    def put(self, entries: Mapping[str, Any]) -> None:
        """Store `entries` (digest -> JSON-ready facts) in one transaction."""
        if self._db is None or not entries:
            return
        rows = [(digest, json.dumps(facts, separators=(",", ":"))) for digest, facts in entries.items()]
        try:
            with self._db:
                self._db.execute("BEGIN")
                self._db.executemany("INSERT OR REPLACE INTO facts (digest, data) VALUES (?, ?)", rows)
        except sqlite3.DatabaseError as error:
            self._set_aside(error)

    def _set_aside(self, error: Exception) -> None:
        """Close the file and move it to `<name>.unreadable`, so the next review starts a fresh one."""
        if self._db is not None:
            self._db.close()
            self._db = None
        aside = self.path.with_name(self.path.name + ".unreadable")
        try:
            self.path.replace(aside)
        except OSError as move_error:
            logger.warning(
                "exception index cache %s is unusable (%s); not moved aside: %s", self.path, error, move_error
            )
            return
        logger.warning("exception index cache %s is unusable (%s); moved to %s", self.path, error, aside.name)
