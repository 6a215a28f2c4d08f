"""magi_compile on a class, a function and one instance's method: outputs match eager,
one compile per graph, the bytecode swap serves new sizes on dynamic dims, the 0/1 check,
nested decorated calls inline."""

import dataclasses
import os
import re

import pytest
import torch

from magi_compiler import compilation_counter, get_entry_state, magi_compile


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 8)

    def forward(self, x):
        return self.down(torch.relu(self.up(x))) + x


@magi_compile
class CompiledMLP(MLP):
    pass


def scaled_tanh(x, scale: float = 3.0):
    return torch.tanh(x) * scale + x.sum(dim=-1, keepdim=True)


# Dynamo caches per code object (and makes a dim dynamic once it saw it change), so each
# test compiles its own function to stay independent of the others.
def scaled_sigmoid(x, scale: float = 3.0):
    return torch.sigmoid(x) * scale + x.sum(dim=-1, keepdim=True)


def scaled_exp(x):
    return torch.exp(x) * 2


def scaled_cos(x):
    return torch.cos(x) * 2


@pytest.fixture(scope="module")
def compiled_class(module_cache_env):
    torch.manual_seed(0)
    model = CompiledMLP()
    x = torch.randn(4, 8)
    with compilation_counter.expect(num_models_seen=1, num_graphs_seen=1, num_backend_compilations=1):
        first = model(x)
    return model, x, first


def test_class_matches_eager_and_compiles_once(compiled_class, module_cache_env):
    model, x, first = compiled_class
    torch.testing.assert_close(first, MLP.forward(model, x))
    y = torch.randn(7, 8)
    with compilation_counter.expect(num_backend_compilations=0, num_graphs_seen=0, num_swapped_calls=2):
        torch.testing.assert_close(model(y), MLP.forward(model, y))
        torch.testing.assert_close(model(x), first)
    cache_dir = get_entry_state(model).backend.cache_dir
    assert re.fullmatch(r"model_\d+_rank_0_ws1/[0-9a-f]{16}", os.path.relpath(cache_dir, module_cache_env))


def test_grad_mode_change_is_not_served_by_swapped_code(compiled_class):
    model, x, first = compiled_class
    assert first.requires_grad
    with torch.no_grad(), compilation_counter.expect(num_swapped_calls=0, num_backend_compilations=1):
        inference = model(x)
    assert not inference.requires_grad
    torch.testing.assert_close(inference, first.detach())
    with compilation_counter.expect(num_swapped_calls=1):
        model(x).sum().backward()
    assert model.up.weight.grad is not None


def test_each_instance_has_its_own_state(compiled_class):
    model, x, _ = compiled_class
    torch.manual_seed(3)
    other = CompiledMLP()
    with compilation_counter.expect(num_models_seen=1, num_backend_compilations=1):
        torch.testing.assert_close(other(x), MLP.forward(other, x))
    with compilation_counter.expect(num_backend_compilations=0, num_swapped_calls=2):
        torch.testing.assert_close(other(x), MLP.forward(other, x))
        torch.testing.assert_close(model(x), MLP.forward(model, x))
    assert get_entry_state(other) is not get_entry_state(model)
    assert get_entry_state(other).model_index != get_entry_state(model).model_index


def test_many_instances_stay_under_dynamo_recompile_limit(module_cache_env):
    @magi_compile(config_patch={"backend": "eager"})
    class Small(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.proj(x) * 2

    count = torch._dynamo.config.recompile_limit + 3
    models = [Small() for _ in range(count)]
    x = torch.randn(3, 4)
    with compilation_counter.expect(num_backend_compilations=count, num_swapped_calls=count):
        for model in models:
            for _ in range(2):
                torch.testing.assert_close(
                    model(x), torch.nn.functional.linear(x, model.proj.weight, model.proj.bias) * 2
                )


def test_function_matches_eager_and_compiles_once(module_cache_env):
    compiled = magi_compile(dynamic_arg_dims={"x": 0})(scaled_tanh)
    x = torch.randn(3, 5)
    with compilation_counter.expect(num_models_seen=1, num_backend_compilations=1):
        torch.testing.assert_close(compiled(x), scaled_tanh(x))
    with compilation_counter.expect(num_backend_compilations=0, num_swapped_calls=1):
        z = torch.randn(9, 5)
        torch.testing.assert_close(compiled(z), scaled_tanh(z))


def test_instance_method_forms(module_cache_env):
    torch.manual_seed(1)
    first, second = MLP(), MLP()
    x = torch.randn(5, 8)
    expected_first, expected_second = first(x), second(x)
    with compilation_counter.expect(num_models_seen=2, num_backend_compilations=2):
        compiled_forward = magi_compile(first.forward)
        torch.testing.assert_close(compiled_forward(x), expected_first)
        assert magi_compile(second, method_name="forward") is second
        assert get_entry_state(second) is None, "no state before the first call"
        torch.testing.assert_close(second(x), expected_second)
    assert get_entry_state(second).bound_self is second
    assert get_entry_state(first) is get_entry_state(compiled_forward)
    with compilation_counter.expect(num_backend_compilations=0, num_swapped_calls=2):
        torch.testing.assert_close(first(x), expected_first)
        torch.testing.assert_close(second(x), expected_second)
    assert first.__dict__["forward"] is compiled_forward
    assert get_entry_state(MLP()) is None, "compiling one instance's method leaves the class alone"


def test_static_dim_change_recompiles_through_guards(module_cache_env):
    compiled = magi_compile(config_patch={"backend": "eager"})(scaled_sigmoid)
    a, b = torch.randn(4, 6), torch.randn(4, 3)
    compiled(a)
    with compilation_counter.expect(num_backend_compilations=1, num_swapped_calls=0):
        torch.testing.assert_close(compiled(b), scaled_sigmoid(b))
    with compilation_counter.expect(num_backend_compilations=0, num_swapped_calls=2):
        compiled(torch.randn(6, 3))
        compiled(torch.randn(6, 6))
    # a new Python scalar value is not served by captured code compiled for another value
    with compilation_counter.expect(num_swapped_calls=0):
        torch.testing.assert_close(compiled(a, 0.5), scaled_sigmoid(a, 0.5))


def test_bytecode_swap_off_keeps_guards(module_cache_env):
    compiled = magi_compile(config_patch={"backend": "eager", "bytecode_swap": False})(scaled_exp)
    with compilation_counter.expect(num_backend_compilations=1, num_swapped_calls=0, num_bytecode_captures=1):
        for rows in (3, 4, 5):
            x = torch.randn(rows, 2)
            torch.testing.assert_close(compiled(x), scaled_exp(x))


@pytest.mark.parametrize("size", [0, 1])
def test_size_0_or_1_is_rejected_on_named_dims_only(module_cache_env, size):
    inferred = magi_compile(config_patch={"backend": "eager"})(scaled_tanh)
    x = torch.randn(size, 4)
    torch.testing.assert_close(inferred(x), scaled_tanh(x))
    named = magi_compile(dynamic_arg_dims={"x": 1}, config_patch={"backend": "eager"})(scaled_tanh)
    with pytest.raises(ValueError, match="dynamic dim 1"):
        named(torch.randn(4, size))


def gelu_matmul(x, w):
    return torch.nn.functional.gelu(x @ w)


def test_inferred_dims_are_soft(module_cache_env):
    # w's dim 0 is specialized by the matmul: an inferred dim must not make that an error,
    # and the bytecode swap must not treat it as free to change
    compiled = magi_compile(config_patch={"backend": "eager"})(gelu_matmul)
    w = torch.randn(8, 4)
    with compilation_counter.expect(num_backend_compilations=1):
        for rows in (3, 5):
            x = torch.randn(rows, 8)
            torch.testing.assert_close(compiled(x, w), gelu_matmul(x, w))
    wider_w, x = torch.randn(6, 4), torch.randn(3, 6)
    with compilation_counter.expect(num_swapped_calls=0):
        torch.testing.assert_close(compiled(x, wider_w), gelu_matmul(x, wider_w))


@pytest.mark.parametrize("aot", [False, True])
def test_named_dims_stay_strict(module_cache_env, caplog, aot):
    """w's dim 0 is tied to x's static dim 1 by the matmul: naming it is the user's error, said as
    one ValueError (torch's explanation and the user's stack kept), never an AOT fallback."""

    def relu_matmul_named(x, w):
        return torch.relu(x @ w)

    patch = {"backend": "eager"} if not aot else {"aot": True}
    compiled = magi_compile(dynamic_arg_dims={"x": 0, "w": 0}, config_patch=patch)(relu_matmul_named)
    with pytest.raises(ValueError, match=r"dynamic_arg_dims=\{'x': \(0,\), 'w': \(0,\)\} names a dim that") as raised:
        compiled(torch.randn(3, 8), torch.randn(8, 4))
    message = str(raised.value)
    assert "relu_matmul_named does not let vary" in message and "specialized it to be a constant (8)" in message
    assert "falling back to JIT" not in caplog.text


def test_nested_decorated_calls_run_inline(module_cache_env):
    @magi_compile(config_patch={"backend": "eager"})
    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = CompiledMLP()

        def forward(self, x):
            return self.inner(x) * 2

    torch.manual_seed(2)
    outer = Outer()
    x = torch.randn(3, 8)
    with compilation_counter.expect(num_models_seen=1, num_backend_compilations=1):
        torch.testing.assert_close(outer(x), MLP.forward(outer.inner, x) * 2)
    assert get_entry_state(outer.inner) is None, "the inner module was traced inline, not compiled on its own"


def test_a_swapped_entry_traced_inside_another_compile_runs_inline(module_cache_env):
    """An entry whose swapped code exists is still traced inline by an enclosing compile: the
    decorator decides that before the entry's swapped path, which no longer asks itself."""
    torch.manual_seed(3)
    inner = CompiledMLP()
    x = torch.randn(3, 8)
    inner(x)
    with compilation_counter.expect(num_swapped_calls=1):
        inner(x)

    def outer(y):
        return inner(y) * 2

    traced = torch.compile(outer, backend="eager", fullgraph=True)
    with compilation_counter.expect(num_swapped_calls=0, num_backend_compilations=0):
        torch.testing.assert_close(traced(x), MLP.forward(inner, x) * 2)


def test_compile_mode_none_and_torch_compile(module_cache_env):
    eager = magi_compile(config_patch={"compile_mode": "NONE"})(scaled_cos)
    plain = magi_compile(config_patch={"compile_mode": "TORCH_COMPILE", "backend": "eager"})(scaled_cos)
    x = torch.randn(3, 4)
    with compilation_counter.expect(num_models_seen=0, num_graphs_seen=0):
        torch.testing.assert_close(eager(x), scaled_cos(x))
        torch.testing.assert_close(plain(x), scaled_cos(x))


def sin_matmul(x, w):
    return torch.sin(x @ w)


def test_autocast_change_is_not_served_by_swapped_code(module_cache_env):
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, config_patch={"backend": "eager"})(sin_matmul)
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    with torch.no_grad():
        compiled(x, w)
        with compilation_counter.expect(num_swapped_calls=1):
            assert compiled(torch.randn(6, 8), w).dtype == torch.float32
        with torch.autocast("cpu", dtype=torch.bfloat16), compilation_counter.expect(num_swapped_calls=0):
            out = compiled(x, w)
            assert out.dtype == torch.bfloat16
            torch.testing.assert_close(out, sin_matmul(x, w))
        with compilation_counter.expect(num_swapped_calls=1):
            assert compiled(x, w).dtype == torch.float32


def test_another_layout_is_not_served_by_swapped_code(module_cache_env):
    """Two non-contiguous layouts of one shape: the second is not run by code compiled (and
    whose generated code asserts strides) for the first."""

    def doubled_plus_one(x):
        return x * 2 + 1

    compiled = magi_compile(doubled_plus_one)
    transposed = torch.randn(8, 16).t()  # (16, 8), strides (1, 16)
    sliced = torch.randn(16, 16)[:, :8]  # (16, 8), strides (16, 1)
    compiled(transposed)
    with compilation_counter.expect(num_swapped_calls=1):
        torch.testing.assert_close(compiled(transposed), doubled_plus_one(transposed))
    with compilation_counter.expect(num_swapped_calls=0):
        torch.testing.assert_close(compiled(sliced), doubled_plus_one(sliced))
    with compilation_counter.expect(num_swapped_calls=1):
        torch.testing.assert_close(compiled(sliced), doubled_plus_one(sliced))


def test_containers_of_tensors_are_described_element_by_element(module_cache_env):
    """A tuple, list or dict argument whose tensors change shape or dtype is not run by code
    compiled for the tensors it held before (Inductor's code asserts their sizes)."""

    def weighted(x, pair, extra):
        return x * pair[0].sum() + pair[1].mean() + extra["bias"]

    compiled = magi_compile(weighted)
    x = torch.randn(8, 4)
    calls = [
        ((torch.randn(3), torch.randn(5)), {"bias": torch.randn(4)}),
        ((torch.randn(3), torch.randn(5)), {"bias": torch.randn(4)}),
        ((torch.randn(6), torch.randn(5, 2)), {"bias": torch.randn(4)}),
        ([torch.randn(6, dtype=torch.float64), torch.randn(5, 2)], {"bias": torch.randn(4)}),
        ((torch.randn(3), torch.randn(5)), {"bias": torch.randn(1)}),
    ]
    swapped = []
    for pair, extra in calls:
        before = compilation_counter.num_swapped_calls
        torch.testing.assert_close(compiled(x, pair, extra), weighted(x, pair, extra))
        swapped.append(compilation_counter.num_swapped_calls - before)
    assert swapped == [0, 1, 0, 0, 0]


class MLPWithDropout(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.lin(x))


@magi_compile
class DropoutMLP(MLPWithDropout):
    pass


def test_train_and_eval_are_not_served_by_each_others_code(module_cache_env):
    """model.eval() after calls in training mode: no dropout, as eager; back in training mode the
    training code is swapped in again."""
    model = DropoutMLP()
    x = torch.randn(4, 8)
    with torch.no_grad():
        model(x)
        with compilation_counter.expect(num_swapped_calls=1):
            model(x)
        model.eval()
        with compilation_counter.expect(num_swapped_calls=1):
            first, second = model(x), model(x)
        torch.testing.assert_close(first, model.lin(x))
        torch.testing.assert_close(second, model.lin(x))
        model.train()
        with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
            dropped = model(x)
    assert (dropped == 0).any()


@dataclasses.dataclass
class ScaleAndBias:
    scale: int
    bias: torch.Tensor


def test_dataclass_arguments_are_described_field_by_field(module_cache_env):
    """A dataclass argument (a metadata object) whose int field changed is not run by code that
    specialized the old value: that gave the old value's result, silently."""

    def scaled(x, meta):
        return x * meta.scale + meta.bias

    compiled = magi_compile(scaled)
    x = torch.randn(8, 4)
    metas = [
        ScaleAndBias(2, torch.randn(4)),
        ScaleAndBias(2, torch.randn(4)),
        ScaleAndBias(3, torch.randn(4)),
        ScaleAndBias(3, torch.randn(1, 4)),
    ]
    swapped = []
    for meta in metas:
        before = compilation_counter.num_swapped_calls
        torch.testing.assert_close(compiled(x, meta), scaled(x, meta))
        swapped.append(compilation_counter.num_swapped_calls - before)
    assert swapped == [0, 1, 0, 0]


def plus_one(x):
    return x + 1


@pytest.mark.parametrize(
    ("dims", "error", "message"),
    [
        ({"x": 5}, ValueError, "dynamic_arg_dims names dim 5 of 'x', which has 2 dim(s) in this call"),
        ({"x": -3}, ValueError, "dynamic_arg_dims names dim -3 of 'x', which has 2 dim(s) in this call"),
        ({"x": "0"}, TypeError, "dynamic_arg_dims['x'] must be an int or a list of ints, got '0'"),
        ({"x": [0, 1.0]}, TypeError, "dynamic_arg_dims['x'] must be an int or a list of ints, got [0, 1.0]"),
        ({"x": True}, TypeError, "dynamic_arg_dims['x'] must be an int or a list of ints, got True"),
        (["x"], TypeError, "dynamic_arg_dims must map parameter names to dims, got list"),
    ],
)
def test_bad_dynamic_arg_dims_are_one_clear_error(module_cache_env, dims, error, message):
    compiled = magi_compile(dynamic_arg_dims=dims, config_patch={"backend": "eager"})(plus_one)
    with pytest.raises(error) as raised:
        compiled(torch.randn(4, 2))
    assert str(raised.value) == message


def test_a_negative_named_dim_counts_from_the_end(module_cache_env):
    compiled = magi_compile(dynamic_arg_dims={"x": -1}, config_patch={"backend": "eager"})(plus_one)
    compiled(torch.randn(2, 4))
    with compilation_counter.expect(num_backend_compilations=0, num_swapped_calls=1):
        compiled(torch.randn(2, 6))


def test_a_module_instance_is_pointed_to_method_name():
    with pytest.raises(TypeError, match=r"got a Linear instance: pass method_name='forward'"):
        magi_compile(torch.nn.Linear(2, 2))


def test_a_module_argument_in_eval_mode_is_not_served_by_training_code(module_cache_env):
    """A function given the model as an argument (gpt-fast's decode step, a loss function used for
    training and validation): model.eval() between calls turns dropout off, as eager."""

    def apply(model, x):
        return model(x)

    compiled = magi_compile(apply)
    model = MLPWithDropout()
    x = torch.randn(4, 8)
    with torch.no_grad():
        compiled(model, x)
        model.eval()
        first, second = compiled(model, x), compiled(model, x)
    torch.testing.assert_close(first, model.lin(x))
    torch.testing.assert_close(second, model.lin(x))


class GrowingCache:
    """A KV-cache-like argument: a plain object whose tensor grows between calls."""

    def __init__(self):
        self.keys = torch.zeros(0, 4)

    def append(self, row):
        self.keys = torch.cat([self.keys, row])


def test_an_object_argument_keeps_dynamos_guards(module_cache_env, caplog):
    """An argument the dispatch signature cannot describe (Hugging Face's DynamicCache in
    generate()) is never served by swapped code: its tensors grew, and the code captured for the
    old length asserted the old size (or read a stale attribute silently)."""

    def attend(x, cache):
        return x @ cache.keys.T

    compiled = magi_compile(attend)
    cache = GrowingCache()
    x = torch.randn(3, 4)
    with caplog.at_level("INFO", logger="magi_compiler.entry_state"):
        for _ in range(4):
            cache.append(torch.randn(2, 4))
            with compilation_counter.expect(num_swapped_calls=0):
                torch.testing.assert_close(compiled(x, cache), attend(x, cache))
    lines = [r.getMessage() for r in caplog.records if "not described by the dispatch signature" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "arguments of type GrowingCache" in lines[0] and "keep Dynamo's guards" in lines[0]


def test_dtype_and_enum_arguments_are_described_by_value(module_cache_env):
    """A dtype argument was described by its type alone, so code compiled for float64 served a
    float32 call and returned float64."""

    def cast_twice(x, dtype):
        return x.to(dtype) * 2

    compiled = magi_compile(cast_twice)
    x = torch.randn(4, 3)
    swapped = []
    for dtype in (torch.float64, torch.float64, torch.float32, torch.float32):
        before = compilation_counter.num_swapped_calls
        out = compiled(x, dtype)
        assert out.dtype == dtype
        torch.testing.assert_close(out, cast_twice(x, dtype))
        swapped.append(compilation_counter.num_swapped_calls - before)
    assert swapped == [0, 1, 0, 1]


def test_instances_recompiling_for_new_shapes_stay_under_dynamo_recompile_limit(module_cache_env):
    """Every instance of a decorated class compiling a second graph (a dim that was not marked
    dynamic changed) counts against Dynamo's limit per code object: as many instances as the
    limit, two graphs each, hit it on the second shape and failed under fullgraph (found on
    Hugging Face's LlamaDecoderLayer, whose 2 x 4 layer instances share one code object)."""

    @magi_compile(config_patch={"backend": "eager"})
    class Scale(torch.nn.Module):
        def forward(self, x):
            return x * 2

    count = torch._dynamo.config.recompile_limit
    models = [Scale() for _ in range(count)]
    with compilation_counter.expect(num_backend_compilations=2 * count):
        for shape in ((3, 4), (3, 5)):
            x = torch.randn(shape)
            for model in models:
                torch.testing.assert_close(model(x), x * 2)


def blend(x, t: float):
    return torch.relu(x) * (1 - t) + x * t


def test_a_float_argument_changing_every_call_stays_symbolic(module_cache_env):
    """A diffusion-style timestep passed as a Python float: Dynamo keeps it symbolic from its
    second value on, and Inductor must too. Compiled with the tracing context's fake mode, each
    new value was specialized and compiled again, and the ninth value failed on Dynamo's
    recompile limit (FailOnRecompileLimitHit under fullgraph)."""
    compiled = magi_compile(blend)
    x = torch.randn(4, 8)
    with torch.no_grad(), compilation_counter.expect(num_inductor_compiles=2, num_restarts=0):
        for step in range(torch._dynamo.config.recompile_limit + 4):
            t = 1 - step / 50
            torch.testing.assert_close(compiled(x, t), blend(x, t))
