"""Splitting at a registered custom op: number of pieces, outputs, flat piece inputs, and
disable_graph_split."""

import logging
import operator

import pytest
import torch
from torch import fx

from magi_compiler import compilation_counter, get_entry_state, magi_compile
from magi_compiler.config import CompileConfig, apply_config_patch
from magi_compiler.cudagraph import unstable_piece_args
from magi_compiler.splitting import split_graph
from tests.magi.scripts.tuple_op import PAIR_OP


@torch.library.custom_op("magi_split_test::attn", mutates_args=())
def attn(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1) * x


@attn.register_fake
def _(x):
    return torch.empty_like(x)


def pair_then_index(x):
    a, b = torch.ops.magi_tuple_test.pair(torch.relu(x))
    c = torch.ops.magi_split_test.attn(a - b)
    return c[0] * 2, b


class TwoBlocks(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(3))

    def forward(self, x):
        x = self.proj[0](x)
        x = torch.ops.magi_split_test.attn(x)
        x = torch.relu(self.proj[1](x))
        x = torch.ops.magi_split_test.attn(x)
        return self.proj[2](x)


def test_split_graph_pieces_in_order():
    gm = fx.symbolic_trace(TwoBlocks())
    _, pieces = split_graph(gm, ["magi_split_test::attn"])
    assert [p.is_splitting_op for p in pieces] == [False, True, False, True, False]
    _, unsplit = split_graph(gm, ["other::op"])
    assert [p.is_splitting_op for p in unsplit] == [False]


def _placeholders(module: fx.GraphModule) -> list[str]:
    return [node.name for node in module.graph.find_nodes(op="placeholder")]


@pytest.mark.parametrize("trace", ["symbolic", "dynamo"])
def test_tuple_returning_splitting_op_passes_its_elements_one_argument_each(trace):
    """The getitems of a splitting op's tuple go to its piece, so the next piece takes flat tensors
    (what a cache-loaded Inductor artifact expects) and PIECEWISE copies each element into its own
    static buffer; indexing a tensor (``c[0]``) stays in the piece that uses it. ``symbolic``
    decides by the op's schema, ``dynamo`` by the example values Dynamo records."""
    if trace == "symbolic":
        gm = fx.symbolic_trace(pair_then_index)
    else:
        captured = []

        def capture(graph_module, _):
            captured.append(graph_module)
            return graph_module.forward

        torch._dynamo.reset()
        torch.compile(pair_then_index, backend=capture, dynamic=False, fullgraph=True)(torch.randn(3, 4))
        (gm,) = captured
        assert isinstance(gm.graph.find_nodes(op="placeholder")[0].meta["example_value"], torch.Tensor)
    ops = [PAIR_OP, "magi_split_test::attn"]
    split_gm, pieces = split_graph(gm, ops)
    assert [p.is_splitting_op for p in pieces] == [False, True, False, True, False]
    modules = {p.name: p.module for p in pieces}
    getitems = [n for n in modules["submod_1"].graph.nodes if n.target is operator.getitem]
    assert len(getitems) == 2, modules["submod_1"].code
    assert len(_placeholders(modules["submod_2"])) == 2, modules["submod_2"].code
    calls = {n.target: n for n in split_gm.graph.find_nodes(op="call_module")}
    for arg in calls["submod_2"].args:
        assert arg.target is operator.getitem and arg.args[0] is calls["submod_1"], calls["submod_2"].args
    assert any(n.target is operator.getitem for n in modules["submod_4"].graph.nodes), "c[0] stays put"
    splitting = {p.name for p in pieces if p.is_splitting_op}
    assert unstable_piece_args(split_gm, splitting)["submod_2"] == (0, 1)
    x = torch.randn(3, 4)
    torch.testing.assert_close(split_gm(x), gm(x))


@pytest.mark.parametrize("op_name", ["magi_split_test::attn", "magi_split_test.attn.default"])
def test_split_at_custom_op_compiles_pieces(module_cache_env, op_name):
    model = magi_compile(TwoBlocks(), method_name="forward", config_patch={"splitting_ops": [op_name]})
    x = torch.randn(4, 8)
    with torch.no_grad():
        expected = TwoBlocks.forward(model, x)
        with compilation_counter.expect(
            num_backend_compilations=1, num_piecewise_graphs_seen=3, num_splitting_ops_seen=2
        ):
            torch.testing.assert_close(model(x), expected)
        y = torch.randn(6, 8)
        torch.testing.assert_close(model(y), TwoBlocks.forward(model, y))


def test_disable_graph_split_compiles_one_piece(module_cache_env):
    patch = {"splitting_ops": ["magi_split_test::attn"], "disable_graph_split": True, "backend": "eager"}
    model = magi_compile(TwoBlocks(), method_name="forward", config_patch=patch)
    x = torch.randn(4, 8)
    with torch.no_grad(), compilation_counter.expect(num_piecewise_graphs_seen=1, num_splitting_ops_seen=0):
        torch.testing.assert_close(model(x), TwoBlocks.forward(model, x))


@pytest.mark.parametrize("op_name", ["attn", "::attn", "magi_split_test::"])
def test_a_splitting_op_name_without_namespace_and_op_is_a_config_error(op_name):
    """Such a name can never match an op, so the graph would silently stay whole."""
    with pytest.raises(ValueError, match=f"splitting_ops: {op_name!r} is not an op name"):
        apply_config_patch(CompileConfig(), {"splitting_ops": [op_name]})
    env = {"MAGI_COMPILE_SPLITTING_OPS": op_name}
    with pytest.raises(ValueError, match="MAGI_COMPILE_SPLITTING_OPS"):
        CompileConfig.from_env(env)


def test_a_splitting_op_that_names_no_registered_op_is_logged_once(module_cache_env, caplog):
    """A typo in an op's name (found trying nanoGPT with MAGI_COMPILE_SPLITTING_OPS=nosuch::op) left the graph whole
    without a word; the entry now says which names resolve to no registered op."""
    patch = {"splitting_ops": ["magi_split_test::atn", "magi_split_test::attn.nosuch", "magi_split_test::attn"]}
    model = magi_compile(TwoBlocks(), method_name="forward", config_patch=patch)
    logged = caplog.at_level(logging.WARNING, logger="magi_compiler")
    with torch.no_grad(), logged, compilation_counter.expect(num_splitting_ops_seen=2):
        for batch in (4, 6):
            x = torch.randn(batch, 8)
            torch.testing.assert_close(model(x), TwoBlocks.forward(model, x))
    lines = [r.getMessage() for r in caplog.records if "registered op" in r.getMessage()]
    unknown = "['magi_split_test::atn', 'magi_split_test::attn.nosuch']"
    advice = "register the op before the entry's first call, or correct the name"
    name = get_entry_state(model).model_name
    assert lines == [
        f"{name}: splitting_ops {unknown} name no registered op; the graph is not split at them ({advice})"
    ]
