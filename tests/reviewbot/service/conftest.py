"""Fixtures: the fake GitHub and one `reviewbot serve` (embedded worker) shared by a test module.

Tests sharing a service use their own repository name, so their state does not meet.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.reviewbot.fake_github import FakeGitHub
from tests.reviewbot.service.harness import Service
from tests.reviewbot.service.scenario import Project

_names = itertools.count(1)


@pytest.fixture(scope="module")
def github():
    with FakeGitHub() as fake:
        yield fake


@pytest.fixture(scope="module")
def service(github, tmp_path_factory):
    svc = Service(tmp_path_factory.mktemp("service"), github).start()
    yield svc
    svc.stop()


@pytest.fixture
def project(github, tmp_path: Path, request) -> Project:
    name = f"octo/{request.node.name.replace('[', '-').replace(']', '')[:40]}-{next(_names)}"
    return Project(tmp_path, github, name)
