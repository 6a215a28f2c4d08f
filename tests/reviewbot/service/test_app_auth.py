"""Authenticated as a GitHub App: installation tokens from the App's JWT, check runs instead of
commit statuses. The delivery is the shared pull_request/opened example with an `installation`."""

from __future__ import annotations

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.reviewbot.service.harness import Service
from tests.reviewbot.service.scenario import Project, bad_core


@pytest.fixture
def app_service(github, tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "app.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
        )
    )
    (tmp_path / "svc").mkdir()
    svc = Service(tmp_path / "svc", github, app_id="42", app_private_key_file=str(pem))
    svc.env.pop("REVIEWBOT_GITHUB_TOKEN")
    yield svc.start()
    svc.stop()


def test_app_reports_check_runs_with_an_installation_token(app_service, github, tmp_path):
    project = Project(tmp_path, github, "octo/as-app")
    _, head = project.open_pull(1, bad_core())
    app_service.pull_event("opened", project.full_name, 1, installation_id=77)
    [job] = app_service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "done", app_service.log()
    assert github.state.installation_tokens, "the bot must exchange its JWT for an installation token"
    runs = [r for r in github.state.check_runs.values() if r["_repo"] == project.full_name]
    assert [(r["name"], r["head_sha"], r["status"], r["conclusion"]) for r in runs] == [
        ("reviewbot/static", head, "completed", "failure")
    ]
    assert github.state.statuses_for(project.full_name, head) == []
    assert len([c for c in github.state.comments_on(project.full_name, 1) if "reviewbot:summary" in c["body"]]) == 1

    # A review that cannot run (an invalid .reviewbot.yml) must not pass a required check: GitHub
    # counts a `neutral` conclusion as passing.
    _, broken = project.open_pull(2, {**bad_core(), ".reviewbot.yml": "suites: 5\n"})
    app_service.pull_event("opened", project.full_name, 2, installation_id=77)
    [job] = app_service.wait_jobs_settled(project.full_name, 2)
    assert job.state == "failed", app_service.log()
    [run] = [r for r in github.state.check_runs.values() if r["_repo"] == project.full_name and r["head_sha"] == broken]
    assert (run["status"], run["conclusion"]) == ("completed", "failure"), run
    assert run["output"]["title"].startswith(".reviewbot.yml: suites"), run
