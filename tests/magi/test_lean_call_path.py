"""The swapped call goes straight to the compiled pieces (magi_compiler.swapped_code.lean_callable):
no Inductor artifact object, Dynamo ``disable`` wrapper or ``nn.Module.__call__`` between the
captured bytecode and the pieces, for freshly compiled and for cache-loaded pieces, with the
outputs, the recompiles and the swapped calls of the full call path."""

import itertools
import types

import torch
from torch import fx
from torch._inductor import CompiledArtifact

from magi_compiler import compilation_counter, entry_state, get_entry_state, magi_compile, swapped_code
from tests.magi.scripts.tuple_op import PAIR_OP  # a splitting op with two outputs

SPLIT_OP = "magi_lean_test::ident"


@torch.library.custom_op(SPLIT_OP, mutates_args=())
def ident(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@ident.register_fake
def _(x):
    return torch.empty_like(x)


def chain(x, w):
    x = torch.relu(x @ w) + 1
    x = torch.ops.magi_lean_test.ident(x)
    x = torch.sigmoid(x) * 2
    x = torch.ops.magi_lean_test.ident(x)
    return x - w.sum()


def pair_chain(x):
    a, b = torch.ops.magi_tuple_test.pair(torch.relu(x))
    return torch.tanh(a) - b, b.sum(0)


def softsign_shift(x):
    return torch.nn.functional.softsign(x) - 0.25


def _fresh_entry(fn, monkeypatch, root, **patch):
    """An entry as a new process builds it: model index 0, an empty Dynamo cache."""
    monkeypatch.setattr(entry_state, "_model_indices", itertools.count(0))
    torch._dynamo.reset()
    return magi_compile(dynamic_arg_dims={"x": 0}, config_patch={"cache_root_dir": str(root), **patch})(fn)


def _direct_callables(compiled):
    """The unwrapped graph callables the entry's swapped functions call, one per captured signature."""
    found = []
    for swapped in get_entry_state(compiled)._swapped.values():
        names = [n for n in swapped.__code__.co_names if n.startswith(swapped_code.DIRECT_PREFIX)]
        assert len(names) == 1 and not any(n.startswith(swapped_code.GRAPH_GLOBAL_PREFIX) for n in names)
        found.append(swapped.__globals__[names[0]])
    return found


def _assert_lean(fn):
    """Not an artifact, a module or a Dynamo ``disable`` wrapper (one records its own id; a
    function that ``functools.wraps`` one, as Inductor's single-output unflattening does, carries
    the wrapper's id and may stay)."""
    assert not isinstance(fn, (torch.nn.Module, CompiledArtifact)), type(fn)
    assert getattr(fn, "_torchdynamo_wrapper_id", None) != id(fn)


def _assert_lean_split_runner(runner):
    """``runner`` is the forward of a twin of the split module: its compiled pieces are lean
    callables, its splitting-op pieces are inlined (the op is called in the twin's own graph)."""
    assert isinstance(runner, types.MethodType) and isinstance(runner.__self__, fx.GraphModule)
    twin = runner.__self__
    targets = [node.target for node in twin.graph.find_nodes(op="call_module")]
    assert len(targets) == 3, targets  # the compiled pieces
    assert not twin._modules, "every piece is a plain callable, not a submodule"
    for target in targets:
        _assert_lean(twin.__dict__[target])
    ops = [node.target for node in twin.graph.nodes if node.op == "call_function"]
    assert ops.count(torch.ops.magi_lean_test.ident) == 2, ops


def test_split_entry_calls_lean_pieces_cold_and_warm(tmp_path, monkeypatch):
    w = torch.randn(8, 8)
    patch = {"splitting_ops": [SPLIT_OP]}
    with torch.no_grad():
        for first_call in ({"num_cache_misses": 3, "num_cache_hits": 0}, {"num_cache_misses": 0, "num_cache_hits": 3}):
            compiled = _fresh_entry(chain, monkeypatch, tmp_path, **patch)
            x = torch.randn(4, 8)
            with compilation_counter.expect(num_backend_compilations=1, num_splitting_ops_seen=2, **first_call):
                torch.testing.assert_close(compiled(x, w), chain(x, w))
            (runner,) = _direct_callables(compiled)
            _assert_lean_split_runner(runner)
            for rows in (5, 9, 4):
                x = torch.randn(rows, 8)
                with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                    torch.testing.assert_close(compiled(x, w), chain(x, w))
            x64, w64 = torch.randn(6, 8, dtype=torch.float64), w.double()
            with compilation_counter.expect(num_swapped_calls=0, num_backend_compilations=1):
                torch.testing.assert_close(compiled(x64, w64), chain(x64, w64))
            with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                out = compiled(x64[:5], w64)
            assert out.dtype == torch.float64
            torch.testing.assert_close(out, chain(x64[:5], w64))
            assert len(_direct_callables(compiled)) == 2


def test_two_output_splitting_op_is_inlined_and_eager_pieces_are_lean(tmp_path, monkeypatch):
    """A splitting op returning a tuple, inlined into the twin; with backend "eager" the compiled
    pieces are GraphModules, made lean as twins of their own."""
    compiled = _fresh_entry(pair_chain, monkeypatch, tmp_path, splitting_ops=[PAIR_OP], backend="eager")
    with torch.no_grad():
        compiled(torch.randn(4, 6))
        for rows in (3, 5, 8):
            x = torch.randn(rows, 6)
            with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                out = compiled(x)
            torch.testing.assert_close(out, pair_chain(x))
    (runner,) = _direct_callables(compiled)
    twin = runner.__self__
    assert [n.target for n in twin.graph.nodes if n.op == "call_function"].count(torch.ops.magi_tuple_test.pair) == 1
    pieces = [twin.__dict__[n.target] for n in twin.graph.find_nodes(op="call_module")]
    assert len(pieces) == 2 and not twin._modules
    for piece in pieces:
        _assert_lean(piece)


def test_two_output_splitting_op_with_inductor_pieces_cold_and_warm(tmp_path, monkeypatch):
    """The Inductor piece after a splitting op returning a tuple takes its elements one argument
    each, so the same entry built again on the cache (pieces loaded, no compile) runs the lean
    path with the outputs of the freshly compiled one."""
    with torch.no_grad():
        for first_call in (
            {"num_inductor_compiles": 2, "num_cache_hits": 0},
            {"num_inductor_compiles": 0, "num_cache_hits": 2},
        ):
            compiled = _fresh_entry(pair_chain, monkeypatch, tmp_path, splitting_ops=[PAIR_OP])
            x = torch.randn(4, 6)
            with compilation_counter.expect(num_backend_compilations=1, **first_call):
                torch.testing.assert_close(compiled(x), pair_chain(x))
            (runner,) = _direct_callables(compiled)
            twin = runner.__self__
            for piece in (twin.__dict__[n.target] for n in twin.graph.find_nodes(op="call_module")):
                _assert_lean(piece)
            for rows in (3, 5, 8):
                x = torch.randn(rows, 6)
                with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                    torch.testing.assert_close(compiled(x), pair_chain(x))


def test_unsplit_entry_calls_the_artifacts_function(tmp_path, monkeypatch):
    with torch.no_grad():
        for first_call in ({"num_cache_misses": 1}, {"num_cache_hits": 1}):
            compiled = _fresh_entry(softsign_shift, monkeypatch, tmp_path)
            x = torch.randn(4, 3)
            with compilation_counter.expect(**first_call):
                torch.testing.assert_close(compiled(x), softsign_shift(x))
            (graph_fn,) = _direct_callables(compiled)
            _assert_lean(graph_fn)
            x = torch.randn(7, 3)
            with compilation_counter.expect(num_swapped_calls=1, num_backend_compilations=0):
                torch.testing.assert_close(compiled(x), softsign_shift(x))


def test_lean_callable_leaves_other_callables_alone():
    def plain(x):
        return x + 1

    assert swapped_code.lean_callable(plain) is plain
    disabled = torch._dynamo.disable(plain)
    assert swapped_code.lean_callable(disabled) is disabled  # only an artifact's inner function is unwrapped
