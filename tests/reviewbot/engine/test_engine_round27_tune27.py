"""The precision benchmark's round-27 classes from round 27's held-out parts A and B (helper h27tune27),
next to their near misses, on real git repos reviewed statically (`--suites none`).

- A `RuntimeError` handler around a standard-library call and a `raise` of a builtin exception that
  is no `RuntimeError` (`broad_except._stdlib_only`) gives nothing (open-instruct's threaded-actor
  check). Near miss: a raise of `NotImplementedError`, a `RuntimeError`:
  `runtime-error-fallback.no-oom-reraise`.
- An error kept in the loop's results by a try that ends the turn from inside `if` blocks
  (`broad_except._turn_ending_tries`) gives nothing (BMTrain's parameter copy). Near miss: a
  statement after the `if` in the turn: the plain swallow, since round 29 worded
  `broad-except.swallows-reported` at `P3` (the error is kept in the list of errors).
- A bare `except:` after `except Exception` (`broad_except._after_catch_all`) is `P3`
  `broad-except.exits-only` (pytorch/benchmark's model loop). Near miss: a bare `except:` alone.
- A narrow handler whose one `if` tests the caught exception with no `else:` and no `raise`
  (`partial_filter.falls_through_unmatched`) is `P2` `broad-except.filter-falls-through`
  (OLMo-core's S3 clear). Near miss: the same test with `else: raise`.
- A loop element converted in place whose handler leaves it raw (`data_fallback.unconverted_element`)
  is `P2` `broad-except.element-left-unconverted` (NeMo-Run's job records). Near miss: a try that
  builds a new list.
- An `except ImportError` binding an imported function to a stub that does nothing, called for its
  effect (`import_unbound.noop_stub_called`), is `P2` `broad-except.import-noop-stub` (tnt's FSDP2).
  Near miss: a stub that raises.
- A catch-all after narrow handlers of the errors a tenacity `@retry` of the try's callee retries
  without `reraise=True` (`retry_wrapped.retry_error_skips_handlers`) is `P2`
  `broad-except.retry-error-skips-handlers` (aibrix's LoRA requests). Near miss: `reraise=True`.
- A handler that binds names back to the constants they held before the `if` its try stands in
  (`own_route.reset_to_skipped`) gives nothing (datasets' tokenizer fingerprint). Near miss:
  another constant: `broad-except.swallows`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

ACTOR = """
import asyncio
import threading


def assert_threaded(instance):
    try:
        loop = asyncio.get_running_loop()
        raise AssertionError(f"{instance.__class__.__name__} needs a thread: loop={loop!r} on {threading.current_thread().name}")
    except RuntimeError:
        return


def assert_threaded_unsupported(instance):
    try:
        loop = asyncio.get_running_loop()
        raise NotImplementedError(f"{instance.__class__.__name__} needs a thread: loop={loop!r}")
    except RuntimeError:
        return
"""

LOAD = """
import torch


def load_params(module, state_dict, error_msgs):
    for name, param in module.named_parameters():
        if name in state_dict:
            value = state_dict[name]
            try:
                with torch.no_grad():
                    param.copy_(value)
            except Exception as ex:
                error_msgs.append(f"while copying {name}: {ex.args}")


def load_params_counted(module, state_dict, error_msgs):
    loaded = 0
    for name, param in module.named_parameters():
        if name in state_dict:
            value = state_dict[name]
            try:
                with torch.no_grad():
                    param.copy_(value)
            except Exception as ex:
                error_msgs.append(f"while copying {name}: {ex.args}")
        loaded += 1
    return loaded
"""

BENCH = """
import traceback


def run_all(models, run_one, save):
    results = {}
    for name in models:
        try:
            model = models[name]()
            metrics = run_one(model)
        except Exception as e:
            traceback.print_exc()
            print(f"model {name} failed with {e}")
            metrics = {name: f"failed: {traceback.format_exc()}"}
        except KeyboardInterrupt:
            break
        except:
            print(f"model {name} failed")
            metrics = {name: "failed"}
        results.update(metrics)
    save(results)


def run_all_bare(models, run_one, save):
    results = {}
    for name in models:
        try:
            model = models[name]()
            metrics = run_one(model)
        except:
            print(f"model {name} failed")
            metrics = {name: "failed"}
        results.update(metrics)
    save(results)
"""

STORE = """
from botocore.exceptions import ClientError


def clear_directory(client, bucket, prefix):
    try:
        for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
            client.delete_object(Bucket=bucket, Key=o["Key"])
        return
    except ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return


def clear_directory_raising(client, bucket, prefix):
    try:
        for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix)["Contents"]:
            client.delete_object(Bucket=bucket, Key=o["Key"])
        return
    except ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return
        else:
            raise
"""

RECORDS = """
import json
import logging

log = logging.getLogger(__name__)


def load_records(path, build):
    with open(path) as f:
        data = json.load(f)
    for app in data.values():
        try:
            app["executor"] = build(app["executor"])
        except Exception as e:
            log.warning(f"Failed to build executor: {e}")
            continue
    return data


def load_executors(path, build):
    with open(path) as f:
        data = json.load(f)
    executors = []
    for app in data.values():
        try:
            executors.append(build(app["executor"]))
        except Exception as e:
            log.warning(f"Failed to build executor: {e}")
            continue
    return executors
"""

SHARD = """
try:
    from fastdist.shard import shard_module
except ImportError:

    def noop(*args, **kwargs):
        pass

    shard_module = noop


def prepare(module, mesh):
    for child in module.children():
        shard_module(child, mesh=mesh)
    return module
"""

SHARD_RAISING = """
try:
    from fastdist.shard import shard_module
except ImportError:

    def shard_module(*args, **kwargs):
        raise RuntimeError("sharding needs fastdist 2.6 or newer")


def prepare(module, mesh):
    for child in module.children():
        shard_module(child, mesh=mesh)
    return module
"""

PICKLE = """
def save_tokenizer(pickler, obj, backend):
    truncation = padding = None
    if backend is not None and hasattr(backend, "truncation"):
        truncation = backend.truncation
        padding = backend.padding
        try:
            if truncation is not None:
                backend.no_truncation()
            if padding is not None:
                backend.no_padding()
        except Exception:
            truncation = padding = None
    pickler.save(obj)
    if truncation is not None:
        backend.enable_truncation(**truncation)


def save_tokenizer_flagged(pickler, obj, backend):
    truncation = padding = None
    if backend is not None and hasattr(backend, "truncation"):
        truncation = backend.truncation
        padding = backend.padding
        try:
            if truncation is not None:
                backend.no_truncation()
            if padding is not None:
                backend.no_padding()
        except Exception:
            truncation = padding = False
    pickler.save(obj)
    if truncation:
        backend.enable_truncation(**truncation)
"""


CLIENT = """
import logging

import httpx
from tenacity import retry, retry_if_exception_type, stop_after_attempt

logger = logging.getLogger(__name__)


class Client:
    @retry(stop=stop_after_attempt(3), retry=retry_if_exception_type((httpx.ConnectError, httpx.TimeoutException)))
    async def _request(self, url):
        response = await self.client.get(url)
        response.raise_for_status()
        return response

    @retry(stop=stop_after_attempt(3), reraise=True, retry=retry_if_exception_type(httpx.ConnectError))
    async def _request_reraised(self, url):
        response = await self.client.get(url)
        response.raise_for_status()
        return response

    async def models(self, url):
        try:
            response = await self._request(url)
        except httpx.TimeoutException as e:
            logger.error(f"timeout: {e}")
            return self.error_response("timeout", status_code=408)
        except httpx.ConnectError as e:
            logger.error(f"cannot connect: {e}")
            return self.error_response("cannot connect", status_code=502)
        except Exception as e:
            logger.error(f"unexpected error: {e}")
            return self.error_response("unexpected error", status_code=500)
        return response.text

    async def models_reraised(self, url):
        try:
            response = await self._request_reraised(url)
        except httpx.ConnectError as e:
            logger.error(f"cannot connect: {e}")
            return self.error_response("cannot connect", status_code=502)
        except Exception as e:
            logger.error(f"unexpected error: {e}")
            return self.error_response("unexpected error", status_code=500)
        return response.text
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round27") / "repo"
    return review_shapes(
        path,
        {"pkg/__init__.py": "", "pkg/project.py": TORCH_PROJECT},
        {
            "pkg/actor.py": ACTOR,
            "pkg/load.py": LOAD,
            "pkg/bench.py": BENCH,
            "pkg/store.py": STORE,
            "pkg/records.py": RECORDS,
            "pkg/shard.py": SHARD,
            "pkg/shard_raising.py": SHARD_RAISING,
            "pkg/pickle_tok.py": PICKLE,
            "pkg/client.py": CLIENT,
        },
    )


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity]:
    finding = findings_by_rule(review, path, qualname)[rule]
    return finding.message_id, finding.severity


def test_a_builtin_error_raised_after_a_stdlib_call_gives_no_runtime_error_fallback(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/actor.py", "assert_threaded") == {}


def test_a_raised_runtime_error_subclass_stays_a_runtime_error_fallback(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/actor.py", "assert_threaded_unsupported", "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


def test_an_error_kept_by_a_try_ending_the_turn_inside_an_if_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/load.py", "load_params") == {}


def test_an_error_kept_before_more_of_the_turn_stays_a_swallow(review: list[Finding]) -> None:
    # round 29: the swallow's handler keeps the error in a list named for errors, so unconfirmed it
    # is the P3 wording of the plain swallow, not this class
    shown = _shown(review, "pkg/load.py", "load_params_counted", "broad-except")
    assert shown == ("broad-except.swallows-reported", Severity.P3)


def test_a_bare_except_after_except_exception_is_exits_only(review: list[Finding]) -> None:
    # the bare `except:` at line 16; the `except Exception` of the same try is read as before
    found = [f for f in review if f.path == "pkg/bench.py" and f.qualname == "run_all" and f.line_start == 16]
    assert [(f.message_id, f.severity) for f in found] == [("broad-except.exits-only", Severity.P3)]
    assert "KeyboardInterrupt" in found[0].message


def test_a_bare_except_alone_stays_a_swallow(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/bench.py", "run_all_bare", "broad-except")
    assert shown == ("broad-except.swallows", Severity.P2)


def test_a_filter_without_else_is_reported(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/store.py", "clear_directory")["broad-except"]
    assert (found.message_id, found.severity, found.line_start) == (
        "broad-except.filter-falls-through",
        Severity.P2,
        9,
    )
    assert "HTTPStatusCode" in found.message


def test_a_filter_that_raises_the_rest_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/store.py", "clear_directory_raising") == {}


def test_an_element_left_unconverted_is_reported(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/records.py", "load_records")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.element-left-unconverted", Severity.P2)
    assert "app['executor']" in found.message


def test_a_new_list_built_in_the_loop_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/records.py", "load_executors") == {}


def test_a_noop_stub_called_for_its_effect_is_reported(review: list[Finding]) -> None:
    found = [f for f in review if f.path == "pkg/shard.py" and f.rule == "broad-except"]
    assert [(f.message_id, f.severity, f.line_start, f.params["name"], f.params["line"]) for f in found] == [
        ("broad-except.import-noop-stub", Severity.P2, 3, "shard_module", 13)
    ]


def test_a_stub_that_raises_gives_nothing(review: list[Finding]) -> None:
    assert [f for f in review if f.path == "pkg/shard_raising.py"] == []


def test_names_reset_to_the_skipped_blocks_constants_give_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/pickle_tok.py", "save_tokenizer") == {}


def test_names_set_to_another_constant_stay_a_swallow(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/pickle_tok.py", "save_tokenizer_flagged", "broad-except")
    assert shown == ("broad-except.swallows", Severity.P2)


def test_a_catch_all_receiving_the_retry_error_is_reported(review: list[Finding]) -> None:
    found = [f for f in review if f.path == "pkg/client.py" and f.qualname == "Client.models"]
    assert [(f.message_id, f.severity, f.line_start) for f in found] == [
        ("broad-except.retry-error-skips-handlers", Severity.P2, 31)
    ]
    assert found[0].params["handlers"] == ["httpx.TimeoutException", "httpx.ConnectError"]


def test_a_retry_that_reraises_the_last_error_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/client.py", "Client.models_reraised") == {}
