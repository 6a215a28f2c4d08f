"""compute_input_placement_hash: stable across restart-analysis traces, sensitive to DTensor layout.

Runs in one process on torch's in-process "fake" process group (world size 4, collectives are
no-ops): the hash reads only DTensor metadata, and the restart trace only needs shapes.
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.testing._internal.distributed.fake_pg import FakeStore

from magi_compiler.distributed import data_parallel
from magi_compiler.placement_hash import compute_input_placement_hash

WORLD = 4


@pytest.fixture(scope="module")
def fake_world():
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=WORLD)
    yield
    dist.destroy_process_group()


def _dtensor(mesh, placements, dtype=torch.float32) -> DTensor:
    return DTensor.from_local(torch.zeros(2, 3, dtype=dtype), mesh, placements, run_check=False)


class _ClampModel(nn.Module):
    """Under no_grad, a Python float argument makes AOTAutograd restart Dynamo's analysis once."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor, limit: float) -> torch.Tensor:
        return torch.clamp(self.lin(x), max=limit)


def test_hash_identical_for_both_traces_of_a_restart(fake_world):
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.exc import RestartAnalysis

    model = data_parallel(_ClampModel(), init_device_mesh("cpu", (WORLD,)), "fully_shard")
    traces: list[list] = []
    restarts = []
    aot = aot_autograd(fw_compiler=lambda g, _: make_boxed_func(g.forward))

    def backend(gm, example_inputs):
        traces.append(list(example_inputs))
        try:
            return aot(gm, example_inputs)
        except RestartAnalysis:
            restarts.append(len(traces))
            raise

    torch._dynamo.reset()
    with torch.no_grad():  # the inference graph's scalar tensorification restarts on the float
        torch.compile(model, backend=backend, fullgraph=True, dynamic=True)(torch.randn(2, 8), 0.5)
    assert restarts == [1] and len(traces) == 2, "the model should restart Dynamo's analysis exactly once"
    first, second = traces
    assert len(first) != len(second), "the two traces should differ in their inputs (the float)"
    assert compute_input_placement_hash(first) == compute_input_placement_hash(second)
    assert compute_input_placement_hash(first) != compute_input_placement_hash([]), "DTensor inputs must count"


def test_hash_ignores_plain_tensors_and_scalars(fake_world):
    mesh = init_device_mesh("cpu", (WORLD,))
    param = _dtensor(mesh, (Shard(0),))
    base = compute_input_placement_hash([param, torch.zeros(3), 3])
    assert compute_input_placement_hash([param, torch.zeros(3, dtype=torch.float64), 3]) == base
    assert compute_input_placement_hash([param, torch.zeros(3), 3.0]) == base
    assert compute_input_placement_hash([param, torch.zeros(5, 5), 7]) == base
    assert compute_input_placement_hash([param]) == base


def test_hash_changes_with_placement_dtype_and_mesh_shape(fake_world):
    mesh = init_device_mesh("cpu", (WORLD,))
    sub_mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("a", "b"))["a"]
    assert sub_mesh.ndim == 1 and tuple(sub_mesh.shape) == (2,)
    base = compute_input_placement_hash([_dtensor(mesh, (Shard(0),))])
    variants = {
        "placement": [_dtensor(mesh, (Replicate(),))],
        "shard dim": [_dtensor(mesh, (Shard(1),))],
        "dtype": [_dtensor(mesh, (Shard(0),), torch.bfloat16)],
        "mesh shape": [_dtensor(sub_mesh, (Shard(0),))],
        "input order": [torch.zeros(1), _dtensor(mesh, (Shard(0),)), _dtensor(mesh, (Replicate(),))],
    }
    hashes = {name: compute_input_placement_hash(inputs) for name, inputs in variants.items()}
    for name, value in hashes.items():
        assert value != base, f"changing the {name} must change the hash"
    swapped = compute_input_placement_hash([_dtensor(mesh, (Replicate(),)), _dtensor(mesh, (Shard(0),))])
    assert swapped != hashes["input order"], "the DTensor inputs are hashed in order"
