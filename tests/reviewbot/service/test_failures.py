"""One bad input fails one job, never the worker: a real `reviewbot serve` and the fake GitHub.

- A poison PR (GitHub answers its pull request with a body the bot cannot use): its job is retried
  with backoff, then fails; the PR gets a summary saying the review could not run (no internals)
  and an `error` status; another PR opened meanwhile is reviewed, and the service stays healthy.
- A PR with Python files that are not UTF-8 is reviewed like any other, with a `not-utf8` finding,
  and one with files CPython cannot parse at all is reviewed without them.
"""

from __future__ import annotations

import itertools

import pytest

from tests.reviewbot.service.harness import Service
from tests.reviewbot.service.scenario import Project, bad_core, good_core

SUMMARY_MARKER = "<!-- reviewbot:summary -->"
BACKOFF = 0.5
ATTEMPTS = 3
REVIEW_BUDGET = 6


@pytest.fixture(scope="module")
def retrying_service(github, tmp_path_factory):
    svc = Service(
        tmp_path_factory.mktemp("retrying"),
        github,
        job_max_attempts=ATTEMPTS,
        job_retry_backoff_seconds=BACKOFF,
        review_timeout_seconds=REVIEW_BUDGET,
    ).start()
    yield svc
    svc.stop()


def _summaries(github, project, number):
    return [c["body"] for c in github.state.comments_on(project.full_name, number) if SUMMARY_MARKER in c["body"]]


def _static_states(github, project, sha):
    return [s["state"] for s in github.state.statuses_for(project.full_name, sha, "reviewbot/static")]


def test_a_poison_pr_fails_alone_and_says_so(retrying_service, github, tmp_path):
    service = retrying_service
    project = Project(tmp_path, github, "octo/poison")
    _, poison_head = project.open_pull(1, good_core())
    pull_path = rf"/repos/{project.full_name}/pulls/1$"
    github.state.add_fault("GET", pull_path, status=200, body={"number": 1, "state": "open", "head": None}, times=50)
    service.pull_event("opened", project.full_name, 1)
    _, other_head = project.open_pull(2, good_core("\n\ndef other() -> int:\n    return 2\n"))
    service.pull_event("opened", project.full_name, 2)

    [other] = service.wait_jobs_settled(project.full_name, 2)
    assert other.state == "done", service.log()
    assert _static_states(github, project, other_head)[-1] == "success"

    [job] = service.wait_jobs_settled(project.full_name, 1, timeout=60)
    assert (job.state, job.attempts) == ("failed", ATTEMPTS), service.log()
    assert "AttributeError" in job.error  # the internals stay in the database and the log
    reads = [r.at for r in github.state.requests_matching("GET", pull_path)]
    assert len(reads) == ATTEMPTS
    gaps = [later - earlier for earlier, later in itertools.pairwise(reads)]
    assert gaps[0] >= BACKOFF * 0.9 and gaps[1] >= 2 * BACKOFF * 0.9, gaps  # backoff, doubling

    [summary] = _summaries(github, project, 1)
    assert f"review of `{poison_head[:12]}`" in summary
    assert f"**The review of `{poison_head[:12]}` could not run:** the bot hit an internal error" in summary
    assert f"logged on its worker as job {job.id}" in summary and f"tried {ATTEMPTS} time(s)" in summary
    assert "AttributeError" not in summary and "Traceback" not in summary and "NoneType" not in summary
    assert _static_states(github, project, poison_head) == ["error"]  # a final state, never pending
    assert 'reviewbot_jobs_total{kind="review",state="retry"} 2' in service.client.get("/metrics").text

    health = service.client.get("/healthz")
    assert health.status_code == 200 and health.json()["ok"], health.text
    assert [worker["state"] for worker in health.json()["workers"]] == ["running"], health.text
    _, later_head = project.open_pull(3, good_core("\n\ndef later() -> int:\n    return 3\n"))
    service.pull_event("opened", project.full_name, 3)
    assert [j.state for j in service.wait_jobs_settled(project.full_name, 3)] == ["done"]
    assert _static_states(github, project, later_head)[-1] == "success"


def test_non_utf8_sources_are_reviewed(service, github, tmp_path):
    """Also beside files CPython cannot parse: nested past its parser's stack (MemoryError), an
    expression too deep (RecursionError), a NUL byte past git's binary test (ValueError on 3.11)."""
    project = Project(tmp_path, github, "octo/latin1")
    latin = b'"""Helpers."""\nNAME = "caf\xe9"\n\n\ndef name() -> str:\n    return NAME\n'
    unparsable = {
        "pkg/deep_unary.py": "Y = " + "-" * 100_000 + "1\n",
        "pkg/deep_sum.py": "Y = " + "+".join(["1"] * 200_000) + "\n",
        "pkg/late_nul.py": "X = 1\n" + "# padding\n" * 1000 + "Z = '\x00'\n",
    }
    _, head = project.open_pull(1, {"pkg/latin.py": latin, **unparsable, **good_core()})
    service.pull_event("opened", project.full_name, 1)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "done", (job, service.log())
    [summary] = _summaries(github, project, 1)
    assert "`not-utf8`" in summary and "this file is not UTF-8 (first invalid byte on line 2)" in summary
    assert _static_states(github, project, head) == ["pending", "success"]


def test_a_failure_message_longer_than_a_github_comment_still_gets_its_review(service, github, tmp_path):
    """A suite's failure text is the PR author's: 100,000 characters on one line would make the
    summary and the inline comment longer than GitHub takes (65,536 characters, 422 past it)."""
    project = Project(tmp_path, github, "octo/long-failure")
    files = bad_core()
    files["tests_load/test_load.py"] += "\n\ndef test_loud():\n    assert False, 'x' * 100_000\n"
    _, head = project.open_pull(1, files)
    service.pull_event("opened", project.full_name, 1)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "done", (job, service.log())
    [summary] = _summaries(github, project, 1)
    assert len(summary) <= 65536 and "test_loud" in summary
    assert "longer than GitHub takes" in summary
    inline = [c["body"] for c in github.state.review_comments_on(project.full_name, 1)]
    assert [b for b in inline if "test_loud" in b] and all(len(b) <= 65536 for b in inline), inline
    assert _static_states(github, project, head) == ["pending", "failure"]


def test_a_suite_that_never_ends_is_cut_at_the_review_budget(retrying_service, github, tmp_path):
    """The PR's own `.reviewbot.yml` gives its suite a day; the review's budget ends it, and the PR
    opened next is reviewed by the same (single-threaded) worker."""
    service = retrying_service
    project = Project(tmp_path, github, "octo/endless")
    endless = {
        ".reviewbot.yml": "suites:\n  endless:\n    command: python -c 'import time; time.sleep(86400)'\n"
        "    gpus: 0\n    timeout_s: 86400\n",
    }
    _, head = project.open_pull(1, {**good_core(), **endless})
    service.pull_event("opened", project.full_name, 1)
    _, other_head = project.open_pull(2, good_core("\n\ndef other() -> int:\n    return 2\n"))
    service.pull_event("opened", project.full_name, 2)
    [job] = service.wait_jobs_settled(project.full_name, 1, timeout=60)
    assert job.state == "done", service.log()
    [summary] = _summaries(github, project, 1)
    assert "| `endless` | timeout |" in summary, summary
    assert _static_states(github, project, head)[-1] in ("success", "failure")
    [other] = service.wait_jobs_settled(project.full_name, 2, timeout=60)
    assert other.state == "done" and _static_states(github, project, other_head)[-1] == "success"
