"""Pull request deliveries against a real `reviewbot serve`, the real review engine and the fake GitHub.

Deliveries are built from the shared GitHub webhook examples (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

from tests.reviewbot.service.harness import wait_until
from tests.reviewbot.service.scenario import bad_core, good_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"


def summaries(github, project, number):
    return [c for c in github.state.comments_on(project.full_name, number) if SUMMARY_MARKER in c["body"]]


def final_status(github, project, sha, context="reviewbot/static"):
    states = [s["state"] for s in github.state.statuses_for(project.full_name, sha, context)]
    return states[-1] if states and states[-1] != "pending" else None


def test_opened_posts_summary_inline_on_diff_lines_and_failing_status(service, github, project):
    """Uses the shared pull_request/opened example. The P0 finding sits on added lines; GitHub (the
    fake) refuses review comments outside the diff, and the bot must not try."""
    pull, head = project.open_pull(1, bad_core())
    added = set(range(11, 18))  # the lines of BAD_FUNCTION in the head's pkg/core.py
    pull["_diff_lines"] = {"pkg/core.py": set(range(8, 18)), "tests_load/test_load.py": set(range(1, 9))}
    service.pull_event("opened", project.full_name, 1)
    jobs = service.wait_jobs_settled(project.full_name, 1)
    assert [j.state for j in jobs] == ["done"], (jobs, service.log())
    assert final_status(github, project, head) == "failure"
    [summary] = summaries(github, project, 1)
    assert head[:12] in summary["body"]
    inline = github.state.review_comments_on(project.full_name, 1)
    assert inline, "the broad except and the failing test are on diff lines and must be commented inline"
    on_core = [c for c in inline if c["path"] == "pkg/core.py"]
    assert on_core and all(c["line"] in added and c["side"] == "RIGHT" for c in on_core)
    assert all("P0-BLOCKER" not in c["body"] for c in on_core)  # a pattern alone does not block
    # the injection experiment ran under the service's umask 077: the injected file stayed readable
    # by the sandbox's uid (it once failed the suite's collection with a PermissionError)
    assert "PermissionError" not in summary["body"], summary["body"]
    assert "the tests reaching it already fail without the injection" in summary["body"]  # it ran, and reached it
    # the blocker is the failing test, anchored on its own line in the diff
    assert any(c["path"] == "tests_load/test_load.py" and "P0-BLOCKER" in c["body"] for c in inline)
    assert len(inline) <= 30


def test_summary_is_edited_in_place_across_pushes_and_not_resent_unchanged(service, github, project):
    """Uses the shared pull_request/opened and synchronize examples."""
    project.open_pull(2, bad_core())
    service.pull_event("opened", project.full_name, 2)
    service.wait_jobs_settled(project.full_name, 2)
    [first] = summaries(github, project, 2)
    second_head = project.new_head(2, {**good_core(), "tests_load/test_load.py": "def test_nothing():\n    pass\n"})
    service.pull_event("synchronize", project.full_name, 2)
    wait_until(lambda: final_status(github, project, second_head), what="status of the second push")
    [summary] = summaries(github, project, 2)
    assert summary["id"] == first["id"] and summary["_edits"] == 1
    assert second_head[:12] in summary["body"]
    assert final_status(github, project, second_head) == "success"
    # The same head again (/review): the same text, so no PATCH is sent.
    patches = github.state.count_requests("PATCH", rf"/repos/{project.full_name}/issues/comments/")
    response = service.comment_event(project.full_name, 2, "/review", "someone")
    assert response.status_code == 202
    wait_until(
        lambda: (
            len([j for j in service.jobs(project.full_name, 2) if j.kind == "review"]) == 3
            and service.wait_jobs_settled(project.full_name, 2)
        ),
        what="the /review job",
    )
    assert github.state.count_requests("PATCH", rf"/repos/{project.full_name}/issues/comments/") == patches
    assert len(summaries(github, project, 2)) == 1


def test_draft_waits_for_ready_for_review(service, github, project):
    """Uses the shared pull_request/opened and ready_for_review examples."""
    _, head = project.open_pull(3, good_core(), draft=True)
    response = service.pull_event("opened", project.full_name, 3)
    assert service.outcome(response) == "draft"
    assert service.jobs(project.full_name, 3) == []
    github.state.pulls[(project.full_name, 3)]["draft"] = False
    service.pull_event("ready_for_review", project.full_name, 3)
    service.wait_jobs_settled(project.full_name, 3)
    assert final_status(github, project, head) == "success"


def test_malformed_repo_config_fails_the_job_with_an_error_status_and_the_worker_goes_on(service, github, project):
    """Uses the shared pull_request/opened example. A PR's broken `.reviewbot.yml` is user input:
    the job fails with the reason in the status, and the next PR is reviewed as usual."""
    _, broken = project.open_pull(4, {".reviewbot.yml": "suites: [unclosed\n"})
    service.pull_event("opened", project.full_name, 4)
    [job] = service.wait_jobs_settled(project.full_name, 4)
    assert job.state == "failed" and ".reviewbot.yml" in service.log()
    [error] = [s for s in github.state.statuses_for(project.full_name, broken) if s["state"] == "error"]
    assert error["description"].startswith(".reviewbot.yml:")
    _, fine = project.open_pull(5, good_core())
    service.pull_event("opened", project.full_name, 5)
    service.wait_jobs_settled(project.full_name, 5)
    assert final_status(github, project, fine) == "success"
    health = service.client.get("/healthz").json()
    assert health["ok"] is True and [worker["state"] for worker in health["workers"]] == ["running"], health


def test_a_pr_cannot_lower_the_severity_of_its_own_findings(service, github, project):
    """`severity_overrides` come from the merge base: the PR's own `.reviewbot.yml` making the failing
    test a P4 leaves its review blocking (it applies once merged)."""
    files = bad_core()
    files[".reviewbot.yml"] += "severity_overrides:\n  suite-failure: P4\n  broad-except: P4\n"
    _, head = project.open_pull(7, files)
    service.pull_event("opened", project.full_name, 7)
    assert [j.state for j in service.wait_jobs_settled(project.full_name, 7)] == ["done"], service.log()
    assert final_status(github, project, head) == "failure"
    [summary] = summaries(github, project, 7)
    assert "`P0-BLOCKER` 1" in summary["body"], summary["body"]
