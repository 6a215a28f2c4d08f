"""Durability: a delivery accepted while no worker runs survives a server kill; a worker killed
mid-job (SIGKILL, after it posted the summary) leaves the job to the next worker, which posts once.

Real processes: `reviewbot serve` without its embedded worker, and `reviewbot worker`. The
delivery is the shared pull_request/opened example (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

import pytest

from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.scenario import Project, bad_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


@pytest.fixture
def split_service(github, tmp_path):
    svc = Service(tmp_path / "svc", github, embedded_worker="false")
    (tmp_path / "svc").mkdir()
    yield svc.start()
    svc.stop()


def test_killed_server_and_worker_lose_nothing_and_post_once(split_service, github, tmp_path):
    service = split_service
    project = Project(tmp_path, github, "octo/crash")
    _, head = project.open_pull(1, bad_core())
    response = service.pull_event("opened", project.full_name, 1)
    assert response.status_code == 202

    assert service.server is not None
    service.kill(service.server)  # accepted with 202, then the server dies: the job must survive
    service.start()
    assert [j.state for j in service.jobs(project.full_name, 1)] == ["pending"]

    statuses = rf"/repos/{project.full_name}/statuses/{head}$"
    github.state.add_fault("POST", statuses)  # the pending status goes through
    final_status = github.state.add_fault("POST", statuses, status=502, delay=20)  # the final one hangs
    worker = service.start_worker()
    wait_until(lambda: final_status.times == 0, timeout=90, what="the worker to reach its final status")
    assert len([c for c in github.state.comments_on(project.full_name, 1) if SUMMARY_MARKER in c["body"]]) == 1
    service.kill(worker)

    service.start_worker()
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert (job.state, job.attempts) == ("done", 2), service.log("worker.log")
    [summary] = [c for c in github.state.comments_on(project.full_name, 1) if SUMMARY_MARKER in c["body"]]
    assert summary["_edits"] == 0  # the rerun found it by its marker, unchanged: not re-sent
    assert github.state.count_requests("POST", rf"/repos/{project.full_name}/issues/1/comments$") == 1
    assert github.state.count_requests("POST", rf"/repos/{project.full_name}/pulls/1/reviews$") == 1
    assert len(github.state.review_comments_on(project.full_name, 1)) >= 1
    assert github.state.statuses_for(project.full_name, head, "reviewbot/static")[-1]["state"] == "failure"
