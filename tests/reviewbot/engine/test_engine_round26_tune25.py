"""The precision benchmark's round-25 classes from round 25's held-out sets (helper h26tune25), next to
their near misses, on real git repos reviewed statically (`--suites none`).

- A catch-all that logs the caught exception and hands it to a failure-taking call
  (`fallback_use.hands_error_to_owner`) gives nothing (torchft's managed work). Near misses: the
  same hand-over with no log or with a log of neither the exception nor its traceback
  (`exc_info=False`), a call named for something else: `broad-except.swallows`.
- An import whose names only the try's `else:` reads (`fallback_use.import_for_else_only`) gives
  nothing (nvidia-resiliency-ext's TransformerEngine clean-up). Near miss: the imported name read
  after the try too.
- An older query of the same object answering the try's query (`fallback_use.older_query`) gives
  nothing (Mooncake's runtime). Near miss: a call with arguments in the handler.
- A constant that every caller binds when it skips the call (`fallback_use.callers_skip_value`)
  gives nothing (compressed-tensors' meta-device estimate). Near miss: another constant:
  `broad-except.constant-data`.
- The try's statement again in the handler, unguarded, also nested once
  (`spent_retry.repeats_statement`), gives nothing (GPTQModel's device copy). Near miss: a retry
  with other arguments.
- A counted retry that raises when spent (`spent_retry.raises_when_spent`) gives nothing under
  `except RuntimeError` (exllamav2's Hessian damping). Near miss: a raise whose test reads no counter:
  `runtime-error-fallback.no-oom-reraise`.
- An `except ImportError` that lets errors through with the import's names unbound, read later
  (`import_unbound.import_left_unbound`), is `P2` `broad-except.import-unbound` (exllamav2's prebuilt
  extension). Near miss: a handler that binds a stub.
- A swallow whose try holds a collective names it (`collective_try.collective_call`, Mooncake's IPC
  exchange). Near miss: a try without one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

OWNER = """
import logging

LOG = logging.getLogger(__name__)


class Work:
    def __init__(self, work, manager, responder):
        self._work = work
        self._manager = manager
        self._responder = responder

    def wait(self):
        try:
            self._work.wait()
            return True
        except Exception as e:
            LOG.exception(f"got exception waiting for work {e}")
            self._manager.report_error(e)
            return False

    def wait_unshown(self):
        try:
            self._work.wait()
            return True
        except Exception as e:
            self._responder.set_failure(e)
            return False

    def wait_untraced(self):
        try:
            self._work.wait()
            return True
        except Exception as e:
            LOG.warning("got exception waiting for work", exc_info=False)
            self._manager.report_error(e)
            return False

    def wait_cleaned(self):
        try:
            self._work.wait()
            return True
        except Exception as e:
            LOG.exception(f"got exception waiting for work {e}")
            self._manager.cleanup(e)
            return False
"""

ABORT = """
def destroy_buffers(state):
    try:
        import fastlayers.pytorch as fl
    except Exception:
        pass
    else:
        fl.module.base.destroy_buffers()
    return state


def destroy_buffers_and_count(state):
    try:
        import fastlayers.pytorch as fl
    except Exception:
        pass
    else:
        fl.module.base.destroy_buffers()
    state.count = fl.module.base.count()
    return state
"""

RUNTIME = """
class Buffer:
    def __init__(self, runtime):
        self.runtime = runtime
        use_fast_path = False
        try:
            use_fast_path = bool(self.runtime.use_fast_path())
        except Exception:
            disabled = bool(self.runtime.rdma_disabled())
            use_fast_path = not disabled
        self._use_fallback = not use_fast_path

    def choose(self, size):
        use_fast_path = False
        try:
            use_fast_path = bool(self.runtime.use_fast_path())
        except Exception:
            disabled = bool(self.runtime.measure_bandwidth(size))
            use_fast_path = not disabled
        return use_fast_path
"""

ESTIMATE = """
import logging

LOG = logging.getLogger(__name__)


def estimate(load, name):
    try:
        model = load(name, device="meta")
    except Exception:
        LOG.warning("meta load failed, skipping the estimate")
        return 0, 0
    return len(model.parameters()), sum(p.nbytes for p in model.parameters())


def estimate_other(load, name):
    try:
        model = load(name, device="meta")
    except Exception:
        LOG.warning("meta load failed, skipping the estimate")
        return 1, 1
    return len(model.parameters()), sum(p.nbytes for p in model.parameters())


def memory(load, name, distributed):
    count, size = 0, 0
    if distributed:
        count, size = estimate(load, name)
    other_count, other_size = 0, 0
    if distributed:
        other_count, other_size = estimate_other(load, name)
    return count + other_count, size + other_size
"""

COPY = """
import logging
import time

LOG = logging.getLogger(__name__)


def accumulate(total, partial):
    try:
        total.add_(partial.to(device=total.device))
    except:
        LOG.warning("retry 1/2 in 0.25s")
        time.sleep(0.25)
        try:
            total.add_(partial.to(device=total.device))
        except:
            LOG.warning("retry 2/2 in 0.75s")
            time.sleep(0.75)
            total.add_(partial.to(device=total.device))


def accumulate_on_cpu(total, partial):
    try:
        total.add_(partial.to(device=total.device))
    except Exception:
        LOG.warning("copy failed, adding on the cpu")
        total.add_(partial.to(device="cpu"))
"""

DAMPING = """
import torch


def invert(hessian, damp, rows):
    attempts = 0
    while True:
        try:
            d = torch.arange(rows)
            hessian[d, d] += damp
            inverse = torch.linalg.cholesky(hessian)
            break
        except RuntimeError:
            damp *= 1.2
            attempts += 1
            if attempts == 10:
                raise ValueError("Hessian is not invertible")
    return inverse


def invert_unbounded(hessian, damp, rows, limit):
    attempts = 0
    while True:
        try:
            d = torch.arange(rows)
            hessian[d, d] += damp
            inverse = torch.linalg.cholesky(hessian)
            break
        except RuntimeError:
            damp *= 1.2
            attempts += 1
            if damp > limit:
                raise ValueError("Hessian is not invertible")
    return inverse
"""

EXT = """
build_jit = False
try:
    import fastext_c
except ModuleNotFoundError:
    build_jit = True
except ImportError as e:
    if "undefined symbol" in str(e):
        print("the prebuilt extension was built for another version")
        raise e

if build_jit:
    from .build import load

    fastext_c = load("fastext_c")

ext_c = fastext_c
"""

EXT_STUB = """
build_jit = False
try:
    import fastext_c
except ModuleNotFoundError:
    build_jit = True
except ImportError as e:
    if "undefined symbol" in str(e):
        print("the prebuilt extension was built for another version")
        raise e
    fastext_c = None

if build_jit:
    from .build import load

    fastext_c = load("fastext_c")

ext_c = fastext_c
"""

EXCHANGE = """
import warnings

import torch.distributed as dist


def exchange(runtime, group, size):
    try:
        handle = runtime.get_ipc_handle()
        handles = [None] * size
        dist.all_gather(handles, handle, group)
        runtime.sync_handles(handles)
    except Exception:
        warnings.warn("failed to exchange handles, falling back")
    return runtime.use_fast_path()


def exchange_locally(runtime, size):
    try:
        handle = runtime.get_ipc_handle()
        handles = [handle] * size
        runtime.sync_handles(handles)
    except Exception:
        warnings.warn("failed to exchange handles, falling back")
    return runtime.use_fast_path()
"""

FILES = {
    "pkg/owner.py": OWNER,
    "pkg/abort.py": ABORT,
    "pkg/runtime.py": RUNTIME,
    "pkg/estimate.py": ESTIMATE,
    "pkg/copy.py": COPY,
    "pkg/damping.py": DAMPING,
    "pkg/ext.py": EXT,
    "pkg/ext_stub.py": EXT_STUB,
    "pkg/exchange.py": EXCHANGE,
}


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round26_tune25")
    base = {"pkg/__init__.py": "", "pkg/torch_project.py": TORCH_PROJECT, **{name: "" for name in FILES}}
    return review_shapes(path, base, FILES)


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


def test_an_error_shown_and_handed_to_its_owner_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/owner.py", "Work.wait") == {}


@pytest.mark.parametrize("qualname", ["Work.wait_unshown", "Work.wait_untraced", "Work.wait_cleaned"])
def test_a_hand_over_unshown_or_to_another_call_stays_a_swallow(review: list[Finding], qualname: str) -> None:
    # one operation in the try: the swallow is the round-26 P3 (section "Round 26: severity by the width of the try")
    shown = _shown(review, "pkg/owner.py", qualname, "broad-except")
    assert shown == ("broad-except.swallows-one-operation", Severity.P3)


def test_an_import_read_only_in_the_else_block_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/abort.py", "destroy_buffers") == {}


def test_an_import_read_after_the_try_stays_reported(review: list[Finding]) -> None:
    assert "broad-except" in findings_by_rule(review, "pkg/abort.py", "destroy_buffers_and_count")


def test_an_older_query_of_the_same_object_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/runtime.py", "Buffer.__init__") == {}


def test_a_handler_call_with_arguments_is_no_older_query(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/runtime.py", "Buffer.choose", "broad-except")
    assert shown == ("broad-except.swallows-one-operation", Severity.P3)


def test_the_value_every_caller_has_when_it_skips_the_call_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/estimate.py", "estimate") == {}


def test_another_constant_than_the_callers_stays_constant_data(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/estimate.py", "estimate_other", "broad-except")
    assert shown == ("broad-except.constant-data", Severity.P2)


def test_the_same_statement_retried_unguarded_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/copy.py", "accumulate") == {}


def test_a_retry_with_other_arguments_stays_reported(review: list[Finding]) -> None:
    assert "broad-except" in findings_by_rule(review, "pkg/copy.py", "accumulate_on_cpu")


def test_a_counted_retry_that_raises_when_spent_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/damping.py", "invert") == {}


def test_a_raise_whose_test_reads_no_counter_stays_reported(review: list[Finding]) -> None:
    shown = _shown(review, "pkg/damping.py", "invert_unbounded", "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


def test_an_import_error_let_through_with_the_name_unbound_is_reported(review: list[Finding]) -> None:
    found = [f for f in review if f.path == "pkg/ext.py" and f.rule == "broad-except"]
    assert [(f.message_id, f.severity, f.line_start, f.params["name"]) for f in found] == [
        ("broad-except.import-unbound", Severity.P2, 6, "fastext_c")
    ]
    assert "line 16" in found[0].message


def test_an_import_error_handler_binding_a_stub_gives_nothing(review: list[Finding]) -> None:
    assert [f for f in review if f.path == "pkg/ext_stub.py"] == []


def test_a_swallow_around_a_collective_names_it(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/exchange.py", "exchange")["broad-except"]
    assert finding.message_id == "broad-except.swallows"
    assert "the collective `dist.all_gather`" in finding.message


def test_a_swallow_without_a_collective_does_not_name_one(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/exchange.py", "exchange_locally")["broad-except"]
    assert finding.message_id == "broad-except.swallows"
    assert "collective" not in finding.message
