"""The precision benchmark's round-6 classes, each next to its near miss that still fires, on a real
git repo reviewed statically (`--suites none`):

- an error handed on in a tuple result counts only when no caller in the changed files drops it;
- a fallback "reported" with only the exception's class (`type(e)`) drops the cause;
- an optional third-party import whose handler records the absence in a flag;
- an import whose failure is announced and whose names stay unbound (a use fails loudly);
- at import, a name rebound to a wrapped version of itself keeps the original when wrapping fails;
- a failed write logged with its traceback and its partial output removed.

These are the classes of the false findings and misses of the round-5 held-out set
(flash-linear-attention, optimum-quanto, coremltools, TransformerEngine, tilelang), now in the
tuning set of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding

BACKENDS = """
class Backend:
    def verify(self, verifier, *args):
        try:
            return verifier(*args)
        except Exception as e:
            return False, str(e)

    def check(self, verifier, *args):
        try:
            return verifier(*args)
        except Exception as e:
            return False, str(e)


def dispatch(backend, verifier, args):
    can_use, _ = backend.verify(verifier, *args)
    ok, reason = backend.check(verifier, *args)
    if not ok:
        raise RuntimeError(reason)
    return can_use
"""

KERNELS = """
import warnings


def run_kernel(fast, slow, x):
    try:
        return fast(x)
    except Exception as e:
        warnings.warn(f"the optimized kernel failed: {e}; using the Python one")
    return slow(x)


def run_kernel_type_only(fast, slow, x):
    try:
        return fast(x)
    except Exception as e:
        warnings.warn(f"A {type(e)} exception occurred in the optimized kernel; using the Python one")
    return slow(x)
"""

OPTIONAL_PIL = """
_HAS_PIL = True
try:
    from PIL import Image
except:
    _HAS_PIL = False
"""

OWN_EXTENSION = """
try:
    from . import _C
except:
    _C = None
"""

PATCH = """
import logging

import torch

logger = logging.getLogger(__name__)


def patch_codegen():
    try:
        from torch._inductor.codegen.triton import TritonOverrides
    except Exception as e:
        logger.debug("could not import TritonOverrides: %s", e)
        return
    TritonOverrides.minimum = torch.minimum
"""

DEFERRED = """
import warnings

try:
    from pkg.ext.semiring import cal_a
except Exception:
    warnings.warn("Failed to import the semiring extension; build it to use chunk_fuse.")


def chunk_fuse(x):
    return cal_a(x)
"""

DEFERRED_WITH_DEFAULT = """
import warnings

cal_a = None
try:
    from pkg.ext.semiring import cal_a
except Exception:
    warnings.warn("Failed to import the semiring extension; build it to use chunk_fuse.")


def chunk_fuse(x):
    return cal_a(x) if cal_a is not None else x
"""

AUTOTUNE = """
import triton


def kernel(x):
    return x


try:
    kernel = triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])(kernel)
except RuntimeError:
    pass
"""

AUTOTUNE_OTHER_NAME = """
import triton


def kernel(x):
    return x


try:
    tuned_kernel = triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n"])(kernel)
except RuntimeError:
    pass
"""

CACHE = """
import logging
import os
import shutil

logger = logging.getLogger(__name__)


def save_result(write, staging, path):
    try:
        write(staging)
        os.rename(staging, path)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        logger.exception("could not save the autotune result")


def save_result_quietly(write, staging, path):
    try:
        write(staging)
        os.rename(staging, path)
    except Exception:
        shutil.rmtree(staging, ignore_errors=True)
        logger.warning("could not save the autotune result")
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    base = {"pkg/__init__.py": "", "pkg/base.py": "X = 1\n"}
    return review_shapes(
        tmp_path_factory.mktemp("round6") / "r",
        base,
        {
            "pkg/backends.py": BACKENDS,
            "pkg/kernels.py": KERNELS,
            "pkg/optional_pil.py": OPTIONAL_PIL,
            "pkg/own_extension.py": OWN_EXTENSION,
            "pkg/patch.py": PATCH,
            "pkg/deferred.py": DEFERRED,
            "pkg/deferred_with_default.py": DEFERRED_WITH_DEFAULT,
            "pkg/autotune.py": AUTOTUNE,
            "pkg/autotune_other_name.py": AUTOTUNE_OTHER_NAME,
            "pkg/cache.py": CACHE,
        },
    )


def test_an_error_handed_on_counts_only_when_the_caller_keeps_it(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/backends.py", "Backend.check") == {}
    # near miss: the only caller unpacks the error into `_`
    found = findings_by_rule(review, "pkg/backends.py", "Backend.verify")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_a_fallback_reported_with_the_type_only_drops_the_cause(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/kernels.py", "run_kernel") == {}
    found = findings_by_rule(review, "pkg/kernels.py", "run_kernel_type_only")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_an_optional_third_party_import_recorded_in_a_flag(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/optional_pil.py", "") == {}
    # near misses: the repository's own extension, and an internal of a package the file needs
    # anyway whose handler only returns
    own = findings_by_rule(review, "pkg/own_extension.py", "")["broad-except"]
    assert own.message_id == "broad-except.swallows-one-operation"
    patch = findings_by_rule(review, "pkg/patch.py", "patch_codegen")["broad-except"]
    assert patch.message_id == "broad-except.swallows-one-operation"


def test_an_announced_import_failure_whose_names_stay_unbound(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/deferred.py", "") == {}
    # near miss: a default bound above the try, so the feature quietly goes missing
    found = findings_by_rule(review, "pkg/deferred_with_default.py", "")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_a_wrapper_that_cannot_be_built_at_import_keeps_the_original(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/autotune.py", "") == {}
    # near miss: a different name, left unbound when wrapping fails
    found = findings_by_rule(review, "pkg/autotune_other_name.py", "")["runtime-error-fallback"]
    assert found.message_id == "runtime-error-fallback.no-oom-reraise"


def test_a_failed_write_logged_with_its_traceback_and_discarded(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/cache.py", "save_result") == {}
    # near miss: the same removal, logged without the traceback or the exception
    found = findings_by_rule(review, "pkg/cache.py", "save_result_quietly")["broad-except"]
    assert found.message_id == "broad-except.swallows"
