"""A push's `synchronize` that arrives after a job of the older head already queued the review of
the new head (the job saw the new head on GitHub): the delivery takes that job over instead of
queueing a second review of the same head. On a real SQLite database, through the event handler
the ingest thread calls."""

from __future__ import annotations

from reviewbot.service import events
from reviewbot.service.db import Job, make_sessionmaker
from reviewbot.service.settings import Settings

REPO = "octo/adopt"
HEAD = "b" * 40


def _payload(action: str) -> dict:
    repo = {"full_name": REPO, "clone_url": f"https://example.invalid/{REPO}.git", "fork": False}
    pull = {
        "head": {"sha": HEAD, "repo": repo},
        "base": {"sha": "a" * 40, "ref": "main", "repo": repo},
        "draft": False,
        "updated_at": "2026-12-04T12:00:00Z",
    }
    return {"action": action, "number": 7, "repository": {"full_name": REPO}, "pull_request": pull}


def _jobs(sessions) -> list[tuple[str, str | None, str]]:
    with sessions.begin() as session:
        rows = session.query(Job).filter(Job.repo == REPO, Job.head_sha == HEAD).order_by(Job.id)
        return [(job.state, job.delivery_id, job.args.get("pushed_at", "")) for job in rows]


def test_a_late_synchronize_takes_over_the_review_a_superseded_job_queued(tmp_path) -> None:
    sessions = make_sessionmaker(f"sqlite:///{tmp_path / 'jobs.sqlite3'}")
    settings = Settings(auto_gpu=False)
    with sessions.begin() as session:  # queued by the older head's job (job_handlers), no delivery
        session.add(Job(kind="review", repo=REPO, pr=7, head_sha=HEAD, args={}, state="done"))
    with sessions.begin() as session:
        assert events.on_pull_request(session, "delivery-1", _payload("synchronize"), settings) == "covered"
    assert _jobs(sessions) == [("done", "delivery-1", "2026-12-04T12:00:00Z")]
    # near misses: another synchronize of that head (the job has a delivery now), and a reopened PR
    for delivery, action in (("delivery-2", "synchronize"), ("delivery-3", "reopened")):
        with sessions.begin() as session:
            assert events.on_pull_request(session, delivery, _payload(action), settings) == "queued"
    assert [delivery for _, delivery, _ in _jobs(sessions)] == ["delivery-1", "delivery-2", "delivery-3"]
