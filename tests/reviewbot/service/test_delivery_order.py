"""GitHub does not order deliveries: whatever order the pushes of a PR are delivered in, its current
head ends reviewed, with a final status and the summary naming it. Real `reviewbot serve`, the fake
GitHub, the shared pull_request opened/synchronize examples. The worker runs two jobs at a time
(`worker_threads: 2`), so a late delivery's job can run while the current head's job, told to stop,
is still running."""

from __future__ import annotations

import pytest

from tests.reviewbot.fake_github.webhooks import pull_request_event
from tests.reviewbot.service.harness import Service, wait_until
from tests.reviewbot.service.scenario import good_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


@pytest.fixture(scope="module")
def service(github, tmp_path_factory):
    svc = Service(tmp_path_factory.mktemp("service"), github, worker_threads=2).start()
    yield svc
    svc.stop()


def _synchronize(service, github, project, number, head):
    """The synchronize delivery of the push that made `head` the PR's head."""
    pull = github.state.pulls[(project.full_name, number)]
    payload = pull_request_event("synchronize", {**pull, "head": {**pull["head"], "sha": head}}, github.origin)
    response = service.deliver("pull_request", payload)
    assert response.status_code == 202, response.text
    return service.outcome(response)


def _states(github, project, sha):
    return [s["state"] for s in github.state.statuses_for(project.full_name, sha, "reviewbot/static")]


def test_the_current_head_ends_reviewed_when_an_older_push_is_delivered_last(service, github, project):
    _, first = project.open_pull(1, good_core())
    held = github.state.add_fault("POST", rf"/repos/{project.full_name}/statuses/{first}$", delay=3)
    service.pull_event("opened", project.full_name, 1)
    wait_until(lambda: held.times == 0, what="the first review to start writing")
    middle = project.new_head(1, good_core("\n\ndef m() -> int:\n    return 1\n"))
    last = project.new_head(1, good_core("\n\ndef m() -> int:\n    return 2\n"))
    # While the first review runs: the last push is delivered first, the middle one late. The late
    # delivery supersedes the last head's job, as any newer delivery would.
    assert _synchronize(service, github, project, 1, last) == "queued"
    assert _synchronize(service, github, project, 1, middle) == "queued"

    def settled_with_last_done():
        rows = service.wait_jobs_settled(project.full_name, 1)
        return rows if any(r.head_sha == last and r.state == "done" for r in rows) else None

    jobs = wait_until(settled_with_last_done, timeout=120, what="a finished review of the current head")
    assert [(j.head_sha, j.state) for j in jobs] == [
        (first, "superseded"),
        (last, "superseded"),
        (middle, "superseded"),
        (last, "done"),
    ], service.log()
    assert "queued a review of the current head" in service.log()
    assert _states(github, project, last) == ["pending", "success"]
    assert _states(github, project, middle) == []
    [summary] = [c for c in github.state.comments_on(project.full_name, 1) if SUMMARY_MARKER in c["body"]]
    assert f"review of `{last[:12]}`" in summary["body"]
    assert middle[:12] not in summary["body"] and first[:12] not in summary["body"]


def test_the_current_head_ends_reviewed_when_a_late_push_stops_its_running_review(service, github, project):
    """The late delivery of an older push arrives while the current head's review runs: that review
    is told to stop (it ends without posting), and the late push's job, finding the head moved on,
    must not count the stopping review as the current head's."""
    _, first = project.open_pull(2, good_core())
    service.pull_event("opened", project.full_name, 2)
    service.wait_jobs_settled(project.full_name, 2)
    middle = project.new_head(2, good_core("\n\ndef m() -> int:\n    return 1\n"))
    last = project.new_head(2, good_core("\n\ndef m() -> int:\n    return 2\n"))
    held = github.state.add_fault("POST", rf"/repos/{project.full_name}/statuses/{last}$", delay=4)
    assert _synchronize(service, github, project, 2, last) == "queued"
    wait_until(lambda: held.times == 0, what="the current head's review to start writing")
    assert _synchronize(service, github, project, 2, middle) == "queued"

    def settled_with_last_done():
        rows = service.wait_jobs_settled(project.full_name, 2)
        return rows if any(r.head_sha == last and r.state == "done" for r in rows) else None

    jobs = wait_until(settled_with_last_done, timeout=120, what="a finished review of the current head")
    assert [(j.head_sha, j.state) for j in jobs] == [
        (first, "done"),
        (last, "superseded"),
        (middle, "superseded"),
        (last, "done"),
    ], service.log()
    assert _states(github, project, last) == ["pending", "success"]
    [summary] = [c for c in github.state.comments_on(project.full_name, 2) if SUMMARY_MARKER in c["body"]]
    assert f"review of `{last[:12]}`" in summary["body"]
