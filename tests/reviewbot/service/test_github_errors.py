"""GitHub API failures seen by the worker: 5xx retried, rate limits waited out, POSTs never
blindly repeated, other 4xx failing the job with the response logged.

Deliveries use the shared pull_request/opened example (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

import time

from tests.reviewbot.service.harness import wait_until
from tests.reviewbot.service.scenario import good_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


def _done(service, project, number):
    jobs = service.wait_jobs_settled(project.full_name, number)
    assert [j.state for j in jobs] == ["done"], (jobs, service.log())


def test_502_on_reads_is_retried(service, github, project):
    _, head = project.open_pull(1, good_core())
    github.state.add_fault("GET", rf"/repos/{project.full_name}/pulls/1$", status=502, times=2)
    service.pull_event("opened", project.full_name, 1)
    _done(service, project, 1)
    assert github.state.statuses_for(project.full_name, head)[-1]["state"] == "success"

    def with_worker_counts() -> str | None:  # the worker's counters arrive with its next heartbeat
        text = service.client.get("/metrics").text
        return text if 'reviewbot_jobs_total{kind="review"' in text else None

    metrics = wait_until(with_worker_counts, timeout=10, what="the worker's metrics in /metrics")
    assert 'reviewbot_github_api_retries_total{op="get_pull",reason="502"}' in metrics
    assert 'reviewbot_github_api_calls_total{op="get_pull",result="502"}' in metrics
    assert 'reviewbot_jobs_total{kind="review",state="done"}' in metrics
    assert 'reviewbot_job_duration_seconds_count{kind="review"}' in metrics
    assert 'reviewbot_deliveries_processed_total{event="pull_request",outcome="queued"}' in metrics


def test_a_post_answered_502_is_not_repeated_blindly(service, github, project):
    """GitHub applied the comment but answered 502: the bot re-reads and finds it, no second copy."""
    project.open_pull(2, good_core())
    comments = rf"/repos/{project.full_name}/issues/2/comments$"
    github.state.add_fault("POST", comments, status=502, apply_then_fail=True)
    service.pull_event("opened", project.full_name, 2)
    _done(service, project, 2)
    assert github.state.count_requests("POST", comments) == 1
    assert len([c for c in github.state.comments_on(project.full_name, 2) if SUMMARY_MARKER in c["body"]]) == 1


def test_rate_limits_honour_reset_and_retry_after(service, github, project):
    _, head = project.open_pull(3, good_core())
    statuses = rf"/repos/{project.full_name}/statuses/{head}$"
    wall, monotonic = time.time(), time.monotonic()
    reset_at = int(wall) + 2
    reset = str(reset_at)
    github.state.add_fault(
        "POST",
        statuses,
        status=403,
        times=1,
        headers={"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset},
        body={"message": "API rate limit exceeded"},
    )
    comments = rf"/repos/{project.full_name}/issues/3/comments$"
    github.state.add_fault(
        "GET", comments, status=429, times=1, headers={"Retry-After": "1"}, body={"message": "secondary rate limit"}
    )
    service.pull_event("opened", project.full_name, 3)
    _done(service, project, 3)
    # the fault's own patterns: an earlier test's project can have the same head SHA (same files, same second)
    posts = github.state.requests_matching("POST", statuses)
    reads = github.state.requests_matching("GET", comments)
    assert [r.status for r in posts[:2]] == [403, 201]
    # retried once X-RateLimit-Reset had passed (request times are monotonic); a first request that
    # came after the reset (a loaded machine) may be retried at once
    assert posts[1].at >= monotonic + (reset_at - wall) - 0.05
    assert [r.status for r in reads[:2]] == [429, 200]
    assert reads[1].at - reads[0].at >= 0.9  # waited Retry-After
    assert [s["state"] for s in github.state.statuses_for(project.full_name, head)] == ["pending", "success"]


def test_other_4xx_fails_the_job_with_the_response_logged(service, github, project):
    _, head = project.open_pull(4, good_core())
    github.state.add_fault(
        "POST",
        rf"/repos/{project.full_name}/statuses/{head}$",
        status=422,
        times=1,
        body={"message": "Validation Failed", "errors": [{"code": "custom", "message": "nope"}]},
    )
    service.pull_event("opened", project.full_name, 4)
    [job] = service.wait_jobs_settled(project.full_name, 4)
    assert job.state == "failed" and "422" in job.error and "Validation Failed" in job.error
    assert "GitHub commit_status.create: 422" in service.log()
