"""The precision benchmark's round-14 rule (`broad-except.error-record`), next to its near misses, on
a real git repo reviewed statically (`--suites none`): a catch-all whose handler hands the error on
as a failure record (a queue message `{"kind": "error", "error": repr(e)}`, a status and a reason
built from the error) is a P3 saying the traceback is lost, and nothing when the record or a log
call keeps the traceback. The near misses stay the P2 swallow: the error's text put on a queue with
nothing saying it failed, a record that also computes a substitute, and a failure word only in the
name of the attribute the text is kept in.

The class is FastVideo's streaming workers and its CI comparison script (tuning cases
`fastvideo-stream-worker-error-record`, `fastvideo-perf-infra-error-status`)."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

WORKER = """
import traceback


def serve(jobs, results, generate):
    for job in jobs:
        try:
            output = generate(job["request"])
            results.put({"kind": "result", "job_id": job["id"], "output": output})
        except Exception as exc:
            results.put({"kind": "error", "job_id": job["id"], "error": repr(exc)})


def serve_with_traceback(jobs, results, generate):
    for job in jobs:
        try:
            results.put({"kind": "result", "output": generate(job)})
        except Exception as exc:
            results.put({"kind": "error", "error": str(exc), "traceback": traceback.format_exc()})


def compare(records, evaluate):
    failures = []
    for record in records:
        try:
            status, reason = evaluate(record)
        except Exception as exc:
            status = STATUS_INFRA_ERROR
            reason = f"{record['name']}: comparison hit an infra error: {exc}"
            record["baseline_status"] = "infra_error"
        record["status"] = status
        failures.append(reason)
    return failures


STATUS_INFRA_ERROR = "infra_error"


def boot(results, load):
    try:
        model = load()
    except Exception as exc:
        results.put({"kind": "error", "error": repr(exc)})
        return None
    return model
"""

NEAR_MISSES = """
def text_only(jobs, results, generate):
    for job in jobs:
        try:
            results.put(generate(job))
        except Exception as exc:
            results.put(str(exc))


def with_substitute(job, generate, default):
    try:
        return {"status": "ok", "output": generate(job)}
    except Exception as exc:
        return {"status": "error", "error": str(exc), "output": default(job)}


class Compiler:
    def compile(self, fn):
        try:
            self.compiled = build(fn)
        except Exception as exc:
            self.compile_error = str(exc)
        return fn


def build(fn):
    return fn
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round14") / "r",
        {"pkg/__init__.py": ""},
        {"pkg/worker.py": WORKER, "pkg/near.py": NEAR_MISSES},
    )


@pytest.mark.parametrize("qualname", ["serve", "compare", "boot"])
def test_an_error_handed_on_as_a_failure_record_is_a_p3(review: list[Finding], qualname: str) -> None:
    found = findings_by_rule(review, "pkg/worker.py", qualname)["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.error-record", Severity.P3)
    assert found.message == "`except Exception` hands the error on as a failure record, without its traceback"


def test_a_record_that_keeps_the_traceback_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/worker.py", "serve_with_traceback") == {}


@pytest.mark.parametrize("qualname", ["text_only", "with_substitute", "Compiler.compile"])
def test_near_misses_stay_the_p2_swallow(review: list[Finding], qualname: str) -> None:
    found = findings_by_rule(review, "pkg/near.py", qualname)["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.swallows", Severity.P2), qualname
