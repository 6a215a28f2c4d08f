"""Exception-handler shapes the rules leave alone, each next to its near miss that still fires, on a
real git repo reviewed statically (`--suites none`):

- a *filter*: the handler re-raises what its test of the caught exception does not recognise (an
  OOM-retry decorator halving the batch size);
- a *guarded probe*: one operation, a constant fallback, and the expected failure named in a
  comment next to the try (an optional extension's import; `except RuntimeError` around a device
  query documented to raise without a device);
- a warning-announced fallback: the handler falls through to a warning right after the try.

These are the classes of the four false findings of the precision benchmark's round-1 held-out set
(`reviewbot/bench_precision_corpus/accel-*`)."""

from __future__ import annotations

import pytest
from engine_gitrepos import TORCH_PROJECT, review_shapes

from reviewbot.findings import Finding

BASE = """
import logging
import warnings

logger = logging.getLogger(__name__)


def eager(fn):
    return fn()
"""

FILTERS = """

def should_reduce_batch_size(error):
    return isinstance(error, RuntimeError) and "out of memory" in str(error)


def retry_on_oom(function, batch_size):
    while True:
        try:
            return function(batch_size)
        except Exception as e:
            if should_reduce_batch_size(e):
                batch_size //= 2
            else:
                raise


def retry_unless_not_oom(function, batch_size):
    while True:
        try:
            return function(batch_size)
        except Exception as e:
            if not should_reduce_batch_size(e):
                raise
            batch_size //= 2


def retry_by_count(function, batch_size, attempts):
    while True:
        try:
            return function(batch_size)
        except Exception as e:
            if attempts > 0:
                attempts -= 1
            else:
                raise e


def keeps_all_but_oom(fn):
    try:
        return fn()
    except Exception as e:
        if should_reduce_batch_size(e):
            raise
        return None
"""

PROBES = """

def has_ext_documented():
    # NOTE: importing the extension may raise in some environments,
    # e.g. a CPU-only container with the package installed
    try:
        import ext  # noqa: F401
    except Exception:
        return False
    return True


def has_ext_undocumented():
    try:
        import ext  # noqa: F401
    except Exception:
        return False
    return True


def has_ext_no_expectation():
    # flag the error
    try:
        import ext  # noqa: F401
    except Exception:
        return False
    return True


def has_ext_two_operations(load):
    # importing the extension may raise in CPU-only containers
    try:
        import ext  # noqa: F401
        load(ext)
    except Exception:
        return False
    return True


def run_documented(strategy, tokens):
    try:
        return strategy.execute(tokens)
    except Exception:
        # may fail when the strategy is not installed
        print("strategy failed")


def device_ready(dev):
    try:
        # Will raise a RuntimeError if no device is configured
        _ = dev.probe()
        return True
    except RuntimeError:
        return False


def device_ready_undocumented(dev):
    try:
        _ = dev.probe()
        return True
    except RuntimeError:
        return False


def device_run_documented(dev, fn):
    try:
        # Will raise a RuntimeError if no device is configured
        return dev.run(fn)
    except RuntimeError:
        return eager(fn)
"""

WARNED = """

def free_memory(dev, index, new_api):
    if dev.legacy:
        return dev.legacy_free(index)
    elif new_api:
        try:
            return dev.mem_get_info(index)[0]
        except Exception:
            pass

    warnings.warn("the free-memory query is unavailable: the figure returned is the allocated memory instead")
    return dev.max_memory_allocated(index)


def free_memory_quiet(dev, index):
    try:
        return dev.mem_get_info(index)[0]
    except Exception:
        pass
    logger.info("using the allocated memory")
    return dev.max_memory_allocated(index)


def free_memory_implicit_none(dev, index):
    try:
        return dev.mem_get_info(index)[0]
    except Exception:
        pass
"""


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Finding]:
    findings = review_shapes(
        tmp_path_factory.mktemp("probes") / "r",
        {"pkg/__init__.py": "", "pkg/mod.py": BASE, "pkg/nn.py": TORCH_PROJECT},
        {"pkg/filters.py": BASE + FILTERS, "pkg/probes.py": BASE + PROBES, "pkg/warned.py": BASE + WARNED},
    )
    out = {(f.qualname, f.rule): f for f in findings}
    assert len(out) == len(findings), "one finding per function and rule"
    return out


def _rules(found: dict[tuple[str, str], Finding], qualname: str) -> set[str]:
    return {rule for name, rule in found if name == qualname}


def test_a_filter_on_the_caught_exception_is_not_a_swallow(found: dict[tuple[str, str], Finding]) -> None:
    assert _rules(found, "retry_on_oom") == set()
    assert _rules(found, "retry_unless_not_oom") == set()
    # near misses: the test does not look at the error, or re-raises what it recognises and keeps the rest
    assert found[("retry_by_count", "broad-except")].message_id == "broad-except.swallows-one-operation"
    assert found[("keeps_all_but_oom", "broad-except")].message_id == "broad-except.swallows-one-operation"


def test_a_documented_probe_is_not_reported(found: dict[tuple[str, str], Finding]) -> None:
    assert _rules(found, "has_ext_documented") == set()
    for near_miss in ("has_ext_undocumented", "has_ext_no_expectation"):
        assert found[(near_miss, "broad-except")].message_id == "broad-except.swallows-one-operation"
    # documented, but the try holds two operations: the comment covers only the import
    assert "broad-except" in _rules(found, "has_ext_two_operations")
    # documented, but the handler falls off the function: None replaces the try's result
    assert "broad-except" in _rules(found, "run_documented")


def test_a_fallback_announced_by_a_warning_is_not_reported(found: dict[tuple[str, str], Finding]) -> None:
    # the try is the last statement of an `elif`: the warning after the `if` is what runs next
    assert _rules(found, "free_memory") == set()
    assert found[("free_memory_quiet", "broad-except")].message_id == "broad-except.swallows-one-operation"
    assert found[("free_memory_implicit_none", "broad-except")].message_id == "broad-except.swallows-one-operation"


def test_a_documented_runtime_error_probe_is_not_a_missing_oom_reraise(
    found: dict[tuple[str, str], Finding],
) -> None:
    assert _rules(found, "device_ready") == set()
    undocumented = found[("device_ready_undocumented", "runtime-error-fallback")]
    assert undocumented.message_id == "runtime-error-fallback.no-oom-reraise"
    # documented, but the fallback runs other code (a compute fallback can take an OOM for "no device")
    fallback = found[("device_run_documented", "runtime-error-fallback")]
    assert fallback.message_id == "runtime-error-fallback.no-oom-reraise"
