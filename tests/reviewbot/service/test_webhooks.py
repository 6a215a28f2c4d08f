"""The webhook endpoint of a real `reviewbot serve`: verification, limits, dedupe, health and metrics,
on SQLite and on PostgreSQL.

Payloads come from the shared GitHub webhook examples (shared/fixtures/github-webhooks/).
"""

from __future__ import annotations

import json
import socket
import time
import uuid

import pytest

from tests.reviewbot.fake_github.webhooks import load_payload, pull_request_event, sign
from tests.reviewbot.service.harness import SECRET, Service, wait_until
from tests.reviewbot.service.postgres import BACKENDS
from tests.reviewbot.service.scenario import good_core


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request) -> str:
    return request.param


def stored(service, delivery: str) -> int:
    return len(service.query("SELECT seq FROM deliveries WHERE guid = :g", g=delivery))


def test_signature_missing_or_wrong_is_401_and_nothing_is_stored(service, github):
    payload = load_payload("ping", "payload", github.origin)
    body = json.dumps(payload).encode()
    for headers in ({}, {"X-Hub-Signature-256": sign("wrong-secret", body)}, {"X-Hub-Signature-256": "sha1=abc"}):
        delivery = str(uuid.uuid4())
        response = service.deliver("ping", body, secret=None, delivery=delivery, headers=headers)
        assert response.status_code == 401, response.text
        assert stored(service, delivery) == 0
    tampered = body.replace(b"}", b" }", 1)
    delivery = str(uuid.uuid4())
    response = service.deliver(
        "ping", tampered, secret=None, delivery=delivery, headers={"X-Hub-Signature-256": sign(SECRET, body)}
    )
    assert response.status_code == 401 and stored(service, delivery) == 0


def test_ping_200_unknown_event_202_bad_json_400_too_large_413(service, github):
    """Uses the shared ping, installation and pull_request examples."""
    ping = service.deliver("ping", load_payload("ping", "with-app_id.payload", github.origin))
    assert ping.status_code == 200 and ping.json()["outcome"] == "pong"
    unknown = service.deliver("installation", load_payload("installation", "created.payload", github.origin))
    assert unknown.status_code == 202 and unknown.json()["outcome"] == "ignored-event"
    malformed = service.deliver("pull_request", b"{not json")
    assert malformed.status_code == 400 and "malformed JSON" in malformed.json()["reason"]
    incomplete = load_payload("pull_request", "opened.payload", github.origin)
    del incomplete["pull_request"]["head"]["sha"]
    missing = service.deliver("pull_request", incomplete)
    assert missing.status_code == 400 and missing.json()["reason"] == "payload lacks pull_request.head.sha"
    huge = b'{"zen": "' + b"x" * (25 * 1024 * 1024) + b'"}'
    too_large = service.deliver("ping", huge)
    assert too_large.status_code == 413


def test_a_sender_disconnecting_mid_body_is_one_log_line_and_nothing_stored(service):
    """A sender that gives up before the body ends (GitHub after its 10 s limit, a dropped link):
    one warning line and a counted outcome, no traceback, nothing stored, serve keeps answering."""
    delivery = f"gone-{uuid.uuid4()}"
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sender:
        sender.sendall(
            f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: {delivery}\r\n"
            f"X-Hub-Signature-256: sha256={'0' * 64}\r\nContent-Length: 1000\r\n\r\n{{".encode()
        )
        time.sleep(0.5)  # serve is reading the body
    line = f"delivery {delivery} (ping): the sender disconnected before the body ended"
    wait_until(lambda: line in service.log(), timeout=30, what="the disconnect's log line")
    assert "Exception in ASGI application" not in service.log()
    assert stored(service, delivery) == 0
    assert (
        'reviewbot_webhook_deliveries_total{event="ping",outcome="disconnected"}' in service.client.get("/metrics").text
    )
    assert service.client.get("/healthz").status_code == 200


@pytest.fixture(scope="module")
def impatient_service(github, tmp_path_factory):
    """serve giving a request's headers, and then its body, 1 s each."""
    svc = Service(tmp_path_factory.mktemp("impatient"), github, header_timeout_seconds=1, body_timeout_seconds=1)
    yield svc.start()
    svc.stop()


HEADERS = (
    "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-GitHub-Event: ping\r\nX-GitHub-Delivery: {delivery}\r\n"
    "{signature}Content-Length: 100000\r\n\r\n"
)
SIGNATURE = f"X-Hub-Signature-256: sha256={'0' * 64}\r\n"


def _until_closed(sender: socket.socket) -> bytes:
    """Everything serve sends until it closes the connection (socket.timeout, 30 s, if it never does)."""
    received = b""
    while chunk := sender.recv(65536):
        received += chunk
    return received


def test_a_sender_stalled_mid_body_is_answered_408_and_its_connection_closed(impatient_service):
    """Headers, the start of a body, then nothing: serve had no body-read timeout of its own, so
    the sender held its connection (and up to 1 MiB of spool) for as long as it liked. Now the
    answer comes after `body_timeout_seconds`, then the end of the connection; one log line."""
    service = impatient_service
    delivery = f"stalled-{uuid.uuid4()}"
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sender:
        sender.sendall((HEADERS.format(delivery=delivery, signature=SIGNATURE) + "{").encode())
        received = _until_closed(sender)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), received
    assert b"connection: close" in head.lower(), received
    assert json.loads(body)["reason"] == "the body did not end within 1 s"
    line = f"delivery {delivery} (ping): the body did not end within 1 s: answered 408, connection closed"
    assert line in service.log(), service.log()
    assert stored(service, delivery) == 0
    assert 'reviewbot_webhook_deliveries_total{event="ping",outcome="timeout"}' in service.client.get("/metrics").text
    assert service.client.get("/healthz").status_code == 200


def test_a_connection_without_complete_headers_is_closed(impatient_service):
    """uvicorn has no header timeout: a connection that sent nothing, or half a request line, was
    held for as long as its sender liked. Now it is closed after `header_timeout_seconds`, without
    an answer, in one log line each; a request on a connection kept alive still works."""
    service = impatient_service
    with (
        socket.create_connection(("127.0.0.1", service.port), timeout=30) as silent,
        socket.create_connection(("127.0.0.1", service.port), timeout=30) as halfway,
    ):
        halfway.sendall(b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nX-GitHub-Ev")
        ports = [silent.getsockname()[1], halfway.getsockname()[1]]
        assert (_until_closed(silent), _until_closed(halfway)) == (b"", b"")
    for port in ports:
        assert f"connection from 127.0.0.1:{port} sent no complete request headers within 1 s: closed" in service.log()
    assert [service.client.get("/healthz").status_code for _ in range(3)] == [200, 200, 200]


def test_the_rest_of_a_body_answered_before_its_end_has_a_deadline(impatient_service):
    """A request refused on its headers (here: no signature) is answered before its body is read;
    the connection then waits for the rest of that body, and a sender trickling it (a byte now and
    then, each one restarting uvicorn's keep-alive timer) held it for as long as it liked. It now
    has `body_timeout_seconds` after the answer: the 401 arrives, then the connection is closed."""
    service = impatient_service
    with socket.create_connection(("127.0.0.1", service.port), timeout=30) as sender:
        sender.sendall(HEADERS.format(delivery=f"unsigned-{uuid.uuid4()}", signature="").encode())
        port = sender.getsockname()[1]
        sender.settimeout(0.2)
        received, closed = b"", False
        for _ in range(150):  # a byte every 0.2 s, 30 s at most
            try:
                sender.sendall(b" ")
                chunk = sender.recv(65536)
            except TimeoutError:
                continue
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if not chunk:
                closed = True
                break
            received += chunk
    assert received.startswith(b"HTTP/1.1 401 "), received
    assert closed, "serve kept the connection open while the sender trickled the body"
    line = f"connection from 127.0.0.1:{port} did not end the body of a request already answered within 1 s: closed"
    assert line in service.log(), service.log()


def test_redelivery_is_acknowledged_and_not_processed_twice(service, github, project):
    """Uses the shared pull_request/opened example, delivered twice with one X-GitHub-Delivery."""
    project.open_pull(1, good_core())
    payload = pull_request_event("opened", github.state.pulls[(project.full_name, 1)], github.origin)
    delivery = str(uuid.uuid4())
    first = service.deliver("pull_request", payload, delivery=delivery)
    second = service.deliver("pull_request", payload, delivery=delivery)
    assert (first.status_code, first.json()["outcome"]) == (202, "accepted")
    assert (second.status_code, second.json()["outcome"]) == (200, "duplicate")
    assert service.outcome(first) == "queued"
    jobs = service.wait_jobs_settled(project.full_name, 1)
    assert len(jobs) == 1 and jobs[0].state == "done"


def test_healthz_and_prometheus_metrics(service):
    health = service.client.get("/healthz")
    assert health.status_code == 200 and health.json()["ok"] is True
    service.deliver("ping", {"zen": "hi", "hook_id": 1})
    text = service.client.get("/metrics").text
    assert 'reviewbot_webhook_deliveries_total{event="ping",outcome="pong"}' in text
    assert "# TYPE reviewbot_job_duration_seconds histogram" in text
    assert "# TYPE reviewbot_github_api_calls_total counter" in text
