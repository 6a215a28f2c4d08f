"""Inductor's generated code called directly for inference (magi_compiler.inference_call): which
artifacts get the direct path (freshly compiled and loaded, tuple and single outputs, lifted
parameters, an input mutated in place, a graph compiled under autocast), which keep AOTAutograd's
full path (a training graph, an output aliasing an input), and when a direct callable takes the
full path for one call (its first, under the profiler, with graph-execution recording, under
autocast for a graph compiled without it). Which path a call took is read from the calls of
``CompiledFxGraph.__call__``, which only the full path makes."""

from __future__ import annotations

import contextlib
import itertools
import logging
import sys
from collections.abc import Iterator

import pytest
import torch
from torch._inductor import standalone_compile
from torch._inductor.output_code import CompiledFxGraph

from magi_compiler import compilation_counter, entry_state, magi_compile
from magi_compiler.inference_call import direct_call, without_disable


def pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.relu(x) + 1, x.sum(0)


def single(x: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(x) * 2


def mutate(x: torch.Tensor) -> torch.Tensor:
    x.mul_(2)
    return x + 1


def alias(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x.view(-1), x + 1


def _artifact(fn, *inputs):
    """A freshly compiled artifact (loaded ones: ``test_entry_swapped_calls_...``)."""
    return standalone_compile(torch.fx.symbolic_trace(fn), list(inputs), dynamic_shapes="from_example_inputs")


def _inner(artifact):
    return without_disable(artifact._compiled_fn)


@contextlib.contextmanager
def _full_path_calls() -> Iterator[list[int]]:
    """Counts the calls of ``CompiledFxGraph.__call__`` made inside the block (``sys.setprofile``)."""
    target = CompiledFxGraph.__call__.__code__
    calls = [0]

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is target:
            calls[0] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(previous)


@pytest.mark.parametrize("fn", [pair, single], ids=["tuple", "single"])
def test_direct_path_returns_what_the_full_path_returns(fn, module_cache_env):
    x = torch.randn(6, 5)
    artifact = _artifact(fn, x)
    with compilation_counter.expect(num_direct_call_paths=1):
        direct = direct_call(_inner(artifact))
    assert direct is not None
    expected = artifact(x)
    with _full_path_calls() as calls:
        first = direct(x)
    assert calls == [1], "the first call takes the full path"
    with _full_path_calls() as calls:
        again = direct(x)
    assert calls == [0]
    for out in (first, again):
        torch.testing.assert_close(out, expected)
        assert type(out) is type(expected)


def test_lifted_parameters_are_passed_first(module_cache_env):
    model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.GELU(), torch.nn.Linear(7, 3))
    x = torch.randn(4, 5)
    with torch.no_grad():
        artifact = _artifact(model, x)
        direct = direct_call(_inner(artifact))
        assert direct is not None
        direct(x)
        torch.testing.assert_close(direct(x), artifact(x))
        torch.testing.assert_close(direct(x), model(x))


def test_training_graph_keeps_the_full_path(module_cache_env, caplog):
    model = torch.nn.Linear(5, 3)
    x = torch.randn(4, 5)
    artifact = _artifact(model, x)
    with (
        caplog.at_level(logging.DEBUG, logger="magi_compiler.inference_call"),
        compilation_counter.expect(num_direct_call_paths=0),
    ):
        assert direct_call(_inner(artifact)) is None
    assert "full AOTAutograd call path kept" in caplog.text
    assert artifact(x).requires_grad, "the full path's output carries autograd"


def test_input_mutated_in_the_graph_runs_directly_and_counts_versions(module_cache_env):
    """An in-place update of an input (a KV cache, say) is done by the generated code; the wrapper
    only bumps the input's version counter before the call, and so does the direct path."""
    x = torch.randn(4, 5)
    artifact = _artifact(mutate, x.clone())
    direct = direct_call(_inner(artifact))
    assert direct is not None
    direct(x.clone())
    for _ in range(2):
        y, expected_input = x.clone(), x.clone()
        version = y._version
        with _full_path_calls() as calls:
            out = direct(y)
        assert calls == [0]
        torch.testing.assert_close(out, mutate(expected_input))
        torch.testing.assert_close(y, expected_input)
        assert y._version > version, "the mutation is counted, as on the full path"


def test_output_aliasing_an_input_keeps_the_full_path(module_cache_env, caplog):
    x = torch.randn(4, 5)
    artifact = _artifact(alias, x)
    with caplog.at_level(logging.DEBUG, logger="magi_compiler.inference_call"):
        assert direct_call(_inner(artifact)) is None
    assert "full AOTAutograd call path kept" in caplog.text
    view, shifted = artifact(x)
    assert view.data_ptr() == x.data_ptr(), "the aliased output is a view of the input"
    torch.testing.assert_close(shifted, x + 1)


def test_direct_callable_takes_the_full_path_when_observed(module_cache_env):
    x = torch.randn(6, 5)
    artifact = _artifact(pair, x)
    direct = direct_call(_inner(artifact))
    direct(x)
    with torch.autocast("cpu", dtype=torch.bfloat16), _full_path_calls() as calls:
        direct(x)
    assert calls == [1]
    recorded = torch._inductor.debug
    saved = recorded.RECORD_GRAPH_EXECUTION, recorded.GRAPH_EXECUTION_ORDER
    recorded.RECORD_GRAPH_EXECUTION, recorded.GRAPH_EXECUTION_ORDER = True, []
    try:
        direct(x)
        assert len(recorded.GRAPH_EXECUTION_ORDER) == 1
    finally:
        recorded.RECORD_GRAPH_EXECUTION, recorded.GRAPH_EXECUTION_ORDER = saved
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        direct(x)
    assert any("Call CompiledFxGraph" in event.name for event in prof.events())
    with _full_path_calls() as calls:
        torch.testing.assert_close(direct(x), artifact(x))
    assert calls == [1], "only the artifact's own call took the full path"


def scaled(x: torch.Tensor) -> torch.Tensor:
    return torch.tanh(x) * 3


def matmul_gelu(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x @ w)


def test_graph_compiled_under_autocast_runs_directly_under_autocast(module_cache_env):
    """AOTAutograd switches autocast off around a graph traced under it (its casts are in the
    graph); the direct path does the same, so the outputs keep the graph's dtypes."""
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        artifact = _artifact(matmul_gelu, x, w)
        direct = direct_call(_inner(artifact))
        assert direct is not None
        expected = artifact(x, w)
        direct(x, w)
        with _full_path_calls() as calls:
            out = direct(x, w)
    assert calls == [0]
    assert out[0].dtype == expected[0].dtype == torch.bfloat16
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("artifacts", [{"num_cache_misses": 1}, {"num_cache_hits": 1}], ids=["compiled", "loaded"])
def test_entry_swapped_calls_run_the_generated_code_directly(
    artifacts, tmp_path_factory, monkeypatch, module_cache_env
):
    """An entry without parameters, called with grad enabled (an inference graph: nothing requires
    grad), built twice on one Magi cache as a new process builds it (the second loads its piece):
    its swapped calls skip ``CompiledFxGraph.__call__`` and mark the outputs' dynamic dims as the
    full path does."""
    root = tmp_path_factory.getbasetemp() / "entry-direct-cache"
    monkeypatch.setattr(entry_state, "_model_indices", itertools.count(0))
    torch._dynamo.reset()
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, config_patch={"cache_root_dir": str(root)})(scaled)
    with compilation_counter.expect(num_direct_call_paths=1, **artifacts):
        guarded = compiled(torch.randn(4, 3))  # the first call: through Dynamo and the full path
    marks = {k: v for k, v in vars(guarded).items() if "dynamic" in k}
    assert marks, "the full path marks the output's dynamic dim"
    full_path_calls = []
    for rows in (5, 9, 5):
        x = torch.randn(rows, 3)
        with compilation_counter.expect(num_swapped_calls=1), _full_path_calls() as calls:
            out = compiled(x)
        full_path_calls += calls
        torch.testing.assert_close(out, scaled(x))
        assert {k: v for k, v in vars(out).items() if "dynamic" in k} == marks
    assert full_path_calls == [1, 0, 0], "the direct callable's first call takes the full path"
