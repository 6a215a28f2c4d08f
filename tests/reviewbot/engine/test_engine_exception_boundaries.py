"""Two shapes found by reviewing this repository's own service code, each next to its near miss
that still fires, on a real git repo reviewed statically (`--suites none`):

- a unit boundary whose failure is recorded by a call named for it that the handler assigns or
  returns (`outcome = failure(exc)`, `return self._job_failed(job, exc)`), not only one it calls
  alone;
- a `#` inside a string literal of a handler line is no comment: the log format
  `"job %d (%s#%d)"` is neither a documented reason nor part of one."""

from __future__ import annotations

import pytest
from engine_gitrepos import review_shapes

from reviewbot.findings import Finding

SERVICE = """
import logging

logger = logging.getLogger(__name__)


def failure(exc):
    return {"state": "failed", "error": str(exc)}


def ingest_one(row, handle):
    try:
        outcome = handle(row)
    except Exception as exc:
        logger.exception("delivery %s failed", row)
        outcome = failure(exc)
    return outcome


def ingest_quietly(row, handle, substitute):
    try:
        outcome = handle(row)
    except Exception as exc:
        logger.exception("delivery %s failed", row)
        outcome = substitute(exc)
    return outcome


class Worker:
    def run(self, job, handler):
        try:
            return handler(job)
        except Exception as exc:
            logger.exception("job %d (%s#%d): unexpected error", job.id, job.repo, job.pr)
            return self._job_failed(job, exc)

    def run_again(self, job, handler):
        try:
            return handler(job)
        except Exception:
            logger.exception("job %d (%s#%d): safe to ignore, falls back", job.id, job.repo, job.pr)
            return handler(job)

    def _job_failed(self, job, exc):
        return ("failed", str(exc))
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    base = {"svc/__init__.py": "", "svc/base.py": "X = 1\n"}
    return review_shapes(tmp_path_factory.mktemp("boundaries") / "r", base, {"svc/service.py": SERVICE})


def _at(findings: list[Finding], qualname: str) -> list[Finding]:
    return [f for f in findings if f.path == "svc/service.py" and f.qualname == qualname]


def test_a_failure_recorded_by_an_assigned_or_returned_call_is_a_unit_boundary(review: list[Finding]) -> None:
    assert _at(review, "ingest_one") == []
    assert _at(review, "Worker.run") == []
    # near miss: a substitute computed in the handler is a fallback, whatever the log says
    (quiet,) = _at(review, "ingest_quietly")
    assert (quiet.rule, quiet.message_id) == ("broad-except", "broad-except.swallows-one-operation")


def test_a_hash_inside_a_string_is_no_comment(review: list[Finding]) -> None:
    (again,) = _at(review, "Worker.run_again")
    assert again.rule == "broad-except"
    # the words after the `#` are in the log format, not a comment that documents the fallback
    assert again.message_id == "broad-except.swallows-one-operation"
    assert "reason" not in again.params
