"""Splitting at a registered custom op: number of pieces, outputs, and disable_graph_split."""

import pytest
import torch
from torch import fx

from magi_compiler import compilation_counter, magi_compile
from magi_compiler.splitting import split_graph


@torch.library.custom_op("magi_split_test::attn", mutates_args=())
def attn(x: torch.Tensor) -> torch.Tensor:
    return torch.softmax(x, dim=-1) * x


@attn.register_fake
def _(x):
    return torch.empty_like(x)


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
