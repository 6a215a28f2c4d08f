"""Fixtures: the fake GitHub, a PostgreSQL server (once per session, when a module asks for it),
and one `reviewbot serve` (with its worker process) shared by a test module.

Tests sharing a service use their own repository name, so their state does not meet. A module
runs on SQLite; a module that also runs on PostgreSQL overrides `backend` with a fixture
parametrized over `postgres.BACKENDS`: its tests then run once per database.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.service import postgres
from tests.reviewbot.service.harness import Service
from tests.reviewbot.service.scenario import Project

_names = itertools.count(1)


@pytest.fixture(scope="module")
def github():
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture(scope="session")
def postgres_server():
    missing = postgres.available()
    if missing:
        pytest.skip(f"PostgreSQL run not possible here: {missing}")
    server = postgres.PostgresServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def backend() -> str:
    return "sqlite"


@pytest.fixture
def database_url(backend, request) -> str | None:
    """None (the Service's own SQLite file) or a fresh PostgreSQL database for this test."""
    if backend == "sqlite":
        return None
    return request.getfixturevalue("postgres_server").create_database()


@pytest.fixture(scope="module")
def service(github, tmp_path_factory, backend, request):
    url = None if backend == "sqlite" else request.getfixturevalue("postgres_server").create_database()
    svc = Service(tmp_path_factory.mktemp("service"), github, url).start()
    yield svc
    svc.stop()


@pytest.fixture
def project(github, tmp_path: Path, request) -> Project:
    name = f"octo/{request.node.name.replace('[', '-').replace(']', '')[:40]}-{next(_names)}"
    return Project(tmp_path, github, name)
