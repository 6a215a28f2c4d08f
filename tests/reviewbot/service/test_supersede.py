"""A newer head supersedes pending and running jobs of the PR; closing cancels them. Stopped jobs
post nothing. Deliveries use the shared pull_request opened/synchronize/closed examples."""

from __future__ import annotations

import pytest

from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.scenario import bad_core, good_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


@pytest.fixture(scope="module")
def service(github, tmp_path_factory):
    """This module's service keeps PyGithub's default pacing (0.25 s a request, 1 s a write): the
    burst test assumes that a middle head's job has not written its pending status before the
    next push is ingested, which without the pacing failed about once in ten runs (a job that
    starts before the next push is known writes its status; that is the service working). The
    other race it showed, the last head reviewed twice, is fixed (`events._queue_for_delivery`)."""
    svc = Service(
        tmp_path_factory.mktemp("service"),
        github,
        github_seconds_between_requests=0.25,
        github_seconds_between_writes=1,
    ).start()
    yield svc
    svc.stop()


def _hold_first_status(github, project, sha, seconds=3.0):
    """The job's first write (its pending status) hangs `seconds`: the job is running meanwhile."""
    return github.state.add_fault("POST", rf"/repos/{project.full_name}/statuses/{sha}$", delay=seconds)


def test_synchronize_supersedes_the_running_job_which_posts_nothing(service, github, project):
    _, first = project.open_pull(1, bad_core())
    held = _hold_first_status(github, project, first)
    service.pull_event("opened", project.full_name, 1)
    wait_until(lambda: held.times == 0, what="the first job to start writing")
    second = project.new_head(1, good_core())
    service.pull_event("synchronize", project.full_name, 1)
    jobs = service.wait_jobs_settled(project.full_name, 1)
    assert [(j.head_sha, j.state) for j in jobs] == [(first, "superseded"), (second, "done")], service.log()
    assert [s["state"] for s in github.state.statuses_for(project.full_name, first)] == ["pending"]
    assert github.state.review_comments_on(project.full_name, 1) == []  # the P0 of the first head: never posted
    [summary] = [c for c in github.state.comments_on(project.full_name, 1) if SUMMARY_MARKER in c["body"]]
    assert second[:12] in summary["body"] and first[:12] not in summary["body"] and summary["_edits"] == 0


def test_synchronize_supersedes_pending_jobs(service, github, project):
    """A burst of pushes: only the last head is reviewed."""
    _, first = project.open_pull(2, good_core())
    service.pull_event("opened", project.full_name, 2)
    heads = [first]
    for i in range(3):
        heads.append(project.new_head(2, good_core(f"\n\ndef f{i}() -> int:\n    return {i}\n")))
        service.pull_event("synchronize", project.full_name, 2)
    jobs = service.wait_jobs_settled(project.full_name, 2)
    assert [j.state for j in jobs if j.head_sha == heads[-1]] == ["done"]
    assert all(j.state == "superseded" for j in jobs if j.head_sha != heads[-1])
    assert github.state.statuses_for(project.full_name, heads[-1], "reviewbot/static")[-1]["state"] == "success"
    for stale in heads[1:-1]:
        assert github.state.statuses_for(project.full_name, stale) == []


def test_closed_cancels_the_running_job(service, github, project):
    _, head = project.open_pull(3, bad_core())
    held = _hold_first_status(github, project, head)
    service.pull_event("opened", project.full_name, 3)
    wait_until(lambda: held.times == 0, what="the job to start writing")
    github.state.pulls[(project.full_name, 3)]["state"] = "closed"
    response = service.pull_event("closed", project.full_name, 3)
    assert service.outcome(response) == "cancelled 1"
    jobs = service.wait_jobs_settled(project.full_name, 3)
    assert [j.state for j in jobs] == ["cancelled"]
    assert github.state.comments_on(project.full_name, 3) == []
    assert [s["state"] for s in github.state.statuses_for(project.full_name, head)] == ["pending"]
