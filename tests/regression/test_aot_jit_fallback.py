"""AOT mode and its narrow fallback to JIT (issue 4), with real Dynamo/Inductor compiles.

Where an AOT compile must fail, ``SerializingBackend.__call__`` (the backend Dynamo's AOT
compile calls, unused under JIT) is patched to raise for entries of one ``model_tag``: the
error surfaces from inside the AOT compile call as a real one would.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch._dynamo.exc import BackendCompilerFailed, TensorifyScalarRestartAnalysis, Unsupported

from magi_compiler import compilation_counter, get_entry_state, magi_compile
from magi_compiler.aot import AOTUnsupportedError, artifact, mode
from magi_compiler.aot.fallback import AOTFailureKind, classify_aot_failure
from magi_compiler.aot.serializable import SerializingBackend
from magi_compiler.backend import CacheMissError, MagiBackend

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = Path(__file__).with_name("aot_round_trip_worker.py")
DTENSOR_WORKER = Path(__file__).with_name("aot_dtensor_worker.py")
FALLBACK_WARNING = "falling back to JIT"
UNSUPPORTED = "Attempted to read undefined local variable: this graph is not supported by AOT compile"


class Block(torch.nn.Module):
    """Undecorated; each test decorates instances with its own tag and config."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)) + x


def make_entry(tag: str, cache_root: Path, **config: object) -> Block:
    block = Block()
    patch = {"aot": True, "cache_root_dir": str(cache_root), "backend": "eager", **config}
    return magi_compile(block, method_name="forward", model_tag=tag, config_patch=patch)


def state_of(block: Block):
    return get_entry_state(block.forward)


def reference(block: Block, x: torch.Tensor) -> torch.Tensor:
    return torch.relu(block.proj(x)) + x


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def count(self, text: str) -> int:
        return sum(text in message for message in self.messages)


@pytest.fixture
def records() -> Iterator[Records]:
    handler = Records()
    logger = logging.getLogger("magi_compiler")
    logger.addHandler(handler)
    yield handler
    logger.removeHandler(handler)


def fail_aot_for(monkeypatch: pytest.MonkeyPatch, tag: str, make_error) -> None:
    """Make the AOT compile of entries tagged ``tag`` raise ``make_error()``."""
    original = SerializingBackend.__call__

    def patched(self: SerializingBackend, graph_module, example_inputs):
        if self.backend.model_tag == tag:
            raise make_error()
        return original(self, graph_module, example_inputs)

    monkeypatch.setattr(SerializingBackend, "__call__", patched)


def aot_files(cache_root: Path, tag: str) -> list[Path]:
    return sorted(cache_root.glob(f"model_*_{tag}_rank_*/{mode.AOT_SUBDIR}/*{mode.ARTIFACT_SUFFIX}"))


@pytest.mark.parametrize("fallback_enabled", [True, False], ids=["with_fallback", "fallback_removed"])
def test_unsupported_entry_falls_back_to_jit(tmp_path, monkeypatch, records, fallback_enabled):
    monkeypatch.setattr(mode, "FALLBACK_TO_JIT", fallback_enabled)
    fail_aot_for(monkeypatch, "dit", lambda: RuntimeError(UNSUPPORTED))
    dit, vae = make_entry("dit", tmp_path), make_entry("vae", tmp_path)
    x = torch.randn(4, 8)

    if not fallback_enabled:
        with pytest.raises(AOTUnsupportedError) as raised:
            dit(x)
        assert str(raised.value.__cause__) == UNSUPPORTED
        assert records.count(FALLBACK_WARNING) == 0
        assert aot_files(tmp_path, "dit") == [], "a failed AOT compile must write nothing"
        return

    torch.testing.assert_close(dit(x), reference(dit, x))
    x2 = torch.randn(6, 8)
    torch.testing.assert_close(dit(x2), reference(dit, x2))
    dit_state = state_of(dit)
    assert dit_state.aot is False and dit_state.compiled_callable is not None
    assert records.count(FALLBACK_WARNING) == 1
    warning = next(m for m in records.messages if FALLBACK_WARNING in m)
    assert (
        f"model_{dit_state.model_index}_dit:" in warning
        and UNSUPPORTED in warning
        and "rest of this process" in warning
    )
    assert aot_files(tmp_path, "dit") == [], "a failed AOT compile must write nothing"

    with compilation_counter.expect(num_graphs_seen=1, num_backend_compilations=1):
        torch.testing.assert_close(vae(x), reference(vae, x))
    vae_state = state_of(vae)
    assert vae_state.aot is True and len(vae_state.aot_strategy.entry._functions) == 1
    assert len(aot_files(tmp_path, "vae")) == 1
    assert records.count(FALLBACK_WARNING) == 1


@pytest.mark.parametrize(
    "make_error",
    [
        lambda: AssertionError("backend invariant broken"),
        lambda: TypeError("bad argument to a compile step"),
        lambda: torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
        lambda: CacheMissError("MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss for model_0_broken: graph 0 piece 0"),
    ],
    ids=["assertion", "type_error", "oom", "assert_cache_hit_miss"],
)
def test_aot_assertion_error_is_not_swallowed(tmp_path, monkeypatch, records, make_error):
    expected = make_error()
    fail_aot_for(monkeypatch, "broken", lambda: expected)
    entry = make_entry("broken", tmp_path)
    with pytest.raises(type(expected)) as raised:
        entry(torch.randn(4, 8))
    assert raised.value is expected
    assert records.count(FALLBACK_WARNING) == 0
    assert state_of(entry).aot is True
    assert aot_files(tmp_path, "broken") == []


def test_aot_assert_cache_hit_miss_is_not_swallowed(tmp_path, records):
    entry = make_entry("strict", tmp_path, assert_cache_hit=True)
    with (
        compilation_counter.expect(num_graphs_seen=0),
        pytest.raises(CacheMissError, match="^MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss") as raised,
    ):
        entry(torch.randn(4, 8))
    assert "cannot be AOT-compiled' never has one: run it with MAGI_COMPILE_AOT=0" in str(raised.value)
    assert records.count(FALLBACK_WARNING) == 0
    assert state_of(entry).aot is True


def test_dynamo_restart_retries_aot_instead_of_falling_back(tmp_path, monkeypatch, records):
    raised: list[int] = []
    original = SerializingBackend.__call__

    def restart_once(self, graph_module, example_inputs):
        if not raised:
            raised.append(1)
            raise TensorifyScalarRestartAnalysis()
        return original(self, graph_module, example_inputs)

    monkeypatch.setattr(SerializingBackend, "__call__", restart_once)
    entry = make_entry("restarts", tmp_path)
    x = torch.randn(4, 8)
    torch.testing.assert_close(entry(x), reference(entry, x))
    assert raised == [1]
    assert state_of(entry).aot is True
    assert records.count(FALLBACK_WARNING) == 0
    assert len(aot_files(tmp_path, "restarts")) == 1


def test_failure_of_the_jit_retry_propagates(tmp_path, monkeypatch, records):
    original = MagiBackend.__call__

    def broken_for_tag(self, graph_module, example_inputs):
        if self.model_tag == "jitfail":
            raise RuntimeError("inductor lowering failed")
        return original(self, graph_module, example_inputs)

    monkeypatch.setattr(MagiBackend, "__call__", broken_for_tag)
    entry = make_entry("jitfail", tmp_path)
    with pytest.raises(BackendCompilerFailed, match="inductor lowering failed"):
        entry(torch.randn(4, 8))
    assert records.count(FALLBACK_WARNING) == 1
    assert state_of(entry).aot is False
    assert aot_files(tmp_path, "jitfail") == []


def test_entry_compiled_before_fallback_keeps_running(tmp_path, monkeypatch, records):
    """Entries sharing the failing entry's code object are not invalidated by its fallback."""
    fail_aot_for(monkeypatch, "late", lambda: RuntimeError(UNSUPPORTED))
    guarded_jit = make_entry("early_jit", tmp_path, aot=False, bytecode_swap=False)
    early_aot = make_entry("early_aot", tmp_path)
    late = make_entry("late", tmp_path)
    old, new = torch.randn(4, 8), torch.randn(7, 8)
    guarded_jit(old)
    early_aot(old)

    late(old)
    assert records.count(FALLBACK_WARNING) == 1 and state_of(late).aot is False

    with compilation_counter.expect(num_graphs_seen=0, num_backend_compilations=0, num_models_seen=0):
        for x in (old, new):
            torch.testing.assert_close(guarded_jit(x), reference(guarded_jit, x))
            torch.testing.assert_close(early_aot(x), reference(early_aot, x))
    assert state_of(early_aot).aot is True
    assert len(state_of(early_aot).aot_strategy.entry._functions) == 1


def test_grad_mode_selects_its_own_compiled_function(tmp_path):
    """A function compiled under no_grad is not reused with grad enabled, and the reverse."""
    entry = make_entry("modes", tmp_path)
    x = torch.randn(4, 8)
    with torch.no_grad():
        entry(x)
    with compilation_counter.expect(num_graphs_seen=1):
        out = entry(x)
    assert out.requires_grad
    out.sum().backward()
    assert entry.proj.weight.grad is not None
    with torch.no_grad(), compilation_counter.expect(num_graphs_seen=0):
        assert not entry(x).requires_grad
    assert len(state_of(entry).aot_strategy.entry._functions) == 2


def scaled_residual(x: torch.Tensor, *, scale: float = 2.0) -> torch.Tensor:
    return torch.tanh(x) * scale + x


def test_function_entry_with_keyword_argument(tmp_path):
    entry = magi_compile(
        scaled_residual, model_tag="fn", config_patch={"aot": True, "cache_root_dir": str(tmp_path), "backend": "eager"}
    )
    x = torch.randn(4, 8)
    torch.testing.assert_close(entry(x, scale=3.0), scaled_residual(x, scale=3.0))
    y = torch.randn(5, 8)
    with compilation_counter.expect(num_graphs_seen=0):
        torch.testing.assert_close(entry(y, scale=3.0), scaled_residual(y, scale=3.0))
    with compilation_counter.expect(num_graphs_seen=1):  # a new constant fails the guards: one more function
        torch.testing.assert_close(entry(y, scale=0.5), scaled_residual(y, scale=0.5))
    state = get_entry_state(entry)
    assert state.aot is True and len(aot_files(tmp_path, "fn")) == 1


def corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-20:] = bytes(20)
    path.write_bytes(bytes(data))


def rewrite_torch_version(path: Path) -> None:
    """Rewrite the header as an artifact written by another torch release would have it."""
    data = path.read_bytes()
    start = len(artifact.MAGIC) + 8
    header_len = int.from_bytes(data[len(artifact.MAGIC) : start], "big")
    header = json.loads(data[start : start + header_len])
    header["torch_version"] = "2.11.0"
    new_header = json.dumps(header).encode()
    path.write_bytes(artifact.MAGIC + len(new_header).to_bytes(8, "big") + new_header + data[start + header_len :])


@pytest.mark.parametrize(
    ("damage", "reason"),
    [(corrupt, "checksum mismatch"), (rewrite_torch_version, "incompatible torch_version")],
    ids=["corrupt", "other_torch"],
)
def test_bad_artifact_is_a_miss_with_warning(tmp_path, records, damage, reason):
    entry = make_entry("damaged", tmp_path)
    x = torch.randn(4, 8)
    entry(x)
    [path] = aot_files(tmp_path, "damaged")
    damage(path)
    state = state_of(entry)
    state.aot_strategy = None  # a later process: nothing loaded yet
    with compilation_counter.expect(num_graphs_seen=1):
        torch.testing.assert_close(entry(x), reference(entry, x))
    assert records.count(reason) == 1
    assert records.count(FALLBACK_WARNING) == 0
    state.aot_strategy = None
    with compilation_counter.expect(num_graphs_seen=0):
        entry(x)  # the miss recompiled and rewrote a valid artifact


def run_worker(out: Path, cache_root: Path, device: str, **env: str) -> subprocess.CompletedProcess:
    environ = dict(os.environ, PYTHONPATH=str(REPO_ROOT), MAGI_COMPILE_CACHE_ROOT_DIR=str(cache_root), **env)
    return subprocess.run(
        [sys.executable, str(WORKER), str(out), device],
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_aot_round_trip_across_processes(tmp_path, device):
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("GPU-only variant of the round trip: no CUDA device in this build/machine")
    cache_root = tmp_path / "cache"
    first = run_worker(tmp_path / "first.pt", cache_root, device)
    assert first.returncode == 0, first.stderr
    cold = torch.load(tmp_path / "first.pt")
    assert cold["aot"] is True and cold["counters"]["num_graphs_seen"] == 1
    assert cold["counters"]["num_inductor_compiles"] >= 1
    assert Path(cold["artifact"]).is_file()

    second = run_worker(tmp_path / "second.pt", cache_root, device, MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    assert second.returncode == 0, second.stderr
    warm = torch.load(tmp_path / "second.pt")
    assert warm["aot"] is True
    assert warm["counters"]["num_graphs_seen"] == 0, "Dynamo traced in the loading process"
    assert warm["counters"]["num_inductor_compiles"] == 0
    for loaded, compiled, eager in zip(warm["outputs"], cold["outputs"], warm["eager"]):
        torch.testing.assert_close(loaded, compiled)
        torch.testing.assert_close(loaded, eager)

    corrupt(Path(cold["artifact"]))
    third = run_worker(tmp_path / "third.pt", cache_root, device, MAGI_COMPILE_ASSERT_CACHE_HIT="1")
    assert third.returncode != 0
    assert "checksum mismatch" in third.stderr
    assert "MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss" in third.stderr
    assert FALLBACK_WARNING not in third.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_dtensor_entry_falls_back_for_real_while_plain_entry_stays_aot(tmp_path):
    """No patching: the DTensor entry's AOT compile fails on its own (its class is local to a
    function, so the artifact cannot be pickled), the entry runs through JIT, the plain entry compiled before it
    stays AOT and runs without compiling again (its input now the JIT entry's output, then a
    new shape)."""
    out = tmp_path / "report.json"
    env = dict(
        os.environ,
        PYTHONPATH=str(REPO_ROOT),
        MAGI_COMPILE_CACHE_ROOT_DIR=str(tmp_path / "cache"),
        MASTER_PORT=str(free_port()),
    )
    result = subprocess.run(
        [sys.executable, str(DTENSOR_WORKER), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    report = json.loads(out.read_text())
    assert report["dit_aot"] is False and report["dit_correct"] and report["dit_second_shape"] == [6, 8]
    assert report["vae_aot"] is True and report["vae_correct"] and report["vae_artifact_exists"]
    assert report["vae_graphs_first_call"] == 1 and report["vae_graphs_after_fallback"] == 0
    [warning] = report["fallback_warnings"]
    assert "model_1_dit" in warning and "rest of this process" in warning


def wrapped_by_dynamo(inner: Exception) -> RuntimeError:
    """``inner`` as Dynamo's JIT path reports a backend error (``BackendCompilerFailed``)."""
    return BackendCompilerFailed(lambda: None, inner, None)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (Unsupported("Attempted to read undefined local variable"), AOTFailureKind.FALLBACK),
        (RuntimeError("Compiled function type X does not implement SerializableCallable."), AOTFailureKind.FALLBACK),
        (TensorifyScalarRestartAnalysis(), AOTFailureKind.RESTART),
        (torch.cuda.OutOfMemoryError("CUDA out of memory"), AOTFailureKind.PROPAGATE),
        (wrapped_by_dynamo(torch.cuda.OutOfMemoryError("CUDA out of memory")), AOTFailureKind.PROPAGATE),
        (wrapped_by_dynamo(AssertionError("invariant")), AOTFailureKind.PROPAGATE),
        (
            wrapped_by_dynamo(CacheMissError("MAGI_COMPILE_ASSERT_CACHE_HIT: cache miss for x")),
            AOTFailureKind.PROPAGATE,
        ),
        (wrapped_by_dynamo(RuntimeError("inductor lowering not supported")), AOTFailureKind.FALLBACK),
    ],
    ids=[
        "unsupported",
        "not_serializable",
        "restart",
        "oom",
        "wrapped_oom",
        "wrapped_assert",
        "wrapped_miss",
        "wrapped_rt",
    ],
)
def test_failure_classification(error, kind):
    assert classify_aot_failure(error) is kind
