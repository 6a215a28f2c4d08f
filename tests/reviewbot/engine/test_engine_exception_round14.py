"""The precision benchmark's round-14 rule (`broad-except.error-record`), next to its near misses, on
a real git repo reviewed statically (`--suites none`): a catch-all whose handler hands the error on
as a failure record (a queue message `{"kind": "error", "error": repr(e)}`, a status and a reason
built from the error) is a P3 saying the traceback is lost, and nothing when the record or a log
call keeps the traceback. The near misses stay the P2 swallow: the error's text put on a queue with
nothing saying it failed, a record that also computes a substitute, and a failure word only in the
name of the attribute the text is kept in.

Also an `assert` on the caught exception as a filter (`except RuntimeError as e: assert "Missing
key(s)" in str(e)`, litgpt's test of strict loading): what the test rejects fails there, so no
finding; the near miss asserts something that does not name the exception (still `no-oom-reraise`).

A catch-all whose handler reads a name the try binds only after a statement that can fail
(`except BaseException as e: logger.error(f"{e} {outputs}"); raise`, lm-evaluation-harness's
request handler) raises `UnboundLocalError` in place of the caught error: P2
`broad-except.handler-unbound`, before the re-raise exemption; the near misses bind the name before
the try, bind it by a leading statement that cannot fail, or bind it in the handler first (also as
a loop's target: pytorch/helion's `for child in reversed(self.children): child.cleanup()`).

From pytorch/helion's autotuner: a warning naming the caught exception followed by `return
matching` is a reported fallback to a value the function already holds: nothing; and a docstring
that calls the function "best-effort" documents its fallback (nothing for a handler that only logs
and hands back a value at hand). Near misses: the warning with only `exc_info=True` (helion's own
shape: the logged fallback the rule is for, like `logger.exception("compile failed"); return
None`), a substitute computed in the handler, a docstring without such words (still the P2
swallow).

A probe that runs only library code and whose handler answers with one of the try's own answers
(`return None` where the try returns `None` for "not found"; `pass` falling through to the
`return False` the try also reaches) gives nothing (AITemplate's `nvidia-smi` probe, round 14;
flash-attention's CUDA-12 probe, round 15); near misses answer with another constant, or run the
repository's own code in the try.

The record class is FastVideo's streaming workers and its CI comparison script (tuning cases
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


ASSERTS = """
import torch


def load_strict(model, state_dict):
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError as e:
        assert "Missing key(s)" in str(e) or "Unexpected key(s)" in str(e)
    return model


def any_failure(fn):
    try:
        fn()
    except Exception as error:
        assert isinstance(error, TimeoutError), error


def unrelated_assert(model, state_dict, allowed):
    try:
        model.load_state_dict(state_dict, strict=True)
    except RuntimeError:
        assert allowed
    return model
"""


HANDLER_READS = """
import logging

logger = logging.getLogger(__name__)


def request(session, url):
    try:
        response = session.get(url)
        response.raise_for_status()
        outputs = response.json()
    except BaseException as e:
        logger.error(f"request failed: {e!r}, outputs: {outputs}")
        raise
    return outputs


def bound_before(session, url):
    outputs = None
    try:
        outputs = session.get(url).json()
    except BaseException as e:
        logger.error(f"request failed: {e!r}, outputs: {outputs}")
        raise
    return outputs


def bound_first(session, url):
    try:
        attempts = 0
        outputs = session.get(url).json()
    except Exception as e:
        logger.error("failed after %d attempts: %s", attempts, e)
        raise
    return outputs


def rebound_by_a_loop(cases, make):
    children = []
    try:
        for case in cases:
            child = make(case)
            children.append(child)
    except Exception as error:
        for child in reversed(children):
            child.cleanup()
        raise RuntimeError(f"failed to prepare: {error}") from error
    return [c.name for c in children]


def bound_in_handler(session, url):
    try:
        outputs = session.get(url).json()
    except Exception as e:
        outputs = {"error": str(e)}
        logger.error("request failed: %s", outputs)
        raise
    return outputs
"""


HELION = '''
import logging

log = logging.getLogger(__name__)


def remote_matches(backend, matching):
    try:
        entries = list(backend.list())
    except Exception as error:
        log.warning("Remote cache list failed (%s), using local matches only", error)
        return matching
    return matching + entries


def remote_matches_traceback_only(backend, matching):
    try:
        entries = list(backend.list())
    except Exception:
        log.warning("Remote cache list failed, using local matches only", exc_info=True)
        return matching
    return matching + entries


def remote_matches_rebuilt(backend, matching):
    try:
        entries = list(backend.list())
    except Exception as error:
        log.warning("Remote cache list failed (%s)", error)
        return rebuild(matching)
    return matching + entries


def rebuild(matching):
    return list(matching)


def stable_hash(autotuner):
    """The autotuner's cache hash. Best-effort: None when the key cannot be built."""
    try:
        return autotuner.key().stable_hash()
    except Exception:
        log.debug("Could not compute the cache hash", exc_info=True)
        return None


def plain_hash(autotuner):
    """The autotuner's cache hash."""
    try:
        return autotuner.key().stable_hash()
    except Exception:
        log.debug("Could not compute the cache hash", exc_info=True)
        return None
'''


BRANCHES = """
def both_branches_return(fn, respond):
    try:
        result = fn()
    except Exception as ex:
        if "CUDA" in str(ex):
            return respond("Out of resources", 507)
        else:
            return respond("Prediction failed", 503)
    return result


def one_branch_returns(fn, respond):
    try:
        result = fn()
    except Exception as ex:
        if "CUDA" in str(ex):
            return respond("Out of resources", 507)
    return result
"""


PROBES = """
def is_cuda_12() -> bool:
    try:
        import torch

        version = torch.version.cuda
        if version is not None:
            return int(version.split(".")[0]) == 12
    except Exception:
        pass
    return False


def nvml_arch():
    try:
        import pynvml

        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        if "H100" in name:
            return "90"
        return None
    except Exception:
        return None


def nvml_arch_unknown():
    try:
        import pynvml

        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        if "H100" in name:
            return "90"
        return None
    except Exception:
        return "unknown"


def own_parse(text):
    return text.split()[0]


def nvml_arch_own_code():
    try:
        import pynvml

        name = pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0))
        if own_parse(name) == "H100":
            return "90"
        return None
    except Exception:
        return None
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round14") / "r",
        {"pkg/__init__.py": ""},
        {
            "pkg/worker.py": WORKER,
            "pkg/near.py": NEAR_MISSES,
            "pkg/asserts.py": ASSERTS,
            "pkg/reads.py": HANDLER_READS,
            "pkg/helion.py": HELION,
            "pkg/branches.py": BRANCHES,
            "pkg/probes.py": PROBES,
        },
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
    assert (found.message_id, found.severity) == ("broad-except.swallows-one-operation", Severity.P3), qualname


@pytest.mark.parametrize("qualname", ["load_strict", "any_failure"])
def test_an_assert_on_the_caught_exception_is_a_filter(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/asserts.py", qualname) == {}


def test_near_miss_an_assert_that_does_not_read_the_exception(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/asserts.py", "unrelated_assert")["runtime-error-fallback"]
    assert (found.message_id, found.severity) == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


def test_a_handler_reading_a_name_the_try_may_not_have_bound_is_a_p2(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/reads.py", "request")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.handler-unbound", Severity.P2)
    assert found.message.startswith("`except BaseException` reads `outputs` at line 12, which the try may not")


@pytest.mark.parametrize("qualname", ["bound_before", "bound_first", "rebound_by_a_loop", "bound_in_handler"])
def test_near_misses_a_name_bound_before_first_or_in_the_handler(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/reads.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["remote_matches", "stable_hash"])
def test_a_reported_or_best_effort_fallback_to_a_value_at_hand_gives_nothing(
    review: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review, "pkg/helion.py", qualname) == {}


@pytest.mark.parametrize(
    ("qualname", "expected"),
    [
        # since round 19 a warned fallback to another path (the value at hand, a rebuilt one) is a P3
        ("remote_matches_traceback_only", ("broad-except.reported-other-path", Severity.P3)),
        ("remote_matches_rebuilt", ("broad-except.reported-other-path", Severity.P3)),
        ("plain_hash", ("broad-except.swallows-one-operation", Severity.P3)),
    ],
)
def test_near_misses_a_traceback_alone_a_computed_substitute_or_no_documentation(
    review: list[Finding], qualname: str, expected: tuple[str, Severity]
) -> None:
    found = findings_by_rule(review, "pkg/helion.py", qualname)["broad-except"]
    assert (found.message_id, found.severity) == expected, qualname


def test_a_handler_whose_if_and_else_both_return_leaves_nothing_unbound(review: list[Finding]) -> None:
    # TorchServe's predict handler (round 15): the message claimed `result` was left unbound
    found = findings_by_rule(review, "pkg/branches.py", "both_branches_return").get("broad-except")
    assert found is None or found.message_id != "broad-except.unbound", found.message
    near = findings_by_rule(review, "pkg/branches.py", "one_branch_returns")["broad-except"]
    assert near.message_id == "broad-except.unbound" and near.params["name"] == "result"


@pytest.mark.parametrize("qualname", ["is_cuda_12", "nvml_arch"])
def test_a_library_probe_answering_with_its_own_no_gives_nothing(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/probes.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["nvml_arch_unknown", "nvml_arch_own_code"])
def test_near_misses_another_answer_or_the_repositorys_code(review: list[Finding], qualname: str) -> None:
    found = findings_by_rule(review, "pkg/probes.py", qualname)["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.swallows", Severity.P2), qualname
