"""The no-op / dead-code pass on real Dynamo graphs."""

import torch

from magi_compiler.config import CompileConfig
from magi_compiler.passes import build_full_graph_passes
from magi_compiler.passes.noop_elimination import eliminate_noops_and_dead_code


def capture_graph(fn, *args):
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch.compile(fn, fullgraph=True, backend=backend)(*args)
    return graphs[0]


def noisy(x, buffer):
    y = x.contiguous().to(torch.float32)
    unused = torch.sin(x)  # noqa: F841 - dead code the pass must remove
    buffer.add_(1)  # a method call with a side effect: must stay
    return y.type_as(x) * 2


def test_removes_noops_and_dead_nodes_keeps_side_effects():
    x, buffer = torch.randn(3, 4), torch.zeros(2)
    gm = capture_graph(noisy, x, buffer)
    eliminate_noops_and_dead_code(gm)
    ops = [str(node.target) for node in gm.graph.nodes if node.op in ("call_method", "call_function")]
    assert not any(name in ops for name in ("contiguous", "to", "type_as")), ops
    assert not any("sin" in name for name in ops), ops
    assert "add_" in ops
    before = buffer.clone()
    torch.testing.assert_close(gm(x, buffer)[0], x * 2)
    torch.testing.assert_close(buffer, before + 1)


@torch.library.custom_op("magi_passes_test::fill_out", mutates_args=("out",))
def fill_out(x: torch.Tensor, out: torch.Tensor) -> None:
    out.copy_(x * 3)


@fill_out.register_fake
def _(x, out):
    return None


def writes_into_out(x):
    out = torch.empty_like(x)
    torch.ops.magi_passes_test.fill_out(x, out)  # returns nothing: only its mutation is used
    return out + 1


def test_an_unused_call_of_a_mutating_custom_op_stays():
    """An out-parameter op has no users in the graph; torch 2.11's own purity test dropped it
    (it reads the schema of an OpOverload, not of the packet Dynamo records)."""
    x = torch.randn(3, 4)
    gm = capture_graph(writes_into_out, x)
    calls = [node for node in gm.graph.nodes if node.op == "call_function" and "fill_out" in str(node.target)]
    assert len(calls) == 1 and not calls[0].users, "the op's call has no users in the graph"
    assert isinstance(calls[0].target, (torch._ops.OpOverloadPacket, torch._ops.OpOverload))
    eliminate_noops_and_dead_code(gm)
    assert [node for node in gm.graph.nodes if "fill_out" in str(node.target)], "the mutating op was removed"
    torch.testing.assert_close(gm(x)[0], x * 3 + 1)


def test_real_conversions_stay():
    def convert(x):
        return x.to(torch.float16).t().contiguous()

    x = torch.randn(3, 4)
    gm = capture_graph(convert, x)
    eliminate_noops_and_dead_code(gm)
    ops = [node.target for node in gm.graph.nodes if node.op == "call_method"]
    assert ops == ["to", "t", "contiguous"]
    torch.testing.assert_close(gm(x)[0], convert(x))


def test_full_graph_pass_list():
    assert build_full_graph_passes(CompileConfig(), None, will_split=False) == [eliminate_noops_and_dead_code]
