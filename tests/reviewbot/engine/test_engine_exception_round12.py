"""The precision benchmark's round-12 rules (`reviewbot.rules.handler_reach`: what a handler's outcome
can reach), next to their near misses, on a real git repo reviewed statically (`--suites none`):

- a catch-all moved, not added: the same try body and handler stand in the base revision, moved under
  a new `elif` or into another file: nothing; the near misses change the handler's fallback value, or
  add a second copy of the moved code (still the P2 swallow);
- another implementation on the same inputs: `except RuntimeError` around `torch.ops.lib.fast(x, y)`
  whose handler calls `torch.ops.lib.slow(x, y)`: P3 `runtime-error-fallback.implementation-alternative`
  instead of the P2 no-OOM finding; the near misses hand the alternative other arguments, or fall back
  to another owner's function (still `no-oom-reraise`);
- nothing substituted: a try whose bindings nothing reads after it, the handler only warning (P3
  `broad-except.announced-skip`) or around a third-party import kept for its side effect (P3
  `broad-except.side-effect-import`); the near misses return a substitute from the handler, stay
  silent around the repository's own work, import the repository's own module, or read the imported
  name later or in a function defined above the try (still the P2 swallow);
- a result only reported: a private function whose constant fallback only a procedure that hands back
  nothing and only echoes uses (P3 `broad-except.report-only`); the near miss's private function is
  also called by a function that returns a value (still the P2 swallow).

The first is the class of intel-extension-for-pytorch's moved backend catch-all, the second of
torchrec's operator fallbacks, the third of IPEX's seed probe, nncf's PNG rendering and torchchat's
side-effect import, the fourth of ColossalAI's installation report: round 12's held-out set, now
tuning material of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

BACKEND_BASE = """
import warnings


def backend():
    return "inductor"


def compile_model(model, inputs):
    if backend() == "inductor":
        return model
    try:
        traced = trace(model, inputs)
        return traced
    except Exception:
        warnings.warn("tracing failed")
        return model


def trace(model, inputs):
    return model(*inputs)
"""

BACKEND_HEAD = """
import warnings


def backend():
    return "inductor"


def compile_model(model, inputs):
    if backend() == "inductor":
        return model
    elif backend() == "trace":
        try:
            traced = trace(model, inputs)
            return traced
        except Exception:
            warnings.warn("tracing failed")
            return model
    raise ValueError(backend())


def compile_changed(model, inputs):
    try:
        traced = trace(model, inputs)
        return traced
    except Exception:
        warnings.warn("tracing failed")
        return None


def trace(model, inputs):
    return model(*inputs)
"""

OLD_LOADER = """
import logging

logger = logging.getLogger(__name__)


def load(store, key):
    try:
        value = store.fetch(key)
        return value
    except Exception:
        logger.info("fetch failed")
        return None
"""

NEW_LOADER = """
import logging

logger = logging.getLogger(__name__)


class Loader:
    def load(self, store, key):
        try:
            value = store.fetch(key)
            return value
        except Exception:
            logger.info("fetch failed")
            return None


def load_again(store, key):
    try:
        value = store.fetch(key)
        return value
    except Exception:
        logger.info("fetch failed")
        return None
"""

OPS = """
import torch


def permute(recat, lengths, values):
    try:
        out = torch.ops.sparse.permute_1d(recat, lengths, values)
    except RuntimeError:
        out = torch.ops.sparse.permute_2d(recat, lengths, values)
    return out


def permute_fewer(recat, lengths, values):
    try:
        out = torch.ops.sparse.permute_1d(recat, lengths, values)
    except RuntimeError:
        out = torch.ops.sparse.permute_2d(recat, lengths)
    return out


def permute_eager(recat, lengths, values):
    try:
        out = torch.ops.sparse.permute_1d(recat, lengths, values)
    except RuntimeError:
        out = eager_permute(recat, lengths, values)
    return out


def eager_permute(recat, lengths, values):
    return values[recat]
"""

EFFECTS = """
import warnings

import kernels


def prepare(model, seed):
    try:
        kernels.manual_seed(seed)
    except:
        warnings.warn("the kernel library's seed is not set: call torch.manual_seed first")
    model.ready = True
    return model


def render(graph, path):
    graph.write_dot(path)
    try:
        picture = kernels.layout(graph)
        picture.draw(path + ".png")
    except Exception:
        warnings.warn("failed to render the graph")


def prepare_returning(model, seed):
    try:
        kernels.manual_seed(seed)
    except:
        warnings.warn("the kernel library's seed is not set")
        return None
    return model


class Worker:
    def step(self, state):
        try:
            self.save(state)
        except Exception:
            pass
        self.steps += 1

    def save(self, state):
        self.store.write(state)
"""

SIDE_EFFECT = """
try:
    import evalharness
except Exception:
    pass

try:
    import pkg.registry
except Exception:
    pass

try:
    import tokenizers
except Exception:
    pass


def tokenizer_version():
    return tokenizers.__version__


def accelerator_name():
    return accel.name()


try:
    import accel
except Exception:
    pass
"""

REGISTRY = """
KNOWN = {}
"""

REPORT = """
import click

import devices


def check_installation():
    cuda = _cuda_version()
    driver = _driver_version()
    if cuda is None:
        match = None
    else:
        match = _compatible(cuda, driver)
    click.echo(f"CUDA version: {cuda}")
    click.echo(f"driver version: {driver}")
    click.echo(f"match: {match}")


def _cuda_version():
    if devices.home() is None:
        version = None
    else:
        try:
            raw = devices.query("nvcc")
            version = raw.split()[-1]
        except:
            version = None
    return version


def _driver_version():
    try:
        version = devices.query("driver").strip()
    except:
        version = None
    return version


def _compatible(first, second):
    return first == second


def build_flags():
    return ["-DDRIVER=" + str(_driver_version())]
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round12") / "r",
        {
            "pkg/__init__.py": "",
            "pkg/backend.py": BACKEND_BASE,
            "pkg/old_loader.py": OLD_LOADER,
            "pkg/torch_project.py": TORCH_PROJECT,
        },
        {
            "pkg/backend.py": BACKEND_HEAD,
            "pkg/old_loader.py": None,
            "pkg/new_loader.py": NEW_LOADER,
            "pkg/ops.py": OPS,
            "pkg/effects.py": EFFECTS,
            "pkg/side_effect.py": SIDE_EFFECT,
            "pkg/registry.py": REGISTRY,
            "pkg/report.py": REPORT,
        },
    )


def _swallow(review: list[Finding], path: str, qualname: str) -> Finding:
    """The plain swallow of a try that guards one operation (round 26: a P3)."""
    found = findings_by_rule(review, path, qualname)["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.swallows-one-operation", Severity.P3), qualname
    return found


def test_a_catch_all_moved_under_a_new_elif_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/backend.py", "compile_model") == {}


def test_near_miss_the_moved_catch_all_with_another_fallback_value(review: list[Finding]) -> None:
    _swallow(review, "pkg/backend.py", "compile_changed")


def test_a_catch_all_moved_into_another_file_gives_nothing_once(review: list[Finding]) -> None:
    # the base holds one copy (pkg/old_loader.py, removed); the head two: both stay reported, since
    # the change adds one of them and the rule cannot tell which
    moved = findings_by_rule(review, "pkg/new_loader.py", "Loader.load")
    again = findings_by_rule(review, "pkg/new_loader.py", "load_again")
    assert "broad-except" in moved and "broad-except" in again


def test_a_catch_all_moved_into_another_file_alone_gives_nothing(tmp_path) -> None:
    findings = review_shapes(
        tmp_path / "r",
        {"pkg/__init__.py": "", "pkg/old_loader.py": OLD_LOADER},
        {"pkg/old_loader.py": None, "pkg/new_loader.py": NEW_LOADER.split("\n\ndef load_again")[0] + "\n"},
    )
    assert findings_by_rule(findings, "pkg/new_loader.py", "Loader.load") == {}


def test_another_implementation_on_the_same_inputs_is_a_p3(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/ops.py", "permute")["runtime-error-fallback"]
    assert (found.message_id, found.severity) == ("runtime-error-fallback.implementation-alternative", Severity.P3)
    assert found.params["alternative"] == "torch.ops.sparse.permute_2d"
    assert "on the same inputs" in found.message


def test_near_misses_other_arguments_or_another_owner_stay_no_oom(review: list[Finding]) -> None:
    for qualname in ("permute_fewer", "permute_eager"):
        found = findings_by_rule(review, "pkg/ops.py", qualname)["runtime-error-fallback"]
        assert (found.message_id, found.severity) == ("runtime-error-fallback.no-oom-reraise", Severity.P2), qualname


def test_an_announced_skip_of_an_effect_nothing_reads_is_a_p3(review: list[Finding]) -> None:
    for qualname in ("prepare", "render"):
        found = findings_by_rule(review, "pkg/effects.py", qualname)["broad-except"]
        assert (found.message_id, found.severity) == ("broad-except.announced-skip", Severity.P3), qualname


def test_near_misses_a_substitute_returned_or_the_repositorys_work_skipped_silently(review: list[Finding]) -> None:
    _swallow(review, "pkg/effects.py", "prepare_returning")
    _swallow(review, "pkg/effects.py", "Worker.step")


def _handler_lines(text: str) -> list[int]:
    """The lines of the `except` clauses of `text` as committed (the leading newline dropped)."""
    lines = text.lstrip("\n").splitlines()
    return [number for number, line in enumerate(lines, 1) if line.startswith("except")]


def test_a_third_party_import_kept_for_its_side_effect_is_a_p3(review: list[Finding]) -> None:
    line = _handler_lines(SIDE_EFFECT)[0]
    found = [f for f in review if f.path == "pkg/side_effect.py" and f.line_start == line]
    assert [(f.message_id, f.severity) for f in found] == [("broad-except.side-effect-import", Severity.P3)]


def test_near_misses_the_repositorys_own_module_or_a_name_read_later(review: list[Finding]) -> None:
    for line in _handler_lines(SIDE_EFFECT)[1:]:
        found = [f for f in review if f.path == "pkg/side_effect.py" and f.line_start == line]
        assert [(f.message_id, f.severity) for f in found] == [("broad-except.swallows-one-operation", Severity.P3)], (
            line
        )


def test_a_constant_only_a_report_shows_is_a_p3(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/report.py", "_cuda_version")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.report-only", Severity.P3)
    assert (found.params["where"], found.params["report"]) == ("_cuda_version", "check_installation")


def test_near_miss_a_private_result_that_also_reaches_a_returned_value(review: list[Finding]) -> None:
    _swallow(review, "pkg/report.py", "_driver_version")


GATHER_BASE = """
def gather(state, tensor):
    if state.distributed:
        try:
            if state.remainder > 0:
                return truncate(tensor, state.remainder)
            return tensor
        except Exception:
            return tensor
    return tensor


def truncate(tensor, length):
    return tensor[:length]
"""

GATHER_HEAD = """
def gather(state, tensor):
    try:
        if state.remainder > 0:
            return truncate(tensor, state.remainder)
        return tensor
    except Exception:
        return tensor


def truncate(tensor, length):
    return tensor[:length]
"""


def test_near_miss_a_catch_all_whose_guarding_condition_was_removed(tmp_path) -> None:
    # the same try and handler, but no longer under `if state.distributed:`: it now runs on one
    # process too, new situations in which an error becomes the untruncated tensor
    findings = review_shapes(
        tmp_path / "r", {"pkg/__init__.py": "", "pkg/gather.py": GATHER_BASE}, {"pkg/gather.py": GATHER_HEAD}
    )
    assert "broad-except" in findings_by_rule(findings, "pkg/gather.py", "gather")


WRAPPER = """
import logging

import torch

logger = logging.getLogger(__name__)


class CompilationWrapper:
    def __init__(self, func):
        self._func = func
        self._compiled = None

    def __call__(self, *args):
        if self._compiled is None:
            try:
                self._compiled = torch.compile(self._func)
                return self._compiled(*args)
            except Exception as e:
                logger.warning(f"could not compile, falling back to the original function: {e}")
                self._compiled = self._func
        return self._compiled(*args)


class BuildingWrapper:
    def __init__(self, func):
        self._func = func
        self._compiled = None

    def __call__(self, *args):
        if self._compiled is None:
            try:
                self._compiled = torch.compile(self._func)
                return self._compiled(*args)
            except Exception as e:
                logger.warning(f"could not compile, falling back: {e}")
                self._compiled = self._eager_variant()
        return self._compiled(*args)

    def _eager_variant(self):
        return torch.jit.script(self._func)
"""


def test_a_reported_fallback_to_a_value_at_hand_gives_nothing(tmp_path) -> None:
    findings = review_shapes(tmp_path / "r", {"pkg/__init__.py": ""}, {"pkg/wrapper.py": WRAPPER})
    assert findings_by_rule(findings, "pkg/wrapper.py", "CompilationWrapper.__call__") == {}
    # near miss: the fallback is computed in the handler (another compilation), not at hand; since
    # round 19 a warned fallback to another path, P3 unconfirmed
    other = findings_by_rule(findings, "pkg/wrapper.py", "BuildingWrapper.__call__")["broad-except"]
    assert (other.message_id, other.severity) == ("broad-except.reported-other-path", Severity.P3)
