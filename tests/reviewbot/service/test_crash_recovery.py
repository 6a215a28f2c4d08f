"""Durability: a delivery accepted while no worker runs survives a server kill; a worker killed
mid-job (SIGKILL, after it posted the summary) leaves the job to the next worker, which posts once.

Real processes: `reviewbot serve` without its worker process, and `reviewbot worker`, on SQLite and
on PostgreSQL (two workers claiming concurrently). The delivery is the shared pull_request/opened
example (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

import pytest

from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.postgres import BACKENDS
from tests.reviewbot.service.scenario import Project, bad_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


@pytest.fixture
def split_service(github, tmp_path, database_url):
    svc = Service(tmp_path / "svc", github, database_url, embedded_worker="false")
    (tmp_path / "svc").mkdir()
    yield svc.start()
    svc.stop()


def test_killed_server_and_worker_lose_nothing_and_post_once(split_service, github, tmp_path, backend):
    service = split_service
    project = Project(tmp_path, github, f"octo/crash-{backend}")
    _, head = project.open_pull(1, bad_core())
    response = service.pull_event("opened", project.full_name, 1, wait=False)
    assert response.status_code == 202

    assert service.server is not None
    service.kill(service.server)  # accepted with 202, then the server dies: the delivery must survive
    service.start()
    guid = response.request.headers["X-GitHub-Delivery"]
    assert [r.processed for r in service.query("SELECT processed FROM deliveries WHERE guid = :g", g=guid)] == [0]

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


def test_two_workers_share_the_queue_and_run_each_job_once(split_service, github, tmp_path, backend):
    service = split_service
    project = Project(tmp_path, github, f"octo/shared-{backend}")
    heads = {}
    for number in range(1, 7):
        _, heads[number] = project.open_pull(number, bad_core(f"\n\ndef pr{'x' * number}() -> int:\n    return 0\n"))
        service.pull_event("opened", project.full_name, number, wait=False)
    service.start_worker()
    service.start_worker()
    for number, head in heads.items():
        [job] = service.wait_jobs_settled(project.full_name, number)
        assert (job.head_sha, job.state, job.attempts) == (head, "done", 1)
        summaries = [c for c in github.state.comments_on(project.full_name, number) if SUMMARY_MARKER in c["body"]]
        assert len(summaries) == 1
        assert github.state.count_requests("POST", rf"/repos/{project.full_name}/pulls/{number}/reviews$") == 1
    processed = service.query("SELECT COUNT(*) AS n FROM deliveries WHERE processed AND outcome = 'queued'")
    assert processed[0].n == 6
