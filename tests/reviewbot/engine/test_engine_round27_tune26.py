"""The precision benchmark's round-27 classes from round 26's held-out parts C and D (helper h27tune26),
next to their near misses, on real git repos reviewed statically (`--suites none`).

- A warned catch-all around a set-up handed a process group (`collective_try.collective_call`, a
  keyword `group=`) is no reported fallback: the `P2` `broad-except.swallows` naming it (aiter's
  communicator). Near misses: a group query (`get_world_size(group=g)`), a call without a group.
- A catch-all that only logs in a function the file starts with its handle dropped
  (`background_work`) is `P2` `broad-except.background-report` (axlearn's asynchronous termination).
  Near miss: the future kept and read.
- The same on an unchanged handler whose function's channel the change made carry errors
  (`background_work.end_on_error_channel`, `guarded_code.harm_outside`) is reported off the changed
  lines (xinference's llama.cpp request). Near miss: a change that sends no error on the channel.
- The caught exception handed to each waiting future in a loop, or any exception to
  `set_exception`, gives nothing (xinference's batch processor). Near miss: `set_result(None)`.
- The error's text put on a queue in a record type named for a failure (`q.put(_Error(str(e)))`) is
  `P3` `broad-except.error-record`. Near miss: a type named for something else.
- A logged best-effort step in a function that ends in `os._exit(1)` gives nothing (cleanup on the
  way out). Near misses: a function that ends in `os._exit(0)` or `sys.exit(main())`.
- A per-task handler that logs the error and returns its result with the success flag `False`
  (`return (host, False)`) gives nothing (a unit boundary). Near miss: `return (host, None)`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

GROUP = """
import logging

logger = logging.getLogger(__name__)


class Communicator:
    def __init__(self, cpu_group, device, factory, dist):
        self.comm = None
        try:
            self.comm = factory(group=cpu_group, device=device)
        except Exception as e:
            logger.warning(f"Failed to initialize the communicator: {e}")
        self.size = dist.get_world_size(group=cpu_group)

    def query(self, cpu_group, dist):
        self.size = 1
        try:
            self.size = dist.get_world_size(group=cpu_group)
        except Exception as e:
            logger.warning(f"Failed to read the group size: {e}")
        return self.size

    def local(self, device, factory):
        self.comm = None
        try:
            self.comm = factory(device=device)
        except Exception as e:
            logger.warning(f"Failed to initialize the communicator: {e}")
        return self.comm
"""

BACKGROUND = """
import logging
from concurrent import futures


class Server:
    def __init__(self, controller):
        self.controller = controller
        self._pool = futures.ThreadPoolExecutor(max_workers=1)

    def _terminate(self, reason):
        try:
            done = self.controller.terminate(reason)
            if done:
                logging.info("terminated")
        except Exception as e:
            logging.error("termination failed: %s", e)

    def restart(self, reason):
        self._pool.submit(self._terminate, reason)
        return True

    def _stop(self, reason):
        try:
            done = self.controller.terminate(reason)
            if done:
                logging.info("stopped")
        except Exception as e:
            logging.error("stop failed: %s", e)

    def stop(self, reason):
        future = self._pool.submit(self._stop, reason)
        future.result()
        return True
"""

FUTURES = """
def fail_batch(batch, futures, results):
    try:
        values = batch.run()
        for future, value in zip(futures, values):
            future.set_result(value)
    except Exception as error:
        for future in futures:
            if not future.done():
                future.set_exception(error)
    return results


def fail_with_copy(future, exception):
    try:
        future.set_exception(type(exception)(*exception.args))
    except Exception:
        future.set_exception(exception)


def end_batch(batch, futures, results):
    try:
        values = batch.run()
        for future, value in zip(futures, values):
            future.set_result(value)
    except Exception as error:
        for future in futures:
            if not future.done():
                future.set_result(None)
    return results
"""

RECORD = """
import json


class _Error:
    def __init__(self, msg):
        self.msg = msg


class _Item:
    def __init__(self, msg):
        self.msg = msg


def on_error(q, err):
    try:
        msg = json.loads(err)
        q.put(_Error(msg))
    except Exception as e:
        q.put(_Error(str(e)))


def on_item(q, err):
    try:
        msg = json.loads(err)
        q.put(_Item(msg))
    except Exception as e:
        q.put(_Item(str(e)))
"""

EXIT = """
import logging
import os
import sys

logger = logging.getLogger(__name__)


def handle_oom(reporter, error):
    logger.error("out of memory: %s", error)
    try:
        reporter.report(error)
    except Exception:
        logger.warning("failed to report before exit", exc_info=True)
    os._exit(1)


def handle_done(reporter, error):
    try:
        reporter.report(error)
    except Exception:
        logger.warning("failed to report before exit", exc_info=True)
    os._exit(0)


def run_main(reporter, main):
    try:
        reporter.report("starting")
    except Exception:
        logger.warning("failed to report the start", exc_info=True)
    sys.exit(main())
"""

POOL = """
import logging
from concurrent import futures


def restart_all(client, hosts):
    def restart_one(host):
        try:
            ok = client.restart(host)
            logging.info("restarted %s", host)
            return (host, ok)
        except Exception as e:
            logging.error("failed to restart %s: %s", host, e)
            return (host, False)

    with futures.ThreadPoolExecutor() as pool:
        return dict(pool.map(restart_one, hosts))


def probe_all(client, hosts):
    def probe_one(host):
        try:
            ok = client.probe(host)
            logging.info("probed %s", host)
            return (host, ok)
        except Exception as e:
            logging.error("failed to probe %s: %s", host, e)
            return (host, None)

    with futures.ThreadPoolExecutor() as pool:
        return dict(pool.map(probe_one, hosts))
"""

FILES = {
    "pkg/group.py": GROUP,
    "pkg/background.py": BACKGROUND,
    "pkg/futures_fail.py": FUTURES,
    "pkg/record.py": RECORD,
    "pkg/oom.py": EXIT,
    "pkg/pool.py": POOL,
}

# the channel case: the handler stands unchanged at the base; the change gives the channel its errors
CHANNEL_BASE = """
import logging
import queue

logger = logging.getLogger(__name__)


class _Done:
    pass


class Model:
    def __init__(self, llm, executor):
        self._llm = llm
        self._executor = executor

    def generate(self, prompt):
        q = queue.Queue()

        def _run():
            def _callback(out):
                q.put(out)

            try:
                self._llm.complete(prompt, _callback, _callback)
            except Exception as ex:
                logger.exception("complete failed: %s", ex)
            q.put(_Done)

        self._executor.submit(_run)
        return q.get()
"""

CHANNEL_ERRORS = CHANNEL_BASE.replace(
    """            def _callback(out):
                q.put(out)

            try:
                self._llm.complete(prompt, _callback, _callback)""",
    """            def _on_error(err):
                q.put(_Error(err))

            def _on_ok(out):
                q.put(out)

            try:
                self._llm.complete(prompt, _on_error, _on_ok)""",
).replace(
    """class Model:""",
    """class _Error:
    def __init__(self, msg):
        self.msg = msg


class Model:""",
)

CHANNEL_RENAMED = CHANNEL_BASE.replace(
    """            def _callback(out):
                q.put(out)

            try:
                self._llm.complete(prompt, _callback, _callback)""",
    """            def _on_out(out):
                q.put(out)

            try:
                self._llm.complete(prompt, _on_out, _on_out)""",
)


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round27_tune26")
    base = {"pkg/__init__.py": "", **{name: "" for name in FILES}}
    return review_shapes(path, base, FILES)


@pytest.fixture(scope="module")
def channel_review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round27_tune26_channel")
    base = {"pkg/__init__.py": "", "pkg/errors.py": CHANNEL_BASE, "pkg/renamed.py": CHANNEL_BASE}
    return review_shapes(path, base, {"pkg/errors.py": CHANNEL_ERRORS, "pkg/renamed.py": CHANNEL_RENAMED})


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


def test_a_warned_catch_all_around_a_set_up_handed_a_group_is_reported(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/group.py", "Communicator.__init__").get("broad-except")
    assert finding is not None
    assert (finding.message_id, finding.severity) == ("broad-except.swallows", Severity.P2)
    assert finding.extra["collective"] == "factory"


@pytest.mark.parametrize("qualname", ["Communicator.query", "Communicator.local"])
def test_a_group_query_or_a_call_without_a_group_stays_a_reported_fallback(
    review: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review, "pkg/group.py", qualname) == {}


def test_a_logged_failure_of_work_started_with_its_handle_dropped_is_reported(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/background.py", "Server._terminate").get("broad-except")
    assert finding is not None
    assert (finding.message_id, finding.severity) == ("broad-except.background-report", Severity.P2)
    assert finding.params["function"] == "_terminate"
    assert "end" not in finding.params


def test_work_whose_future_is_read_stays_a_reported_fallback(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/background.py", "Server._stop") == {}


def test_an_unchanged_handler_that_ends_a_channel_now_carrying_errors_is_reported(
    channel_review: list[Finding],
) -> None:
    finding = findings_by_rule(channel_review, "pkg/errors.py", "Model.generate._run").get("broad-except")
    assert finding is not None
    assert (finding.message_id, finding.severity) == ("broad-except.background-report", Severity.P2)
    assert finding.params["end"] == "q.put(_Done)"


def test_an_unchanged_handler_whose_channel_carries_no_errors_stays_unreported(
    channel_review: list[Finding],
) -> None:
    assert [f for f in channel_review if f.path == "pkg/renamed.py"] == []


@pytest.mark.parametrize("qualname", ["fail_batch", "fail_with_copy"])
def test_futures_failed_in_the_handler_give_nothing(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/futures_fail.py", qualname) == {}


def test_futures_given_a_result_in_the_handler_stay_a_swallow(review: list[Finding]) -> None:
    assert _shown(review, "pkg/futures_fail.py", "end_batch", "broad-except") == (
        "broad-except.swallows",
        Severity.P2,
    )


def test_the_error_put_on_a_queue_in_a_failure_type_is_an_error_record(review: list[Finding]) -> None:
    assert _shown(review, "pkg/record.py", "on_error", "broad-except") == ("broad-except.error-record", Severity.P3)


def test_the_error_put_on_a_queue_in_another_type_stays_a_swallow(review: list[Finding]) -> None:
    assert _shown(review, "pkg/record.py", "on_item", "broad-except") == ("broad-except.swallows", Severity.P2)


def test_a_logged_step_before_a_failing_exit_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/oom.py", "handle_oom") == {}


@pytest.mark.parametrize("qualname", ["handle_done", "run_main"])
def test_a_logged_step_before_a_successful_or_computed_exit_stays_reported(
    review: list[Finding], qualname: str
) -> None:
    assert _shown(review, "pkg/oom.py", qualname, "broad-except") == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def test_a_task_result_returned_with_its_flag_down_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/pool.py", "restart_all.restart_one") == {}


def test_a_task_result_returned_with_none_stays_reported(review: list[Finding]) -> None:
    assert "broad-except" in findings_by_rule(review, "pkg/pool.py", "probe_all.probe_one")
