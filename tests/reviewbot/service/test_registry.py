"""The job-kind registry: which kinds take turns per PR comes from each kind's registration (the
queue has no list of its own), and a kind registered twice is refused."""

from __future__ import annotations

import pytest

from reviewbot.gpu_dispatch import actions
from reviewbot.service import job_handlers, jobs, plugins, registry
from reviewbot.service.db import Job, make_sessionmaker

# Every job kind the service knows, by whether it writes the PR's summary comment. A new kind
# fails the first test until it is placed here, i.e. until someone decided whether it is exclusive.
SUMMARY_WRITERS = {"review", "gpu", actions.RESULT_JOB}
OTHER_KINDS = {"command", actions.DEADLINE_JOB}


def test_the_exclusive_kinds_are_the_summary_writers_and_every_kind_is_accounted_for():
    plugins.load()  # what every worker does at start
    assert set(registry.JOBS) == SUMMARY_WRITERS | OTHER_KINDS
    assert registry.pr_exclusive_kinds() == SUMMARY_WRITERS
    assert not hasattr(jobs, "PR_EXCLUSIVE_KINDS"), "the queue must not keep a list of its own"


def test_a_kind_registered_twice_is_refused_and_the_first_stays():
    def impostor(ctx) -> str:
        return "done"

    with pytest.raises(ValueError, match="job kind 'review' is registered twice"):
        registry.register_job("review")(impostor)
    with pytest.raises(ValueError, match="registered twice"):
        registry.register_job(actions.RESULT_JOB, pr_exclusive=False)(impostor)
    assert registry.JOBS.get("review") == registry.JobKind(job_handlers.run_review_job, pr_exclusive=True)
    assert registry.pr_exclusive_kinds() == SUMMARY_WRITERS


def test_the_queue_holds_a_registered_exclusive_kind_back_while_the_prs_review_runs(tmp_path):
    sessions = make_sessionmaker(f"sqlite:///{tmp_path / 'queue.sqlite3'}")
    with sessions.begin() as session:
        for kind in ("review", actions.RESULT_JOB, actions.DEADLINE_JOB):
            session.add(Job(kind=kind, repo="octo/turns", pr=1, head_sha="a" * 40, state="pending"))
    exclusive = registry.pr_exclusive_kinds()

    review = jobs.claim(sessions, "w1", 60, exclusive)
    assert review is not None and review.kind == "review"
    # the result job writes the summary: it waits; the deadline job does not hold the PR and runs
    deadline = jobs.claim(sessions, "w2", 60, exclusive)
    assert deadline is not None and deadline.kind == actions.DEADLINE_JOB
    assert jobs.claim(sessions, "w2", 60, exclusive) is None
    jobs.finish(sessions, review.id, "w1", "done")
    result = jobs.claim(sessions, "w2", 60, exclusive)
    assert result is not None and result.kind == actions.RESULT_JOB
    sessions.kw["bind"].dispose()
