"""The precision benchmark's round-19 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`).

Severity follows what the handler shows (`reviewbot.rules.other_path`): a catch-all that reports
the failure where it happens (a `print`, a warning, a log record at info level or above) and falls
back to another path (a second source tried, the input handed back) is a P3 nit, not the P2 of a
silent swallow (DeepSpeed-MII's second-source load, OpenRLHF's `load_dataset` fallback, torchdynamo's
eager fallback). Near misses stay the P2 swallow: the same fallback silent, logged at debug only,
guarded by a try of its own, or a constant in place of the result.

A fallback value that flows on as data (`reviewbot.rules.data_fallback`) is P2 whether or not it
is printed: a catch-all that repeats a narrower handler's fallback (OpenRLHF's math verifier,
`return False` for a timeout and then for every error), and a container of constants in place of
the result (lm-evaluation-harness's `tmp = [""]`). Near misses: a retry loop whose catch-all keeps
the error and raises it when exhausted, a catch-all that answers differently from the narrow one.

A handler comment calling the operation best-effort, with a handler that substitutes nothing
(kernels' load telemetry), is the docstring's best-effort class: nothing. Near misses: another
reason in the comment (P2 documented), a best-effort comment over a substitute computed in the
handler."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

LOADERS = """
import logging

from datasets import load_dataset, load_from_disk

logger = logging.getLogger(__name__)


def attempt_load(load_fn, name, path):
    try:
        value = load_fn(name)
    except Exception as ex:
        print(f"load failed - {ex}, retrying from {path}")
        value = load_fn(path)
    return value


def blend(name, data_dir):
    try:
        data = load_from_disk(name)
    except Exception as e:
        print(f"failed to load {name} from disk: {e}")
        data = load_dataset(name, data_dir=data_dir)
    return data


def trace(model, inputs, tracer):
    try:
        traced = tracer.trace(model, inputs)
        return traced.freeze()
    except Exception:
        logger.warning("trace failed, running eagerly")
        return model


def attempt_load_silent(load_fn, name, path):
    try:
        value = load_fn(name)
    except Exception:
        value = load_fn(path)
    return value


def blend_debug(name, data_dir):
    try:
        data = load_from_disk(name)
    except Exception as e:
        logger.debug("failed to load %s from disk: %s", name, e)
        data = load_dataset(name, data_dir=data_dir)
    return data


def attempt_load_guarded(load_fn, name, path):
    try:
        value = load_fn(name)
    except Exception as ex:
        print(f"load failed - {ex}, retrying from {path}")
        try:
            value = load_fn(path)
        except OSError:
            value = None
    return value


def ready(probe):
    try:
        return probe.check()
    except Exception:
        logger.info("probe failed, reporting not ready")
        return False
"""

SCORING = """
import logging

import ray

logger = logging.getLogger(__name__)


def verify(task, pred, gold):
    try:
        return ray.get(task.remote(pred, gold), timeout=10)
    except ray.exceptions.GetTimeoutError:
        print(f"timeout, pred={pred}")
        return False
    except Exception as e:
        print(f"error: {e}, pred={pred}")
        return False


def parse_generations(outputs):
    res = []
    for out in outputs:
        try:
            tmp = [None] * len(out["choices"])
            for choice in out["choices"]:
                tmp[choice["index"]] = choice["message"]["content"]
        except Exception as e:
            logger.warning(f"could not parse generations: {e}")
            tmp = [""]
        res = res + tmp
    return res


async def post(session, url, retries):
    last = None
    for attempt in range(retries):
        try:
            return await session.post(url)
        except TimeoutError as e:
            last = e
            logger.warning(f"attempt {attempt}: {e}")
        except Exception as e:
            last = e
            logger.warning(f"attempt {attempt}: unexpected {e}")
    else:
        raise RuntimeError(f"{url}: {retries} attempts failed") from last


def verify_strict(task, pred, gold):
    try:
        return ray.get(task.remote(pred, gold), timeout=10)
    except ray.exceptions.GetTimeoutError:
        print(f"timeout, pred={pred}")
        return False
    except Exception as e:
        raise RuntimeError(f"verifier broke on {pred}") from e
"""

TELEMETRY = """
def send_ping(api, event):
    try:
        payload = api.build(event)
        api.send(payload)
    except Exception:
        # Telemetry is best-effort and must never interfere with loading.
        pass


def send_ping_documented(api, event):
    try:
        payload = api.build(event)
        api.send(payload)
    except Exception:
        # Fallback to no ping
        pass


def fetch_or_default(api, event, build_default):
    try:
        return api.fetch(event)
    except Exception:
        # best-effort: build a stand-in
        return build_default(event)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round19")
    base = {"pkg/__init__.py": "", "pkg/loaders.py": "", "pkg/scoring.py": "", "pkg/telemetry.py": ""}
    return review_shapes(
        path, base, {"pkg/loaders.py": LOADERS, "pkg/scoring.py": SCORING, "pkg/telemetry.py": TELEMETRY}
    )


def _broad(review: list[Finding], path: str, qualname: str) -> Finding:
    return findings_by_rule(review, path, qualname)["broad-except"]


@pytest.mark.parametrize("qualname", ["attempt_load", "blend", "trace"])
def test_a_reported_fallback_to_another_path_is_a_p3(review: list[Finding], qualname: str) -> None:
    finding = _broad(review, "pkg/loaders.py", qualname)
    assert (finding.severity, finding.message_id) == (Severity.P3, "broad-except.reported-other-path")


def test_the_p3_says_when_the_report_drops_the_exception(review: list[Finding]) -> None:
    assert "drops the exception" in _broad(review, "pkg/loaders.py", "trace").message
    assert "drops the exception" not in _broad(review, "pkg/loaders.py", "blend").message


@pytest.mark.parametrize("qualname", ["attempt_load_silent", "blend_debug", "attempt_load_guarded", "ready"])
def test_near_misses_silent_debug_guarded_or_a_constant_stay_the_p2_swallow(
    review: list[Finding], qualname: str
) -> None:
    finding = _broad(review, "pkg/loaders.py", qualname)
    assert (finding.severity, finding.message_id) == (Severity.P3, "broad-except.swallows-one-operation")


def test_a_catch_all_repeating_a_narrow_handlers_fallback_is_a_p2_even_printed(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/scoring.py", "verify")
    assert (finding.severity, finding.message_id) == (Severity.P2, "broad-except.widens-fallback")
    assert finding.params["narrow"] == "except ray.exceptions.GetTimeoutError"


def test_a_container_of_constants_in_place_of_the_result_is_a_p2_even_logged(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/scoring.py", "parse_generations")
    assert (finding.severity, finding.message_id) == (Severity.P2, "broad-except.constant-data")


def test_near_misses_a_kept_error_raised_when_exhausted_or_another_answer(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/scoring.py", "post") == {}
    assert findings_by_rule(review, "pkg/scoring.py", "verify_strict") == {}


def test_a_best_effort_comment_over_a_handler_that_substitutes_nothing_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/telemetry.py", "send_ping") == {}
    documented = _broad(review, "pkg/telemetry.py", "send_ping_documented")
    assert documented.message_id == "broad-except.documented"
    computed = _broad(review, "pkg/telemetry.py", "fetch_or_default")
    assert computed.severity is Severity.P2
