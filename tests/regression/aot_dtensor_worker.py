"""One process of the natural-fallback test (run by ``test_aot_jit_fallback.py``, not by pytest).

A single-rank gloo process group, a "DiT" whose weight is a sharded DTensor and a plain "VAE",
both with ``aot=True`` and Inductor. The VAE compiles first (AOT); the DiT's AOT compile then
fails for real, with no patching: its class is defined inside a function, so the artifact cannot
name it (a pickling error). DTensor graphs themselves AOT-compile since the backend compiles with
Dynamo's recorded fake inputs. The DiT falls back to JIT, and the VAE keeps running from its AOT
function on the DiT's output and at a new shape. (In the other order the VAE's AOT compile would
fail too: see docs/aot.md, known limits.) Writes a JSON report to ``argv[1]``; ``MASTER_PORT`` and
the cache root come from the environment.
"""

import json
import logging
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor

from magi_compiler import compilation_counter, get_entry_state, magi_compile


class Messages(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def make_sharded_dit(mesh) -> torch.nn.Module:
    """A DiT whose class is local to this function: an AOT artifact cannot refer to it."""

    @magi_compile(model_tag="dit", config_patch={"aot": True})
    class ShardedDiT(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(distribute_tensor(torch.randn(8, 8), mesh, [Shard(0)]))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            full = self.weight.redistribute(self.weight.device_mesh, [Replicate()]).to_local()
            return torch.relu(x @ full)

    return ShardedDiT()


@magi_compile(model_tag="vae", config_patch={"aot": True})
class PlainVAE(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.proj(x))


def main(out_path: str) -> None:
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    dist.init_process_group("gloo", rank=0, world_size=1)
    messages = Messages()
    logging.getLogger("magi_compiler").addHandler(messages)
    torch.manual_seed(0)
    dit, vae = make_sharded_dit(init_device_mesh("cpu", (1,))), PlainVAE()
    x = torch.randn(4, 8)
    with torch.no_grad():
        vae(torch.randn(4, 8))
        vae_graphs = compilation_counter.num_graphs_seen
        hidden = dit(x)
        hidden_again = dit(torch.randn(6, 8))
        vae_graphs_before_reuse = compilation_counter.num_graphs_seen
        out = vae(hidden)
        vae(torch.randn(9, 8))
        vae_graphs_in_reuse = compilation_counter.num_graphs_seen - vae_graphs_before_reuse
        expected_hidden = torch.relu(x @ dit.weight.full_tensor())
        expected_out = torch.tanh(torch.nn.functional.linear(hidden, vae.proj.weight, vae.proj.bias))
    report = {
        "dit_aot": get_entry_state(dit).aot,
        "vae_aot": get_entry_state(vae).aot,
        "vae_artifact_exists": get_entry_state(vae).aot_strategy.artifact_path.is_file(),
        "dit_correct": torch.allclose(hidden, expected_hidden, atol=1e-5),
        "dit_second_shape": list(hidden_again.shape),
        "vae_correct": torch.allclose(out, expected_out, atol=1e-5),
        "fallback_warnings": [m for m in messages.messages if "falling back to JIT" in m],
        "vae_graphs_first_call": vae_graphs,
        "vae_graphs_after_fallback": vae_graphs_in_reuse,
    }
    dist.destroy_process_group()
    with open(out_path, "w", encoding="utf-8") as handle:
        json.dump(report, handle)


if __name__ == "__main__":
    main(sys.argv[1])
