"""A real PostgreSQL server for the service tests: initdb in a temporary directory, run as the
unprivileged user `nobody` (PostgreSQL refuses to run as root), listening on a Unix socket only
(no TCP port), fsync off (test data), stopped and removed at the end. Each test module that asks
for it gets a database of its own.

Needs PostgreSQL's server binaries (`/usr/lib/postgresql/<version>/bin`, Debian's
postgresql package) and the psycopg driver (the `bot` extra); `available()` says which is missing.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path

BACKENDS = ("sqlite", "postgresql")  # what a module parametrizes its `backend` fixture over
USER = "nobody"
SUPERUSER = "reviewbot"


def _bin_dir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


def available() -> str | None:
    """None when a server can be started here, else why not."""
    if _bin_dir() is None:
        return "PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "the psycopg driver is not installed (pip install 'magi-compiler[bot]')"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(USER)
        except KeyError:
            return f"no user {USER!r} to run PostgreSQL as"
    return None


class PostgresServer:
    def __init__(self) -> None:
        bin_dir = _bin_dir()
        assert bin_dir is not None, available()
        self.bin = bin_dir
        # Not under pytest's tmp_path: its parents are private to root, and the server runs as nobody.
        self.dir = Path(tempfile.mkdtemp(prefix="reviewbot-pg-"))
        self.data = self.dir / "data"
        self._names = itertools.count(1)

    def _as_server_user(self, *command: str) -> None:
        prefix = ["runuser", "-u", USER, "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, timeout=120)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            entry = pwd.getpwnam(USER)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
        os.chmod(self.dir, 0o700)
        self._as_server_user(
            str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        options = f"-k {self.dir} -c listen_addresses='' -c fsync=off -c synchronous_commit=off -c max_connections=200"
        self._as_server_user(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.dir / "server.log"),
            "-o",
            options,
            "-w",
            "start",
        )
        return self

    def create_database(self, prefix: str = "t") -> str:
        """A new empty database; its SQLAlchemy URL."""
        import psycopg

        name = f"{prefix}_{next(self._names)}"
        with psycopg.connect(host=str(self.dir), user=SUPERUSER, dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{SUPERUSER}@/{name}?host={self.dir}"

    def stop(self) -> None:
        try:
            self._as_server_user(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)
