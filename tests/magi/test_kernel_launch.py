"""Triton kernels of Inductor's generated code launched without torch 2.11's per-launch checks
(magi_compiler.kernel_launch): CPU code is left as it is; on CUDA a steady launch skips
``CachingAutotuner.run`` (torch 2.11; torch 2.13 keeps its own fast path and the code as it is),
outputs are unchanged, and under the profiler every launch goes through ``CachingAutotuner.run``.
Which functions ran is read with ``sys.setprofile``. The CUDA tests skip on a machine without CUDA,
saying so."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import pytest
import torch
from torch._inductor import standalone_compile
from torch._inductor.runtime.triton_heuristics import CachingAutotuner

from magi_compiler import magi_compile
from magi_compiler.inference_call import _plain_inference, without_disable
from magi_compiler.kernel_launch import LeanKernel, lean_kernels

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="Triton kernels need CUDA; this machine has none")
# torch 2.13's CachingAutotuner caches its launcher itself; there nothing is replaced
TORCH_FAST_PATH = hasattr(CachingAutotuner, "_build_fast_launcher")


def pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.relu(x) + 1, x.sum(0)


@contextlib.contextmanager
def _calls_of(*functions) -> Iterator[dict[str, int]]:
    """Counts the calls of each function's code inside the block, by the function's qualified name."""
    codes = {function.__code__: function.__qualname__ for function in functions}
    calls = dict.fromkeys(codes.values(), 0)

    def profile(frame, event, arg):
        if event == "call" and frame.f_code in codes:
            calls[codes[frame.f_code]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


def _compiled_graph(device: str):
    """(an input, the ``CompiledFxGraph`` of ``pair`` after one call)."""
    x = torch.randn(64, 32, device=device)
    artifact = standalone_compile(torch.fx.symbolic_trace(pair), [x], dynamic_shapes="from_example_inputs")
    artifact(x)
    _, graph, _ = _plain_inference(without_disable(artifact._compiled_fn))
    return x, graph


def test_code_without_triton_kernels_is_left_as_it_is(module_cache_env):
    _, graph = _compiled_graph("cpu")
    assert lean_kernels(graph.current_callable) is graph.current_callable


@needs_cuda
def test_steady_launches_skip_the_autotuner_run(module_cache_env):
    x, graph = _compiled_graph("cuda")
    lean = lean_kernels(graph.current_callable)
    if TORCH_FAST_PATH:
        assert lean is graph.current_callable
        return
    assert lean is not graph.current_callable
    expected = graph.current_callable([x])
    with _calls_of(CachingAutotuner.run, LeanKernel.run) as calls:
        outs = lean([x])
    assert calls == {"CachingAutotuner.run": 0, "LeanKernel.run": calls["LeanKernel.run"]}
    assert calls["LeanKernel.run"] >= 1
    for out, reference in zip(outs, expected, strict=True):
        torch.testing.assert_close(out, reference)


@needs_cuda
def test_launches_under_the_profiler_take_the_autotuner_run(module_cache_env):
    x, graph = _compiled_graph("cuda")
    lean = lean_kernels(graph.current_callable)
    with torch.profiler.profile() as profiled, _calls_of(CachingAutotuner.run) as calls:
        lean([x])
    assert calls["CachingAutotuner.run"] >= 1
    assert any(event.name.startswith("triton_") for event in profiled.events())


@needs_cuda
def test_a_swapped_entry_launches_its_kernels_directly(module_cache_env):
    entry = magi_compile(pair, dynamic_arg_dims={"x": 0})
    x = torch.randn(64, 32, device="cuda")
    for _ in range(3):
        entry(x)
    with _calls_of(CachingAutotuner.run, LeanKernel.run) as calls:
        outs = entry(x)
    if TORCH_FAST_PATH:
        assert calls["LeanKernel.run"] == 0 and calls["CachingAutotuner.run"] >= 1
    else:
        assert calls["CachingAutotuner.run"] == 0 and calls["LeanKernel.run"] >= 1
    for out, reference in zip(outs, pair(x), strict=True):
        torch.testing.assert_close(out, reference)
