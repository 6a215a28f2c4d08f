"""The precision benchmark's round-24 probe and diagnostics classes, next to their near misses, on real
git repos reviewed statically (`--suites none`).

- A yes/no probe answering "no" (`predicate_probe.negative_answer`): a function named as a predicate
  (`is_*`, `has_*`, `*_available`) whose one-statement try falls back to `False` (returned, bound to
  the name the try binds, already bound before the try, or by a nested probe of the same question),
  or a try binding the answer of a predicate-named call that the handler binds to `False`, is P3
  `broad-except.predicate-probe` (auto-round's `is_b70`, CuPy's `is_available`, ktransformers'
  capture probe, kernels' dynamo probe). Near misses: a predicate answering `True` on failure, a
  function that is no predicate (`shutdown` answering `False` for "failed"), a two-statement try, a
  handler binding a computed value: `broad-except.swallows` as before.
- A shown and dropped metrics write (`metrics_write.metrics_write`): a try that only calls a
  TensorBoard writer's `add_*` (under an `if` without calls), whose handler prints the traceback and
  goes on, is P3 `broad-except.metrics-write` (InternEvo's writer). Near misses: a try that also
  counts the steps, a silent handler: `broad-except.swallows` as before.
- A procedure that by its name only tries (`named_attempt.named_attempt`): a function named
  `_try_*` that hands back nothing, whose try stands in its body and whose handler logs and returns,
  is P3 `broad-except.named-attempt` (xtuner's NUMA binding). Near misses: the same body under
  another name, an attempt that returns a value, a silent handler, a handler that binds a
  substitute: `broad-except.swallows` as before.
- An optional package's route (`optional_route.optional_route`): a try that imports a third-party
  package the file imports nowhere else and returns the function's answer with it, whose handler
  passes, the function then computing the answer another way, is P3 `broad-except.optional-route`
  (Fuser's memory probe). Near misses: a package the file also imports unguarded, a function whose
  code after the try only returns a constant: `broad-except.swallows` as before.
- An undo of the code's own registration (`undo_registration.undoes_own_registration`): `try:
  backend.deregister_mem_pool(pool) except RuntimeError: pass` in a file that calls
  `backend.register_mem_pool(pool)` gives nothing (apex's NCCL memory pool). Near misses: the
  registration in such a try, an undo of something the file never registers, an undo with other
  arguments: `runtime-error-fallback.no-oom-reraise` as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

PROBES = """
import logging

import torch

LOG = logging.getLogger(__name__)

_available = None


def is_b70(device=0):
    try:
        name = torch.xpu.get_device_properties(device).name
    except Exception:
        return False
    return "0xe223" in name.lower()


def is_available():
    global _available
    if _available is None:
        _available = False
        try:
            _available = torch.cuda.device_count() > 0
        except Exception:
            pass
    return _available


def capture_state(x):
    try:
        is_capturing = torch.npu.is_current_stream_capturing()
    except Exception:
        is_capturing = False
    return x if is_capturing else x + 1


def _is_dynamo_compiling():
    try:
        import torch

        return torch.compiler.is_compiling()
    except Exception:
        try:
            import torch._dynamo as dynamo

            return dynamo.is_compiling()
        except Exception:
            LOG.debug("no dynamo")
            return False


def is_safe(path):
    try:
        return torch.load(path, weights_only=True) is not None
    except Exception:
        return True


def shutdown(group):
    try:
        return group.shutdown(cleanup_method="shutdown")
    except Exception:
        return False


def has_fast_kernels(device=0):
    try:
        props = torch.xpu.get_device_properties(device)
        name = props.name
    except Exception:
        return False
    return "fast" in name


def cuda_available(device=0):
    try:
        count = torch.cuda.device_count()
    except Exception:
        count = torch.cuda.is_initialized()
    return count > device
"""

WRITER = """
import traceback


class Writer:
    def __init__(self, tb_writer, enable_tb=True):
        self.tb_writer = tb_writer
        self.enable_tb = enable_tb
        self.steps = 0

    def add_scalar(self, key, value, step):
        try:
            if self.enable_tb and self.tb_writer is not None:
                self.tb_writer.add_scalar(tag=key, scalar_value=value, global_step=step)
        except Exception:
            traceback.print_exc()

    def add_counted(self, key, value, step):
        try:
            self.tb_writer.add_scalar(tag=key, scalar_value=value, global_step=step)
            self.steps += 1
        except Exception:
            traceback.print_exc()

    def add_quiet(self, key, value, step):
        try:
            self.tb_writer.add_text(tag=key, text_string=value, global_step=step)
        except Exception:
            pass
"""


TRAINER = """
import logging

from pkg.affinity import bind_nodes, node_count

logger = logging.getLogger(__name__)


class Trainer:
    def __init__(self, rank):
        self.rank = rank
        self.node = None

    def _try_bind_numa(self):
        if self.rank < 0:
            return
        try:
            numa_id = self.rank % node_count()
            bind_nodes(numa_id)
        except Exception:
            logger.info(f"Rank: {self.rank} failed to bind process to numa node.")
            return

    def bind_numa(self):
        try:
            numa_id = self.rank % node_count()
            bind_nodes(numa_id)
        except Exception:
            logger.info(f"Rank: {self.rank} failed to bind process to numa node.")
            return

    def try_pick_node(self):
        try:
            numa_id = self.rank % node_count()
            bind_nodes(numa_id)
        except Exception:
            logger.info("failed to bind process to numa node.")
            return None
        return numa_id

    def _try_bind_quiet(self):
        try:
            bind_nodes(self.rank % node_count())
        except Exception:
            pass

    def _try_bind_or_default(self):
        try:
            self.node = self.rank % node_count()
            bind_nodes(self.node)
        except Exception:
            logger.info("failed to bind process to numa node.")
            self.node = 0
"""

AFFINITY = """
def node_count():
    return 2


def bind_nodes(node):
    return node
"""


MEMORY = """
def available_memory_gb():
    try:
        import psutil

        return psutil.virtual_memory().available / 2**30
    except:  # noqa: E722
        pass
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 2**20
    except OSError:
        pass
    return 0


def total_memory_gb():
    try:
        import psutil

        return psutil.virtual_memory().total / 2**30
    except Exception:
        pass
    return 0
"""

MEMORY_NEEDED = """
import psutil


def cpu_memory_gb():
    try:
        import psutil.tests

        return psutil.virtual_memory().available / 2**30
    except Exception:
        pass
    with open("/proc/meminfo") as f:
        return int(f.readline().split()[1]) / 2**20
"""


POOL = """
import torch

_pool = torch.cuda.MemPool()
_other = torch.cuda.MemPool()


class PoolContext:
    def __init__(self, group, device):
        self.group = group
        self.device = device

    def __enter__(self):
        backend = self.group._get_backend(self.device)
        try:
            backend.deregister_mem_pool(_pool)
        except RuntimeError:
            pass

    def __exit__(self, *args):
        backend = self.group._get_backend(self.device)
        try:
            backend.register_mem_pool(_pool)
        except RuntimeError:
            pass

    def release_other(self):
        backend = self.group._get_backend(self.device)
        try:
            backend.deregister_mem_pool(_other)
        except RuntimeError:
            pass

    def release_hook(self):
        backend = self.group._get_backend(self.device)
        try:
            backend.unregister_hook(_pool)
        except RuntimeError:
            pass
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round24probe")
    base = {"pkg/__init__.py": "", "pkg/probes.py": "", "pkg/writer.py": "", "pkg/affinity.py": AFFINITY}
    shapes = {
        "pkg/probes.py": PROBES,
        "pkg/writer.py": WRITER,
        "pkg/trainer.py": TRAINER,
        "pkg/memory.py": MEMORY,
        "pkg/memory_needed.py": MEMORY_NEEDED,
        "pkg/pool.py": POOL,
    }
    return review_shapes(path, base, shapes)


def _shown(review: list[Finding], path: str, qualname: str) -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get("broad-except")
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize("qualname", ["is_b70", "is_available", "capture_state"])
def test_a_predicate_probe_answering_no_is_a_p3(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/probes.py", qualname) == ("broad-except.predicate-probe", Severity.P3)


def test_a_nested_probe_of_the_same_question_is_a_p3_at_both_handlers(review: list[Finding]) -> None:
    here = [f for f in review if f.path == "pkg/probes.py" and f.qualname == "_is_dynamo_compiling"]
    assert sorted((f.message_id, f.severity, f.params["predicate"]) for f in here) == [
        ("broad-except.predicate-probe", Severity.P3, "_is_dynamo_compiling"),
        ("broad-except.predicate-probe", Severity.P3, "_is_dynamo_compiling"),
    ]


def test_the_callee_names_the_predicate_when_the_function_is_none(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/probes.py", "capture_state")["broad-except"]
    assert finding.params["predicate"] == "torch.npu.is_current_stream_capturing"
    assert "is_current_stream_capturing" in finding.message


@pytest.mark.parametrize("qualname", ["is_safe", "shutdown", "has_fast_kernels", "cuda_available"])
def test_near_misses_of_the_predicate_probe_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/probes.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_shown_and_dropped_metrics_write_is_a_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/writer.py", "Writer.add_scalar")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.metrics-write", Severity.P3)
    assert finding.params["write"] == "self.tb_writer.add_scalar"


@pytest.mark.parametrize("qualname", ["Writer.add_counted", "Writer.add_quiet"])
def test_near_misses_of_the_metrics_write_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/writer.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_logged_failure_of_a_procedure_that_only_tries_is_a_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/trainer.py", "Trainer._try_bind_numa")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.named-attempt", Severity.P3)


@pytest.mark.parametrize(
    ("qualname", "expected"),
    [
        # round 26: a try around one operation is a P3 swallow, a wider one the P2
        ("Trainer.bind_numa", ("broad-except.swallows", Severity.P2)),
        ("Trainer.try_pick_node", ("broad-except.swallows", Severity.P2)),
        ("Trainer._try_bind_quiet", ("broad-except.swallows-one-operation", Severity.P3)),
        ("Trainer._try_bind_or_default", ("broad-except.swallows", Severity.P2)),
    ],
)
def test_near_misses_of_the_named_attempt_stay_swallows(
    review: list[Finding], qualname: str, expected: tuple[str, Severity]
) -> None:
    assert _shown(review, "pkg/trainer.py", qualname) == expected


def test_an_optional_package_route_before_the_functions_other_route_is_a_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/memory.py", "available_memory_gb")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.optional-route", Severity.P3)
    assert finding.params["package"] == "psutil"


@pytest.mark.parametrize(
    ("path", "qualname"), [("pkg/memory.py", "total_memory_gb"), ("pkg/memory_needed.py", "cpu_memory_gb")]
)
def test_near_misses_of_the_optional_route_stay_swallows(review: list[Finding], path: str, qualname: str) -> None:
    assert _shown(review, path, qualname) == ("broad-except.swallows", Severity.P2)


def test_an_undo_of_the_codes_own_registration_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/pool.py", "PoolContext.__enter__") == {}


@pytest.mark.parametrize("qualname", ["PoolContext.__exit__", "PoolContext.release_other", "PoolContext.release_hook"])
def test_near_misses_of_the_undone_registration_stay_reported(review: list[Finding], qualname: str) -> None:
    finding = findings_by_rule(review, "pkg/pool.py", qualname)["runtime-error-fallback"]
    assert (finding.message_id, finding.severity) == ("runtime-error-fallback.no-oom-reraise", Severity.P2)
