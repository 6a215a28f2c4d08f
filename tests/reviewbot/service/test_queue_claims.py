"""Claims on a real database, SQLite and PostgreSQL. Four concurrent claimers (threads, each with
its own engine and connections) drain 200 review jobs of 20 PRs: every job is claimed exactly once,
and two jobs of one PR never run at the same time (they would both write its summary comment). A
running summary writer of any exclusive kind (here the GPU result job) holds back the other
summary writers of its PR, and nothing else."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import func, select

from reviewbot.gpu_dispatch import actions
from reviewbot.service import job_handlers, jobs, plugins, registry
from reviewbot.service.db import Job, make_sessionmaker
from tests.reviewbot.service.postgres import BACKENDS

PRS = 20
PER_PR = 10


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


def test_concurrent_claims_take_each_job_once_and_one_job_per_pr_at_a_time(tmp_path, database_url):
    assert registry.JOBS.get("review") == registry.JobKind(job_handlers.run_review_job, pr_exclusive=True)
    url = database_url or f"sqlite:///{tmp_path / 'queue.sqlite3'}"
    setup = make_sessionmaker(url)
    with setup.begin() as session:
        for index in range(PRS * PER_PR):
            session.add(
                Job(kind="review", repo="octo/queue", pr=index % PRS, head_sha=f"{index:040x}", state="pending")
            )
    lock = threading.Lock()
    running: dict[int, int] = {}  # pr -> job id, between claim and finish
    claims: list[tuple[int, str]] = []
    overlaps: list[tuple[int, int, int]] = []
    errors: list[BaseException] = []

    def claimer(name: str) -> None:
        sessions = make_sessionmaker(url)
        try:
            idle_since = None
            while True:
                job = jobs.claim(sessions, name, lease_s=60, exclusive_kinds=registry.pr_exclusive_kinds())
                if job is None:
                    idle_since = idle_since or time.monotonic()
                    if time.monotonic() - idle_since > 2:
                        return
                    time.sleep(0.01)
                    continue
                idle_since = None
                with lock:
                    claims.append((job.id, name))
                    if job.pr in running:
                        overlaps.append((job.pr, running[job.pr], job.id))
                    running[job.pr] = job.id
                time.sleep(0.002)  # "work"
                with lock:
                    running.pop(job.pr, None)  # before the database says so: no false overlap
                jobs.finish(sessions, job.id, name, "done")
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)
        finally:
            sessions.kw["bind"].dispose()

    threads = [threading.Thread(target=claimer, args=(f"w{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert not overlaps, f"two jobs of one PR ran at once: {overlaps[:5]}"
    claimed = [job_id for job_id, _ in claims]
    assert sorted(claimed) == sorted(set(claimed)) and len(claimed) == PRS * PER_PR
    assert len({name for _, name in claims}) > 1, "the claimers must really have shared the queue"
    with setup() as session:
        states = dict(session.execute(select(Job.state, func.count()).group_by(Job.state)).all())
        attempts = set(session.scalars(select(Job.attempts)))
    assert states == {"done": PRS * PER_PR} and attempts == {1}
    setup.kw["bind"].dispose()


def test_a_running_gpu_result_job_holds_back_a_review_of_its_pr_only(tmp_path, database_url):
    """Every summary writer takes turns with every other one, not only with reviews and GPU jobs:
    while a `gpu-actions-result` job of PR 1 runs, PR 1's review waits and PR 2's runs."""
    plugins.load()  # what every worker does at start: registers the result job kind
    exclusive = registry.pr_exclusive_kinds()
    assert {"review", actions.RESULT_JOB} <= exclusive
    url = database_url or f"sqlite:///{tmp_path / 'turns.sqlite3'}"
    sessions = make_sessionmaker(url)
    with sessions.begin() as session:
        result = Job(
            kind=actions.RESULT_JOB,
            repo="octo/turns",
            pr=1,
            state="running",
            worker_id="w0",
            lease_until=time.time() + 600,
            attempts=1,
        )
        session.add(result)
        session.flush()
        result_id = result.id
        for pr in (1, 2):  # PR 1's review is older: the queue would take it first if it were free
            session.add(Job(kind="review", repo="octo/turns", pr=pr, head_sha=f"{pr:040x}", state="pending"))
        session.add(Job(kind="command", repo="octo/turns", pr=1, state="pending"))

    other_pr = jobs.claim(sessions, "w1", 60, exclusive)
    assert other_pr is not None and (other_pr.kind, other_pr.pr) == ("review", 2)
    command = jobs.claim(sessions, "w1", 60, exclusive)  # not a summary writer: does not wait
    assert command is not None and (command.kind, command.pr) == ("command", 1)
    assert jobs.claim(sessions, "w1", 60, exclusive) is None, "PR 1's review ran beside its result job"
    jobs.finish(sessions, result_id, "w0", "done")
    review = jobs.claim(sessions, "w1", 60, exclusive)
    assert review is not None and (review.kind, review.pr) == ("review", 1)
    sessions.kw["bind"].dispose()
