"""The overlap pass's graph rewrite on one rank (gloo on CPU, NCCL on a GPU): bucketing, prefetch order, what it leaves alone.

The 2-rank run (real all-gathers, gradients against eager) is in test_data_parallel.py.
Parameter reads are counted with `is_redistribute`, which matches both spellings Dynamo uses:
torch 2.13 records `redistribute` as a call_method node, torch 2.11 as a call_function `prim_redistribute`.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
from torch import fx
from torch.distributed.device_mesh import init_device_mesh

from magi_bench.overlap_report import capture_graph
from magi_bench.toy_model import TinyTransformer
from magi_compiler.distributed import data_parallel
from magi_compiler.passes.fsdp_overlap import apply_fsdp_overlap, find_param_gathers, is_redistribute, plan_buckets

WAIT = torch.ops._c10d_functional.wait_tensor.default
N_PARAMS = 2 * 12 + 2
# one rank: NCCL on the GPU where CUDA is present, gloo on CPU otherwise
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(scope="module")
def mesh():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    if DEVICE == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group("nccl" if DEVICE == "cuda" else "gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield init_device_mesh(DEVICE, (1,))
    dist.destroy_process_group()


def _is_ag(node: fx.Node) -> bool:
    return node.op == "call_function" and "all_gather_into_tensor" in str(node.target)


def _sequence(gm: fx.GraphModule) -> list[tuple[str, fx.Node]]:
    seq = []
    for node in gm.graph.nodes:
        if _is_ag(node):
            seq.append(("issue", node))
        elif node.op == "call_function" and node.target is WAIT:
            seq.append(("wait", node.args[0]))
    return seq


def _graph(mesh, mode: str = "fully_shard") -> fx.GraphModule:
    torch.manual_seed(0)
    model = data_parallel(TinyTransformer(16, layers=2).to(DEVICE), mesh, mode)
    return capture_graph(model, torch.randn(2, 4, 16, device=DEVICE))


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_each_bucket_is_issued_depth_buckets_ahead(mesh, depth):
    gm = _graph(mesh)
    report = apply_fsdp_overlap(gm, bucket_mode="none", bucket_size_mib=1, prefetch_depth=depth)
    assert report.params_lowered == N_PARAMS and report.all_gathers == N_PARAMS
    seq = _sequence(gm)
    issues = [n for kind, n in seq if kind == "issue"]
    assert [n for kind, n in seq if kind == "wait"] == issues
    pos = {(kind, n): i for i, (kind, n) in enumerate(seq)}
    for i, node in enumerate(issues):
        waits_before = sum(1 for kind, _ in seq[: pos[("issue", node)]] if kind == "wait")
        # issued after exactly max(0, i - depth) earlier waits
        assert waits_before == max(0, i - depth), (i, waits_before)
    assert not any(is_redistribute(n) for n in gm.graph.nodes)


def test_coalesced_buckets_respect_the_size_limit(mesh):
    gm = _graph(mesh)
    gathers, left = find_param_gathers(gm)
    assert len(gathers) == N_PARAMS and not left
    limit_mib = 0.004  # 4 KiB: the 16x64 / 64x16 fp32 weights (4 KiB) fill a bucket alone
    buckets = plan_buckets(gathers, "coalesced", limit_mib)
    assert sum(len(b) for b in buckets) == N_PARAMS
    assert [g for b in buckets for g in b] == gathers, "buckets keep first-use order"
    for bucket in buckets:
        size = sum(g.gathered_bytes for g in bucket)
        assert size <= limit_mib * (1 << 20) or len(bucket) == 1
    assert any(len(b) > 1 for b in buckets) and len(buckets) < N_PARAMS
    assert len(plan_buckets(gathers, "coalesced", 64)) == 1
    with pytest.raises(ValueError, match="bucket_mode"):
        plan_buckets(gathers, "fused", 1)


def test_lowered_graph_computes_the_same_outputs_and_grads(mesh):
    torch.manual_seed(0)
    reference = data_parallel(TinyTransformer(16, layers=2).to(DEVICE), mesh, "fully_shard")
    reports = []

    def backend(gm, example_inputs):
        reports.append(apply_fsdp_overlap(gm, bucket_mode="coalesced", bucket_size_mib=0.004, prefetch_depth=2))
        return gm.forward

    model = copy.deepcopy(reference)
    torch._dynamo.reset()
    compiled = torch.compile(model, backend=backend, fullgraph=True)
    x = torch.randn(2, 4, 16, device=DEVICE)
    out, ref_out = compiled(x), reference(x)
    torch.testing.assert_close(out, ref_out)
    out.square().mean().backward()
    ref_out.square().mean().backward()
    for p, ref_p in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad.to_local(), ref_p.grad.to_local())
    assert reports and reports[0].params_lowered == N_PARAMS


@pytest.mark.parametrize("mode", ["replicate", "hybrid_shard"])
def test_modes_without_a_shard0_all_gather_are_left_alone(mesh, mode):
    gm = _graph(init_device_mesh(DEVICE, (1, 1)) if mode == "hybrid_shard" else mesh, mode)
    report = apply_fsdp_overlap(gm, bucket_mode="coalesced", bucket_size_mib=64, prefetch_depth=1)
    assert report.params_lowered == 0 and len(report.params_left) == N_PARAMS
    assert not any(_is_ag(n) for n in gm.graph.nodes)
    assert sum(1 for n in gm.graph.nodes if is_redistribute(n)) == N_PARAMS


class _Tied(torch.nn.Module):
    """Reads the same weight twice: two redistributes of one parameter in Dynamo's graph."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.lin(x)) @ self.lin.weight


def _gathered_param(wait: fx.Node) -> fx.Node:
    """The parameter placeholder behind a bucket-of-one wait: wait <- all-gather <- grad_scale <- to_local <- param."""
    all_gather = wait.args[0]
    scaled = all_gather.args[0]
    shard = scaled.args[0]
    return shard.args[0]


def test_a_parameter_read_twice_is_gathered_once(mesh):
    torch.manual_seed(0)
    reference = data_parallel(_Tied().to(DEVICE), mesh, "fully_shard")
    model = copy.deepcopy(reference)
    graphs = []

    def backend(gm, example_inputs):
        reads = sum(1 for n in gm.graph.nodes if is_redistribute(n))
        report = apply_fsdp_overlap(gm, bucket_mode="none", bucket_size_mib=1, prefetch_depth=1)
        graphs.append((reads, report, gm.graph))
        return gm.forward

    torch._dynamo.reset()
    x = torch.randn(2, 8, device=DEVICE)
    out = torch.compile(model, backend=backend, fullgraph=True)(x)
    ref_out = reference(x)
    torch.testing.assert_close(out, ref_out)
    out.sum().backward()
    ref_out.sum().backward()
    for p, ref_p in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(p.grad.to_local(), ref_p.grad.to_local())
    ((reads, report, graph),) = graphs
    assert reads == 3 and report.params_lowered == 2 and report.all_gathers == 2
    # the lowered graph itself: no redistribute left, one all-gather per parameter, and the
    # weight's single wait feeds both of its reads (the linear and the matmul)
    assert not any(is_redistribute(n) for n in graph.nodes)
    assert sum(1 for n in graph.nodes if _is_ag(n)) == 2
    readers = {_gathered_param(n).target: sorted(u.name for u in n.users) for n in graph.nodes if n.target is WAIT}
    assert readers == {
        "L_self_modules_lin_parameters_weight_": ["linear", "matmul"],
        "L_self_modules_lin_parameters_bias_": ["linear"],
    }


def _kernel_sequence(code: str) -> list[str]:
    """'issue' / 'wait' / 'compute' for each launch line of an Inductor forward `call`."""
    seq = []
    for line in code.splitlines():
        text = line.strip()
        if "_c10d_functional.all_gather_into_tensor" in text and "=" in text and "assert" not in text:
            seq.append("issue")
        elif text.startswith("torch.ops._c10d_functional.wait_tensor"):
            seq.append("wait")
        elif text.startswith(("extern_kernels.", "cpp_fused_", "triton_")) or ".run(" in text:
            seq.append("compute")
    return seq


class _MLPStack(torch.nn.Module):
    """Norm + MLP blocks (no qkv split: with dynamic batch dims MagiBackend currently fails on
    the symbol a split decomposition allocates, a core issue unrelated to FSDP)."""

    def __init__(self, hidden: int = 16, layers: int = 3) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(
                torch.nn.LayerNorm(hidden),
                torch.nn.Linear(hidden, 4 * hidden),
                torch.nn.GELU(),
                torch.nn.Linear(4 * hidden, hidden),
            )
            for _ in range(layers)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = x + block(x)
        return x


def test_inductor_keeps_the_prefetch_order_under_magi_backend(mesh, tmp_path, monkeypatch):
    from torch._inductor.utils import run_and_get_code

    from magi_compiler import magi_compile

    monkeypatch.setenv("MAGI_COMPILE_CACHE_ROOT_DIR", str(tmp_path))
    torch.manual_seed(0)
    model = data_parallel(_MLPStack().to(DEVICE), mesh, "fully_shard")
    n_params = 3 * 6
    patch = {"fsdp": {"enable_fsdp": True, "bucket_mode": "none", "prefetch_depth": 1}}
    magi_compile(model, method_name="forward", model_tag="order", config_patch=patch)
    torch._dynamo.reset()
    with torch._inductor.config.patch(fx_graph_cache=False), torch.no_grad():
        _, codes = run_and_get_code(model, torch.randn(2, 4, 16, device=DEVICE))
    seq = _kernel_sequence(codes[0])
    assert seq.count("issue") == n_params and seq.count("wait") == n_params
    # prefetch depth 1: before each wait but the last, the next all-gather is already issued
    # and compute runs between some issue and its wait (the peak-memory reorder would put
    # every issue and wait first, with no compute in between)
    hidden = 0
    issued = waited = 0
    for i, kind in enumerate(seq):
        if kind == "issue":
            issued += 1
        elif kind == "wait":
            waited += 1
            assert issued >= min(waited + 1, n_params), f"wait {waited} before the next issue: {seq}"
        elif issued > waited:
            hidden += 1
    assert hidden > 0 and seq.index("compute") < len(seq) - seq[::-1].index("issue"), seq
