"""The precision benchmark's round-22 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`).

- The same computation retried on the CPU, its failure propagated (`device_retry.cpu_retry`): an
  `except RuntimeError` whose handler runs the try's statements again with the CPU as their device,
  unguarded or in a nested try that re-raises, is `P3` `runtime-error-fallback.cpu-retry`, not the
  `P2` `no-oom-reraise` (auto-round's RTN fallbacks). Near misses: other arguments in the retry, a
  retry whose failure is swallowed, a retry on another accelerator, the device set on an attribute
  before the call (auto-round's final blockwise fallback): `no-oom-reraise` as before.
- A failed read of a cache taken for a miss (`cache_read.cache_miss`): the try reads a file its
  names call a cache and writes nothing, the handler logs, removes the entry and answers "nothing
  cached": nothing (lm-evaluation-harness's request cache, Horovod's check cache). Near misses: a
  file not named a cache, a try that also writes the cache, a handler that computes a substitute:
  `broad-except.swallows` as before.
- The function's own CPU route, its result moved to the device (`own_route`): a handler that runs
  the statements of the function's CPU branch and moves the last value `.to(device)` gives nothing
  (ktransformers' GGUF dequantization). Near misses: a statement that stands nowhere else, another
  move than `.to(...)` of the whole value: `broad-except.swallows` as before.
- A handler that reads a module-level name the change removed (`handler_raises`,
  `handler-raises.removed-name`, P2): the name moved into a function, the handler's own lines
  unchanged, is reported on the handler (gpt-neox's fused-kernel install hint). Near misses: a name
  the head still binds at module level, one the handler's function binds, one its class body binds,
  a read under a condition.
- A handler whose test of the caught exception the change dropped (`guarded_code.drops_exception_test`,
  read by the engine): the base's `if is_oom(e):` around the fallback, the head's fallback for every
  `RuntimeError`, on the same unchanged `except` line, is reported although the base had the same
  fingerprint (auto-round's importance-matrix quantization). Near misses: a head handler that still
  tests the exception another way, a base handler that tested a flag: not reported, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

KERNELS = """
def quantize(w, **cfg):
    return w


def wrap(m, tuning=True):
    return m


DEQUANT_CPU = {}
DEQUANT_GPU = {}
"""

RETRY = """
import logging
import traceback

import torch

from .kernels import quantize, wrap

LOG = logging.getLogger(__name__)


def quantize_weight(weight, device, cfg):
    try:
        q = quantize(weight.to(device), **cfg)
    except RuntimeError:
        error = traceback.format_exc()
        try:
            LOG.info("out of memory, falling back to CPU")
            q = quantize(weight.to("cpu"), **cfg)
        except Exception:
            LOG.error(error)
            raise
    return q


def quantize_module(m, device):
    try:
        m.to(device)
        m = wrap(m, tuning=False)
        m.to("cpu")
    except RuntimeError:
        LOG.warning("out of memory, falling back to CPU")
        m.to("cpu")
        m = wrap(m, tuning=False)
    return m


def quantize_cuda(weight, cfg):
    try:
        q = quantize(weight.cuda(), **cfg)
    except RuntimeError:
        q = quantize(weight.cpu(), **cfg)
    return q


def quantize_other_args(weight, device, cfg):
    try:
        q = quantize(weight.to(device), **cfg)
    except RuntimeError:
        q = quantize(weight.to("cpu"), fast=True)
    return q


def quantize_guarded(weight, device, cfg):
    try:
        q = quantize(weight.to(device), **cfg)
    except RuntimeError:
        try:
            q = quantize(weight.to("cpu"), **cfg)
        except ValueError:
            q = None
    return q


def quantize_other_gpu(weight, cfg):
    try:
        q = quantize(weight.to("cuda:0"), **cfg)
    except RuntimeError:
        q = quantize(weight.to("cuda:1"), **cfg)
    return q


class Quantizer:
    def run(self, names):
        try:
            self.blockwise(names)
        except RuntimeError:
            before = self.device
            self.device = "cpu"
            self.blockwise(names)
            self.device = before
"""


CACHE = """
import os
import pickle

import dill

from .kernels import quantize

CACHE_DIR = "/tmp/cache"


def _cache_path(name):
    return os.path.join(CACHE_DIR, name)


def load_cached(name):
    try:
        path = _cache_path(name)
        with open(path, "rb") as f:
            return dill.loads(f.read())
    except Exception:
        print(name, "is not cached")


class Checks:
    def __init__(self, cache_file):
        self._cache_file = cache_file

    def _load(self, path):
        with open(path, "rb") as f:
            return pickle.load(f)

    def corrupt_and_deleted(self):
        try:
            _ = self._load(self._cache_file)
            return False
        except Exception:
            os.remove(self._cache_file)
            return True


def load_config(path):
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except Exception:
        return None


def load_and_refresh(name):
    try:
        path = _cache_path(name)
        with open(path, "rb") as f:
            value = pickle.load(f)
        with open(path, "wb") as f:
            pickle.dump(value, f)
        return value
    except Exception:
        return None


def load_or_compute(name, weight):
    try:
        with open(_cache_path(name), "rb") as f:
            return pickle.load(f)
    except Exception:
        return quantize(weight)
"""


DEQUANT = """
import torch

from .kernels import DEQUANT_CPU, DEQUANT_GPU


def dequant(name, data, device):
    if "cuda" in device:
        try:
            values = DEQUANT_GPU[name](data, device)
        except Exception:
            values = DEQUANT_CPU[name](data)
            values = torch.from_numpy(values.copy()).to(device)
    else:
        values = DEQUANT_CPU[name](data)
        values = torch.from_numpy(values.copy())
    return values.view(-1)


def dequant_other_input(name, data, device):
    if "cuda" in device:
        try:
            values = DEQUANT_GPU[name](data, device)
        except Exception:
            values = DEQUANT_CPU[name](data[::2])
            values = torch.from_numpy(values.copy()).to(device)
    else:
        values = DEQUANT_CPU[name](data)
        values = torch.from_numpy(values.copy())
    return values.view(-1)


def dequant_half(name, data, device):
    if "cuda" in device:
        try:
            values = DEQUANT_GPU[name](data, device)
        except Exception:
            values = DEQUANT_CPU[name](data)
            values = torch.from_numpy(values.copy()).to(device).half()
    else:
        values = DEQUANT_CPU[name](data)
        values = torch.from_numpy(values.copy())
    return values.view(-1)
"""


BUILD_BASE = """
import pathlib

srcpath = pathlib.Path(__file__).parent
buildpath = srcpath / "build"
name = "kernels"


def load():
    return srcpath


def load_kernels():
    try:
        import fused_softmax
    except ImportError as e:
        print(e)
        print(f"please run pip install {srcpath}")
        raise SystemExit(1)
    return fused_softmax


def load_kernels_late():
    try:
        import fused_rope
    except ImportError as e:
        if "rope" in str(e):
            print(f"please run pip install {srcpath}")
        raise
    return fused_rope


def build():
    try:
        import fused_norm
    except ImportError:
        print(f"please build into {buildpath}")
        raise
    return fused_norm


def named():
    try:
        import fused_gelu
    except ImportError:
        print(f"please install {name}")
        raise
    return fused_gelu


class Loader:
    try:
        import fused_adam
    except ImportError:
        print(f"please install {srcpath}")
"""

BUILD = """
import pathlib

buildpath = None
name = "kernels"


def load():
    srcpath = pathlib.Path(__file__).parent
    return srcpath


def load_kernels():
    try:
        import fused_softmax
    except ImportError as e:
        print(e)
        print(f"please run pip install {srcpath}")
        raise SystemExit(1)
    return fused_softmax


def load_kernels_late():
    try:
        import fused_rope
    except ImportError as e:
        if "rope" in str(e):
            print(f"please run pip install {srcpath}")
        raise
    return fused_rope


def build():
    try:
        import fused_norm
    except ImportError:
        print(f"please build into {buildpath}")
        raise
    return fused_norm


def named(name="gelu"):
    try:
        import fused_gelu
    except ImportError:
        print(f"please install {name}")
        raise
    return fused_gelu


class Loader:
    srcpath = pathlib.Path(__file__).parent
    try:
        import fused_adam
    except ImportError:
        print(f"please install {srcpath}")
"""


OOM_BASE = """
import torch

from .kernels import quantize, wrap


def is_oom(e):
    return "out of memory" in str(e)


def run(model, blocks):
    try:
        quantize(model)
    except RuntimeError as e:
        if is_oom(e):
            wrap(blocks)


def run_message(model, blocks):
    try:
        quantize(model)
    except RuntimeError as e:
        if is_oom(e):
            wrap(blocks)


def run_flag(model, blocks, low_memory):
    try:
        quantize(model)
    except RuntimeError as e:
        if low_memory:
            wrap(blocks)
"""

OOM = """
import torch

from .kernels import quantize, wrap


def is_oom(e):
    return "out of memory" in str(e)


def run(model, blocks):
    try:
        quantize(model)
    except RuntimeError as e:
        print("out of memory, quantizing blockwise")
        wrap(blocks)


def run_message(model, blocks):
    try:
        quantize(model)
    except RuntimeError as e:
        if "out of memory" in str(e):
            wrap(blocks)


def run_flag(model, blocks, low_memory):
    try:
        quantize(model)
    except RuntimeError as e:
        print("quantizing blockwise")
        wrap(blocks)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round22")
    base = {
        "pkg/__init__.py": "",
        "pkg/kernels.py": KERNELS,
        "pkg/retry.py": "",
        "pkg/cache.py": "",
        "pkg/dequant.py": "",
        "pkg/build.py": BUILD_BASE,
        "pkg/oom.py": OOM_BASE,
    }
    shapes = {
        "pkg/retry.py": RETRY,
        "pkg/cache.py": CACHE,
        "pkg/dequant.py": DEQUANT,
        "pkg/build.py": BUILD,
        "pkg/oom.py": OOM,
    }
    return review_shapes(path, base, shapes)


def _shown(review: list[Finding], path: str, qualname: str, rule: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize("qualname", ["quantize_weight", "quantize_module", "quantize_cuda"])
def test_the_same_computation_retried_on_the_cpu_is_a_p3(review: list[Finding], qualname: str) -> None:
    shown = _shown(review, "pkg/retry.py", qualname, "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.cpu-retry", Severity.P3)


def test_the_cpu_retry_says_what_still_goes_wrong(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/retry.py", "quantize_weight")["runtime-error-fallback"]
    assert "same computation on the CPU" in finding.message


@pytest.mark.parametrize("qualname", ["quantize_other_args", "quantize_guarded", "quantize_other_gpu", "Quantizer.run"])
def test_near_misses_of_the_cpu_retry_stay_no_oom_reraise(review: list[Finding], qualname: str) -> None:
    shown = _shown(review, "pkg/retry.py", qualname, "runtime-error-fallback")
    assert shown == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


@pytest.mark.parametrize("qualname", ["load_cached", "Checks.corrupt_and_deleted"])
def test_a_failed_cache_read_taken_for_a_miss_gives_nothing(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/cache.py", qualname) == {}


@pytest.mark.parametrize("qualname", ["load_config", "load_and_refresh", "load_or_compute"])
def test_near_misses_of_the_cache_miss_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/cache.py", qualname, "broad-except") == ("broad-except.swallows", Severity.P2)


def test_the_functions_own_cpu_route_moved_to_the_device_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/dequant.py", "dequant") == {}


@pytest.mark.parametrize("qualname", ["dequant_other_input", "dequant_half"])
def test_near_misses_of_the_moved_cpu_route_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/dequant.py", qualname, "broad-except") == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def test_a_handler_reading_a_module_name_the_change_removed_raises_name_error(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/build.py", "load_kernels").get("handler-raises")
    assert finding is not None
    handler_line = BUILD.lstrip("\n").splitlines().index("    except ImportError as e:") + 1
    assert (finding.message_id, finding.severity) == ("handler-raises.removed-name", Severity.P2)
    assert finding.line_start == handler_line
    assert "`srcpath`" in finding.message and not finding.in_diff


@pytest.mark.parametrize("qualname", ["load_kernels_late", "build", "named", "Loader"])
def test_near_misses_of_the_removed_name_give_nothing(review: list[Finding], qualname: str) -> None:
    assert "handler-raises" not in findings_by_rule(review, "pkg/build.py", qualname)


def test_a_dropped_test_of_the_caught_exception_makes_the_unchanged_handler_new(review: list[Finding]) -> None:
    assert _shown(review, "pkg/oom.py", "run", "runtime-error-fallback") == (
        "runtime-error-fallback.no-oom-reraise",
        Severity.P2,
    )


@pytest.mark.parametrize("qualname", ["run_message", "run_flag"])
def test_near_misses_of_the_dropped_test_stay_unreported(review: list[Finding], qualname: str) -> None:
    assert findings_by_rule(review, "pkg/oom.py", qualname) == {}
