"""CUDA graph settings and the CPU-testable parts of magi_compiler.cudagraph: config parsing,
padding and slicing arithmetic, graph plans, the reallocation check, unowned output aliases, and
the no-op on CPU.
The captures themselves are tested on a GPU in tests/regression/test_cudagraph.py."""

import gc
import logging

import pytest
import torch
from torch import fx
from torch.multiprocessing.reductions import StorageWeakRef

from magi_compiler import compilation_counter, get_entry_state, magi_compile
from magi_compiler.config import (
    CompileConfig,
    CudaGraphMode,
    apply_config_patch,
    default_capture_sizes,
)
from magi_compiler.cudagraph import (
    GraphPlan,
    padded_size,
    padding_table,
    plan_graph,
    slice_outputs,
    static_addresses,
    unowned_outputs,
    unstable_piece_args,
    weak_alias,
    wrap_compiled_graph,
)
from magi_compiler.splitting import split_graph

from .conftest import last_json_line, run_script, script_env


def test_cudagraph_config_from_env_patch_and_defaults():
    default = CompileConfig()
    assert default.cudagraph_mode is CudaGraphMode.NONE
    assert default.cudagraph_capture_sizes == default_capture_sizes()
    from_env = CompileConfig.from_env(
        {"MAGI_COMPILE_CUDAGRAPH_MODE": "piecewise", "MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES": "8, 2,4,4"}
    )
    assert from_env.cudagraph_mode is CudaGraphMode.PIECEWISE
    assert from_env.cudagraph_capture_sizes == [2, 4, 8], "sizes are sorted and deduplicated"
    assert CompileConfig.from_env({"MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES": "[16, 1]"}).cudagraph_capture_sizes == [
        1,
        16,
    ]
    patched = apply_config_patch(from_env, {"cudagraph_mode": "FULL", "cudagraph_capture_sizes": [3]})
    assert (patched.cudagraph_mode, patched.cudagraph_capture_sizes) == (CudaGraphMode.FULL, [3])
    assert from_env.cudagraph_capture_sizes == [2, 4, 8], "the patch must not mutate its input"
    assert default.cudagraph_capture_all is False, "by default sizes after the largest are captured on first use"
    capture_all = CompileConfig.from_env({"MAGI_COMPILE_CUDAGRAPH_CAPTURE_ALL": "1"})
    assert capture_all.cudagraph_capture_all is True
    # graphs are never saved: no field of theirs changes the artifact key
    assert patched.hash == default.hash == from_env.hash == capture_all.hash


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MAGI_COMPILE_CUDAGRAPH_MODE": "sometimes"}, "MAGI_COMPILE_CUDAGRAPH_MODE"),
        ({"MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES": "1,two"}, "MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES"),
        ({"MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES": "0,4"}, "MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES"),
        ({"MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES": ""}, "MAGI_COMPILE_CUDAGRAPH_CAPTURE_SIZES"),
    ],
)
def test_bad_cudagraph_env_value_is_one_value_error_naming_the_variable(env, variable):
    with pytest.raises(ValueError, match=variable) as info:
        CompileConfig.from_env(env)
    assert "\n" not in str(info.value)


def test_full_mode_with_eager_splitting_ops_is_rejected():
    with pytest.raises(ValueError, match="cudagraph_mode=FULL.*PIECEWISE.*disable_graph_split"):
        apply_config_patch(CompileConfig(), {"cudagraph_mode": "FULL", "splitting_ops": ["magi::attn"]})
    with pytest.raises(ValueError, match="MAGI_COMPILE_CUDAGRAPH_MODE"):
        CompileConfig.from_env({"MAGI_COMPILE_CUDAGRAPH_MODE": "FULL", "MAGI_COMPILE_SPLITTING_OPS": "magi::attn"})
    compiled_in = {"cudagraph_mode": "FULL", "splitting_ops": ["magi::attn"], "disable_graph_split": True}
    assert apply_config_patch(CompileConfig(), compiled_in).cudagraph_mode is CudaGraphMode.FULL
    with pytest.raises(ValueError, match="cudagraph_mode="):
        apply_config_patch(CompileConfig(), {"cudagraph_mode": "ALWAYS"})


def test_default_capture_sizes_follow_the_documented_ladder():
    sizes = default_capture_sizes()
    assert sizes[:4] == [1, 2, 4, 8]
    assert sizes[3:34] == list(range(8, 256, 8))
    assert sizes[34:] == list(range(256, 513, 16))
    assert default_capture_sizes(20) == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match=">= 1"):
        default_capture_sizes(0)


def test_padding_picks_the_nearest_capture_size_and_none_above_the_largest():
    sizes = [2, 4, 8, 24]
    assert [padded_size(n, sizes) for n in (1, 2, 3, 4, 5, 8, 9, 24, 25, 1000)] == [
        2,
        2,
        4,
        4,
        8,
        8,
        24,
        24,
        None,
        None,
    ]
    table = padding_table(sizes)
    assert len(table) == 25
    assert table == [padded_size(n, sizes) for n in range(25)]


def test_slicing_narrows_only_the_dynamic_dims():
    padded = torch.arange(24.0).reshape(4, 3, 2)
    whole = torch.ones(5)
    last = torch.arange(24.0).reshape(2, 3, 4)
    out = slice_outputs([padded, whole, last], [0, None, 2], 3)
    assert out[0].shape == (3, 3, 2) and torch.equal(out[0], padded[:3])
    assert out[1] is whole
    assert torch.equal(out[2], last[..., :3])
    assert out[0].data_ptr() == padded.data_ptr(), "slices are views, not copies"


def _dynamo_plan(fn, *args):
    """The plan of the one graph Dynamo traces from ``fn(*args)`` (planned inside the backend,
    as MagiBackend does: Dynamo drops the placeholders' source metadata afterwards), and the
    graph's placeholder names."""
    plans = []

    def backend(gm, example_inputs):
        plans.append((plan_graph(gm), [n.name for n in gm.graph.find_nodes(op="placeholder")]))
        return gm.forward

    torch._dynamo.reset()
    torch.compile(fn, backend=backend, fullgraph=True)(*args)
    assert len(plans) == 1
    return plans[0]


def test_plan_locates_the_size_user_inputs_params_and_output_dims():
    model = torch.nn.Linear(8, 8)

    def f(model, x, mask):
        return model(x).relu() * mask, mask.sum()

    x = torch.randn(4, 8)
    torch._dynamo.mark_dynamic(x, 0)
    with torch.no_grad():
        plan, names = _dynamo_plan(f, model, x, torch.ones(8))
    assert isinstance(plan, GraphPlan), plan
    index = {name: names.index(name) for name in names}
    weight, bias = index["l_model_parameters_weight_"], index["l_model_parameters_bias_"]
    xi, mask = index["l_x_"], index["l_mask_"]
    (size,) = (i for name, i in index.items() if name.startswith("s"))
    assert plan.static_inputs == (weight, bias)
    assert plan.user_inputs == {xi: 0, mask: None}
    assert plan.size_arg == size and plan.size_ints == (size,)
    assert plan.output_dims == (0, None)
    args = [None] * len(names)
    args[size], args[xi] = 6, torch.randn(6, 8)
    assert plan.size_of(args) == 6


def test_plan_refuses_what_padding_cannot_handle():
    x = torch.randn(4, 6)
    torch._dynamo.mark_dynamic(x, 0)
    torch._dynamo.mark_dynamic(x, 1)
    assert "2 dynamic sizes" in _dynamo_plan(lambda t: t * 2, x)[0]
    y = torch.randn(4, 6)
    torch._dynamo.mark_dynamic(y, 0)
    assert "could not be sliced back" in _dynamo_plan(lambda t: t.reshape(-1) + 1, y)[0]
    static, _ = _dynamo_plan(lambda t: t + 1, torch.randn(3, 3))
    assert static.size_arg is None and static.output_dims == (None,)
    assert static.size_of([torch.randn(3, 3)]) == 0


@torch.library.custom_op("magi_cg_cpu_test::mix", mutates_args=())
def mix(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@mix.register_fake
def _(x):
    return torch.empty_like(x)


class TwoLinears(torch.nn.Module):
    """Two layers around splitting ops; each test's subclass places the ops in its forward."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)


def test_unstable_piece_args_are_the_eager_splitting_op_outputs():
    class Blocks(TwoLinears):
        def forward(self, x):
            h = self.a(x)
            m = torch.ops.magi_cg_cpu_test.mix(h)
            return self.b(m) + h

    split_gm, pieces = split_graph(fx.symbolic_trace(Blocks()), ["magi_cg_cpu_test::mix"])
    splitting = {p.name for p in pieces if p.is_splitting_op}
    assert splitting == {"submod_1"}
    unstable = unstable_piece_args(split_gm, splitting)
    assert unstable["submod_0"] == ()
    call = next(n for n in split_gm.graph.find_nodes(op="call_module") if n.target == "submod_2")
    from_op = [i for i, a in enumerate(call.args) if "submod_1" in str(a)]
    assert unstable["submod_2"] == tuple(from_op) and from_op, call.args


@torch.library.custom_op("magi_cg_cpu_test::mix_out", mutates_args=("out",))
def mix_out(x: torch.Tensor, out: torch.Tensor) -> None:
    torch.mul(x, torch.sigmoid(x), out=out)


@mix_out.register_fake
def _(x, out):
    return None


def test_an_out_parameter_splitting_op_leaves_nothing_to_copy():
    """The out-parameter contract: the op writes into a tensor the piece before it allocated, so
    the piece after it reads a graph's own memory; the returning op's output must be copied."""

    class Blocks(TwoLinears):
        def forward(self, x):
            h = self.a(x)
            out = torch.empty_like(h)
            torch.ops.magi_cg_cpu_test.mix_out(h, out)
            returned = torch.ops.magi_cg_cpu_test.mix(self.b(out))
            return self.b(returned) + h

    ops = ["magi_cg_cpu_test::mix_out", "magi_cg_cpu_test::mix"]
    split_gm, pieces = split_graph(fx.symbolic_trace(Blocks()), ops)
    splitting = {p.name for p in pieces if p.is_splitting_op}
    assert splitting == {"submod_1", "submod_3"}
    unstable = unstable_piece_args(split_gm, splitting)
    calls = {n.target: n for n in split_gm.graph.find_nodes(op="call_module")}
    assert unstable["submod_0"] == () and unstable["submod_2"] == (), "the out tensor comes from submod_0's graph"
    from_op = [i for i, a in enumerate(calls["submod_4"].args) if "submod_3" in str(a)]
    assert unstable["submod_4"] == tuple(from_op) and from_op, calls["submod_4"].args
    x = torch.randn(3, 4)
    model = Blocks()
    torch.testing.assert_close(split_graph(fx.symbolic_trace(model), ops)[0](x), model(x))


def test_weak_aliases_view_the_same_memory_without_keeping_it_alive():
    """What a graph keeps of its outputs: same memory and layout, but freeing the original
    releases the memory (to the graphs' pool, on a GPU), so later captures can reuse it."""
    base = torch.arange(24.0).view(4, 6)
    rows = base[1:3]
    for original in (rows, rows.t()):
        alias = weak_alias(original)
        assert alias is not original
        assert alias.data_ptr() == original.data_ptr()
        layout = (original.shape, original.stride(), original.storage_offset())
        assert (alias.shape, alias.stride(), alias.storage_offset()) == layout
        assert torch.equal(alias, original)
    base.add_(1)
    assert torch.equal(alias, rows.t()), "an alias sees later writes to the memory"
    storage = StorageWeakRef(base.untyped_storage())
    del base, rows, original
    gc.collect()
    assert storage.expired(), "an alias must not own the memory"


def test_unowned_outputs_alias_cuda_tensors_only():
    """A CPU tensor a capture computed on the host is not rewritten by a replay: the graph keeps
    it (and any non-tensor) as it is, owned, rather than an alias of memory freed after capture."""
    cpu = torch.ones(3)
    kept = unowned_outputs((cpu, 2, [None]))
    assert kept[0] is cpu and kept[1:] == (2, [None])
    flat = unowned_outputs([cpu, None, 3])  # a compiled piece's plain list: mapped without pytree
    assert type(flat) is list and flat[0] is cpu and flat[1:] == [None, 3]


def test_reallocated_parameters_change_the_captured_addresses():
    model = torch.nn.Linear(8, 8)
    args = [model.weight, model.bias, 4]
    captured = static_addresses(args, (0, 1))
    model.load_state_dict({k: v * 2 for k, v in model.state_dict().items()})  # in place: addresses kept
    assert static_addresses([model.weight, model.bias], (0, 1)) == captured
    model.load_state_dict({k: v.clone() for k, v in model.state_dict().items()}, assign=True)
    assert static_addresses([model.weight, model.bias], (0, 1)) != captured
    moved = static_addresses([model.weight, model.bias], (0, 1))
    model.to(torch.float64)
    assert static_addresses([model.weight, model.bias], (0, 1)) != moved


@pytest.fixture
def magi_log(caplog):
    with caplog.at_level(logging.INFO, logger="magi_compiler"):
        yield caplog


@pytest.mark.parametrize("mode", ["PIECEWISE", "FULL"])
def test_cudagraph_mode_on_cpu_logs_once_and_runs_as_none(module_cache_env, magi_log, mode):
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    compiled = magi_compile(model, method_name="forward", config_patch={"cudagraph_mode": mode, "backend": "eager"})
    with torch.no_grad(), compilation_counter.expect(num_cudagraph_captures=0, num_cudagraph_replays=0):
        for batch in (4, 6, 5):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(compiled(x), torch.nn.Sequential.forward(model, x))
    lines = [r.getMessage() for r in magi_log.records if "does not apply" in r.getMessage()]
    state = get_entry_state(model)
    reason = "the graph's inputs are not all on CUDA" if torch.cuda.is_available() else "CUDA is not available"
    assert lines == [f"{state.model_name}: cudagraph_mode={mode} does not apply ({reason}); running as NONE"]


def test_a_graph_that_cannot_be_padded_runs_without_graphs_and_says_why(magi_log):
    def compiled(*args):
        return args

    reason = "it has 2 dynamic sizes ['s0', 's1']; padding needs exactly one"
    wrapped = wrap_compiled_graph(reason, compiled, CudaGraphMode.PIECEWISE, [2, 4], "model_7 graph 0", None)
    assert wrapped is compiled
    assert [r.getMessage() for r in magi_log.records] == [
        f"model_7 graph 0: cudagraph_mode=PIECEWISE does not apply to this graph: {reason}"
    ]


@pytest.mark.parametrize("mode", ["PIECEWISE", "FULL"])
def test_cudagraph_mode_on_an_aot_entry_logs_once_in_the_cold_and_in_the_warm_process(tmp_path, mode):
    """A warm AOT process runs the loaded function without a backend call, and still says once
    that the mode does not apply (found trying nanoGPT: the warm process said nothing)."""
    env = script_env(tmp_path / "cache", MAGI_COMPILE_CUDAGRAPH_MODE=mode)
    reason = "AOT entries are saved whole and do not carry CUDA graphs"
    expected = [f"model_0_aot_log: cudagraph_mode={mode} does not apply ({reason}); running as NONE"]
    cold = last_json_line(run_script("aot_entry_log.py", env=env).stdout)
    assert cold["counters"]["num_graphs_seen"] == 1
    assert [m for m in cold["warnings"] if "does not apply" in m] == expected
    warm = last_json_line(run_script("aot_entry_log.py", env=env).stdout)
    assert warm["counters"]["num_graphs_seen"] == 0, "the warm process loads the AOT artifact"
    assert [m for m in warm["warnings"] if "does not apply" in m] == expected
