"""The precision benchmark's round-4 classes, each next to its near miss that still fires, on a real
git repo reviewed statically (`--suites none`):

- a process or request boundary: the handler logs the traceback and ends the process with a
  failing status (`os._exit(1)`, `sys.exit(2)`), or counts the failed request and answers it with a
  response carrying a failure marker (`finish_reason="error"`);
- a fallback stated in the function's docstring that hands back a value already at hand (an
  argument, a result computed before the try), not a substitute computed in the handler;
- a lookup of an installed distribution (`importlib.metadata`) whose other statements only parse
  its answer, with a constant fallback: "not installed" is the expected case;
- a conversion through a helper of the revision that always raises is no fallback.

These are the classes of the false findings of the round-3 held-out set (bitsandbytes, Liger-Kernel,
lmdeploy, FlagGems), now in the tuning set of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding

BOUNDARY = """
import logging
import os
import sys

logger = logging.getLogger(__name__)


def run_child(serve):
    try:
        serve()
    except Exception:
        logger.exception("server process failed")
        os._exit(1)


def run_cli(main):
    try:
        main()
    except Exception:
        logger.exception("command failed")
        sys.exit(2)


def run_quietly(main):
    try:
        main()
    except Exception:
        logger.exception("command failed")
        sys.exit(0)


async def generate(request, processor, metrics, Response):
    try:
        prompt = await processor.prepare(request)
    except Exception:
        logger.exception("prompt processing failed")
        metrics.increase_failed_requests("error")
        yield Response(text="prompt error", finish_reason="error")
        return
    yield Response(text=prompt, finish_reason="stop")


async def generate_anyway(request, processor, Response):
    try:
        prompt = await processor.prepare(request)
    except Exception:
        logger.exception("prompt processing failed")
        yield Response(text="", finish_reason="stop")
        return
    yield Response(text=prompt, finish_reason="stop")
"""

DOCUMENTED = '''
def try_compile(fn, compile):
    """Compile `fn`; falls back to the original function if compilation fails."""

    def decorator(f):
        try:
            compiled = compile(f)

            def wrapper(*args):
                try:
                    return compiled(*args)
                except Exception:
                    return f(*args)

            return wrapper
        except Exception:
            return f

    return decorator(fn)


def device_arch(device, probe):
    """The device's architecture; falling back to the device type when it cannot be read."""
    try:
        return probe(device)
    except Exception:
        return device


def device_arch_undocumented(device, probe):
    """The device's architecture."""
    try:
        return probe(device)
    except Exception:
        return device
'''

PACKAGES = """
from importlib.metadata import metadata

from packaging import version


def plugin_version():
    try:
        meta = metadata("some-plugin")
        raw = meta.get("Version")
        if raw:
            parsed = version.parse(raw)
    except Exception:
        parsed = None
    return parsed


def plugin_version_and_init(init):
    try:
        meta = metadata("some-plugin")
        raw = meta.get("Version")
        init()
    except Exception:
        raw = None
    return raw
"""

ERRORS = """
def replace_error(error):
    raise RuntimeError(error, "replacing the operator failed")


def maybe_error(error):
    if error:
        return None
    raise RuntimeError(error)
"""

HELPERS = """
from pkg import errors


def load_ops(load):
    try:
        return load("ops")
    except RuntimeError as e:
        errors.replace_error(e)


def load_fused(load):
    try:
        return load("fused")
    except RuntimeError as e:
        errors.maybe_error(e)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    base = {"pkg/__init__.py": "", "pkg/base.py": "X = 1\n", "pkg/nn.py": TORCH_PROJECT}
    return review_shapes(
        tmp_path_factory.mktemp("round4") / "r",
        base,
        {
            "pkg/boundary.py": BOUNDARY,
            "pkg/documented.py": DOCUMENTED,
            "pkg/packages.py": PACKAGES,
            "pkg/errors.py": ERRORS,
            "pkg/helpers.py": HELPERS,
        },
    )


def test_a_process_or_request_boundary_that_records_the_failure(review: list[Finding]) -> None:
    for name in ("run_child", "run_cli", "generate"):
        assert findings_by_rule(review, "pkg/boundary.py", name) == {}, name
    # near misses: a successful exit status hides the failure; an answer that looks like a normal one
    for name in ("run_quietly", "generate_anyway"):
        assert (
            findings_by_rule(review, "pkg/boundary.py", name)["broad-except"].message_id
            == "broad-except.swallows-one-operation"
        ), name


def test_a_fallback_stated_in_the_docstring_to_a_value_at_hand(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/documented.py", "device_arch") == {}
    outer = [f for f in review if f.path == "pkg/documented.py" and f.qualname == "try_compile.decorator"]
    assert outer == []
    # near misses: a substitute computed in the handler (re-running the function eagerly on every
    # error of the compiled call), and the same fallback with a docstring that does not state it
    inner = findings_by_rule(review, "pkg/documented.py", "try_compile.decorator.wrapper")["broad-except"]
    assert inner.message_id == "broad-except.swallows-one-operation"
    undocumented = findings_by_rule(review, "pkg/documented.py", "device_arch_undocumented")["broad-except"]
    assert undocumented.message_id == "broad-except.swallows-one-operation"


def test_an_installed_package_lookup_is_a_guarded_probe(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/packages.py", "plugin_version") == {}
    # near miss: a call that does not work on the lookup's answer can fail for another reason
    found = findings_by_rule(review, "pkg/packages.py", "plugin_version_and_init")["broad-except"]
    assert found.message_id == "broad-except.swallows"
    assert found.extra["wide_calls"] == 3


def test_a_conversion_through_a_helper_that_always_raises(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/helpers.py", "load_ops") == {}
    # near miss: a helper that may return leaves the handler a fallback
    found = findings_by_rule(review, "pkg/helpers.py", "load_fused")["runtime-error-fallback"]
    assert found.message_id == "runtime-error-fallback.no-oom-reraise"
