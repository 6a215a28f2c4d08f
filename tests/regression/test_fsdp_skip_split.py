"""fsdp.enable_fsdp next to a split-graph model: the overlap pass is skipped with one warning.

One gloo rank in this process; the models are tiny and compiled with the eager piece backend
(the passes run the same way as with Inductor, before any piece is compiled).
"""

from __future__ import annotations

import logging

import pytest
import torch
import torch.distributed as dist
from torch import fx, nn
from torch.distributed.device_mesh import init_device_mesh

from magi_compiler import compilation_counter, magi_compile
from magi_compiler.distributed import data_parallel
from magi_compiler.passes import fsdp_overlap
from magi_compiler.splitting import split_graph

SPLIT_OP = "magi_fsdp_test::boundary"


@torch.library.custom_op(SPLIT_OP, mutates_args=())
def boundary(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@boundary.register_fake
def _boundary_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


boundary.register_autograd(lambda ctx, grad: grad * 2)


class TwoStage(nn.Module):
    """Linear, splitting op, Linear: a split-graph model when SPLIT_OP is a splitting op."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.second = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.ops.magi_fsdp_test.boundary(torch.relu(self.first(x))))


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def messages(self, level: int) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == level]


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MAGI_COMPILE_CACHE_ROOT_DIR", str(tmp_path_factory.mktemp("magi_cache")))
        yield init_device_mesh("cpu", (1,))
    dist.destroy_process_group()


@pytest.fixture
def logs():
    logger = logging.getLogger("magi_compiler")
    handler, level = _Records(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def _compiled(mesh, tag: str, **patch) -> tuple[TwoStage, TwoStage]:
    torch.manual_seed(0)
    reference = TwoStage()
    model = TwoStage()
    model.load_state_dict(reference.state_dict())
    data_parallel(model, mesh, "fully_shard")
    config_patch = {"splitting_ops": [SPLIT_OP], "backend": "eager", "fsdp": {"enable_fsdp": True}, **patch}
    magi_compile(model, method_name="forward", model_tag=tag, config_patch=config_patch)
    return model, reference


def _check_output(model: TwoStage, reference: TwoStage) -> None:
    x = torch.randn(4, 8)
    torch.testing.assert_close(model(x), reference(x))


def test_split_model_skips_overlap_with_one_warning(mesh, logs):
    before = compilation_counter.snapshot()
    for _ in range(2):  # two instances: two compiles of the same tagged model
        _check_output(*_compiled(mesh, "vae_split"))
    assert compilation_counter.num_backend_compilations - before.num_backend_compilations == 2
    assert compilation_counter.num_splitting_ops_seen - before.num_splitting_ops_seen == 2, "the graph was split"
    warnings = [m for m in logs.messages(logging.WARNING) if "vae_split" in m]
    assert len(warnings) == 1, warnings
    assert "split" in warnings[0] and "config_patch={'disable_graph_split': True}" in warnings[0]
    assert not [m for m in logs.messages(logging.INFO) if m.startswith("fsdp overlap:")], "the pass must not run"


def test_unsplit_model_enters_overlap(mesh, logs):
    _check_output(*_compiled(mesh, "dit_whole", disable_graph_split=True))
    entered = [m for m in logs.messages(logging.INFO) if m.startswith("fsdp overlap:")]
    assert entered == [
        "fsdp overlap: running on a graph of model dit_whole",
        "fsdp overlap: 4 parameter all-gathers lowered into 1 coalesced bucket(s), prefetch depth 1",
    ]
    assert not logs.messages(logging.WARNING)


def test_removing_the_guard_fails(mesh, monkeypatch):
    monkeypatch.setattr(fsdp_overlap, "overlap_applies", lambda model_tag, will_split: True)
    model, _ = _compiled(mesh, "vae_unguarded")
    with pytest.raises((AssertionError, RuntimeError), match="FSDPOverlapPass on a split graph") as info:
        model(torch.randn(4, 8))
    chain, err = [], info.value
    while err is not None:
        chain.append(type(err))
        err = err.__cause__ or err.__context__
    assert AssertionError in chain, f"expected the pass's assertion in {chain}"


def test_overlap_then_split_leaves_a_collective_in_flight_across_pieces(mesh):
    """Why the pass refuses split graphs: prefetching moves an all-gather's issue and its wait
    into different pieces, so a separately compiled piece returns an un-waited collective."""
    torch.manual_seed(0)
    model = data_parallel(TwoStage(), mesh, "fully_shard")
    graphs: list[fx.GraphModule] = []

    def backend(gm: fx.GraphModule, example_inputs: list) -> object:
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    torch.compile(model, backend=backend, fullgraph=True)(torch.randn(4, 8))
    (gm,) = graphs
    fsdp_overlap.apply_fsdp_overlap(gm, bucket_mode="none", bucket_size_mib=1, prefetch_depth=1)
    _, pieces = split_graph(gm, [SPLIT_OP])
    crossing = []
    for piece in pieces:
        output = next(n for n in piece.module.graph.nodes if n.op == "output")
        for value in torch.utils._pytree.tree_leaves(output.args):
            if isinstance(value, fx.Node) and value.target is torch.ops._c10d_functional.all_gather_into_tensor.default:
                crossing.append((piece.name, value.name))
    assert crossing, "expected a piece to return an un-waited all-gather"
