"""Signed deliveries of every shape against a real `reviewbot serve` and its worker process, on
SQLite and on PostgreSQL: never a 5xx, never a dead ingest loop.

A hypothesis fuzz test mutates the shared pull_request/issue_comment examples (fields replaced by
JSON of other types, removed) and sends raw bodies of awkward shapes (UTF-16/32, invalid UTF-8,
deep nesting, large arrays, huge numbers, NaN, surrogates, NUL, non-objects, odd headers). Every
answer must be 2xx/4xx; afterwards every accepted delivery is ingested without a failure, the
worker process was never restarted, and a real pull request is still reviewed end to end.
The ingest error boundary itself is checked with a handler that raises, on a real database.
"""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from reviewbot.service import events, ingest, registry
from reviewbot.service.db import Delivery, Job, make_sessionmaker, pack_body
from reviewbot.service.settings import load as load_settings
from tests.reviewbot.fake_github.webhooks import load_payload
from tests.reviewbot.service.harness import wait_until
from tests.reviewbot.service.postgres import BACKENDS
from tests.reviewbot.service.scenario import good_core

EXAMPLES = 120


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


# The bases: published examples about Codertocat/Hello-World, a repository the fake GitHub does not
# have, so jobs from accepted mutants fail fast at their first API call instead of reviewing.
PR_BASE = load_payload("pull_request", "synchronize.payload")
COMMENT_BASE = load_payload("issue_comment", "created.payload")
COMMENT_BASE["issue"]["pull_request"] = {"url": "https://example.invalid/pulls/1"}
COMMENT_BASE["comment"]["body"] = "/review"

PATHS = {
    "pull_request": [path for path, _, _ in events.PULL_REQUEST_FIELDS]
    + [("pull_request", "head"), ("pull_request", "base"), ("pull_request", "base", "repo"), ("repository",)],
    "issue_comment": [path for path, _, _ in events.ISSUE_COMMENT_FIELDS]
    + [("issue",), ("comment",), ("comment", "user"), ("repository",)],
}

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30)
    | st.sampled_from(["", "opened", "synchronize", "created", "a" * 300, "\x00", "octo/x", "0" * 40]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@st.composite
def mutants(draw: st.DrawFn) -> tuple[str, bytes]:
    event = draw(st.sampled_from(["pull_request", "issue_comment"]))
    payload = copy.deepcopy(PR_BASE if event == "pull_request" else COMMENT_BASE)
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(PATHS[event]))
        parent: Any = payload
        for key in path[:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if not isinstance(parent, dict):
            continue
        if draw(st.booleans()):
            parent.pop(path[-1], None)
        else:
            parent[path[-1]] = draw(json_values)
    return event, json.dumps(payload).encode()


VALID_COMMENT = json.dumps(COMMENT_BASE)
RAW_BODIES = [
    json.dumps(PR_BASE).encode("utf-16"),
    json.dumps(PR_BASE).encode("utf-32"),
    json.dumps(COMMENT_BASE).encode("utf-16-le"),
    b"\xef\xbb\xbf" + VALID_COMMENT.encode(),
    VALID_COMMENT.encode()[:50] + b"\xff\xfe\x80" + VALID_COMMENT.encode()[50:],
    json.dumps({**COMMENT_BASE, "comment": {**COMMENT_BASE["comment"], "body": "caf\u00e9"}}).encode("latin-1"),
    b"[" * 100_000 + b"]" * 100_000,
    b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
    b"[" + b"0," * 1_000_000 + b"0]",
    b'{"action": ' + b"9" * 5000 + b"}",
    b'{"action": NaN, "number": Infinity}',
    b'{"action": "\\ud800"}',
    VALID_COMMENT.replace('"/review"', '"/review\\u0000\\ud83d"').encode(),
    VALID_COMMENT.replace('"/review"', '"/review\\ud800"').encode(),
    b"",
    b"   ",
    b"null",
    b"[]",
    b'"just a string"',
    b"12",
    b'{"action": "created", "action": 5}',
]
ODD_HEADERS = [
    {},
    {"X-GitHub-Delivery": "d" * 65},
    {"X-GitHub-Delivery": "has space"},
    {"X-GitHub-Event": "Pull-Request"},
    {"X-GitHub-Event": "x" * 100},
    {"X-GitHub-Event": "workflow_run"},
    {"X-GitHub-Event": "some_event_nobody_sends"},
]


def assert_not_5xx(response, what: str) -> None:
    assert response.status_code in (200, 202, 400, 401, 413), (what, response.status_code, response.text)


def test_signed_payloads_of_any_shape_never_get_a_5xx_and_the_service_lives_on(service, github, project):
    started = time.time()
    accepted: list[str] = []

    def send(event: str, body: bytes, headers: dict[str, str], what: str) -> None:
        delivery = str(uuid.uuid4())
        merged = {"X-GitHub-Delivery": delivery, **headers}
        response = service.deliver(event, body, delivery=merged["X-GitHub-Delivery"], headers=headers)
        assert_not_5xx(response, what)
        if response.status_code == 202 and response.json()["outcome"] == "accepted":
            accepted.append(merged["X-GitHub-Delivery"])

    for index, body in enumerate(RAW_BODIES):
        for event in ("pull_request", "issue_comment", "ping"):
            send(event, body, {}, f"raw body {index} as {event}")
    for index, headers in enumerate(ODD_HEADERS):
        event = headers.get("X-GitHub-Event", "issue_comment")
        send(event, VALID_COMMENT.encode(), headers, f"headers {index}")

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(mutants())
    def fuzz(mutant: tuple[str, bytes]) -> None:
        send(mutant[0], mutant[1], {}, f"mutant {mutant[1][:300]!r}")

    fuzz()
    assert accepted, "some shapes are valid and must be accepted"

    def all_ingested() -> list[Any] | None:
        rows = service.query("SELECT guid, outcome, processed FROM deliveries WHERE received_at >= :t", t=started)
        return rows if all(row.processed for row in rows) else None

    rows = wait_until(all_ingested, timeout=60, what="every accepted delivery to be ingested")
    failed = [(row.guid, row.outcome) for row in rows if row.outcome.startswith("failed")]
    assert not failed, "validation must refuse what a handler cannot take: " + repr(failed[:5])
    assert {row.guid for row in rows} >= set(accepted)

    health = service.client.get("/healthz")
    assert health.status_code == 200, health.text
    assert health.json()["worker_process"]["restarts"] == 0, health.text
    project.open_pull(1, good_core())
    service.pull_event("opened", project.full_name, 1)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "done", service.log()


def test_a_number_as_comment_body_or_a_time_of_another_form_is_refused_and_comments_after_it_still_work(
    service, github, project
):
    project.open_pull(2, good_core())
    poison = copy.deepcopy(COMMENT_BASE)
    poison["comment"]["body"] = 12345
    response = service.deliver("issue_comment", poison)
    assert response.status_code == 400
    assert response.json()["reason"] == "payload field comment.body must be a string, not int"
    # the times `/rerun-gpu` compares as strings: another type or form would make them compare wrongly
    late = copy.deepcopy(COMMENT_BASE)
    late["comment"]["created_at"] = {"when": "later"}
    response = service.deliver("issue_comment", late)
    assert response.status_code == 400
    assert response.json()["reason"].startswith("payload field comment.created_at must be a UTC time"), response.text
    pushed = copy.deepcopy(PR_BASE)
    pushed["pull_request"]["updated_at"] = "2026-01-31 12:00:00+00:00"
    response = service.deliver("pull_request", pushed)
    assert response.status_code == 400
    assert "payload field pull_request.updated_at must be a UTC time" in response.json()["reason"], response.text
    after = service.comment_event(project.full_name, 2, "/help", "alice")
    assert service.outcome(after) == "queued"
    [job] = service.wait_jobs_settled(project.full_name, 2)
    assert job.state == "done"


def test_a_handler_that_raises_fails_only_its_delivery(tmp_path, database_url):
    """The ingest error boundary on a real database: a delivery whose handler raises is recorded as
    failed (its half-made jobs rolled back), the deliveries around it are ingested normally."""
    url = database_url or f"sqlite:///{tmp_path / 'db.sqlite3'}"
    sessions = make_sessionmaker(url)

    def explode(session, delivery_id, payload, settings) -> str:
        session.add(Job(kind="review", repo="octo/poison", pr=1, head_sha="a" * 40, state="pending"))
        session.flush()
        raise KeyError(payload["missing"])

    registry.register_event("test_explodes")(explode)
    try:
        comments = [
            dict(COMMENT_BASE, comment={**COMMENT_BASE["comment"], "body": "/help", "id": number}) for number in (1, 2)
        ]
        rows = [
            ("test_explodes", {"x": 1}),
            ("issue_comment", comments[0]),
            ("test_explodes", {}),
            ("issue_comment", comments[1]),
        ]
        with sessions.begin() as session:
            for index, (event, payload) in enumerate(rows):
                session.add(
                    Delivery(
                        guid=f"d{index}", event=event, action="created", body=pack_body(json.dumps(payload).encode())
                    )
                )
        assert ingest.ingest(sessions, load_settings(env={})) == 4
    finally:
        registry.EVENTS.remove("test_explodes")
    with sessions() as session:
        outcomes = {guid: outcome for guid, outcome in session.execute(select(Delivery.guid, Delivery.outcome))}
        kinds = list(session.scalars(select(Job.kind).order_by(Job.id)))
    assert outcomes == {
        "d0": "failed: KeyError: 'missing'",
        "d1": "queued",
        "d2": "failed: KeyError: 'missing'",
        "d3": "queued",
    }
    assert kinds == ["command", "command"]  # the exploding handler's job was rolled back with its savepoint
    sessions.kw["bind"].dispose()
