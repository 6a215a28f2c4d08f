"""One process of the AOT round-trip test (run by ``test_aot_jit_fallback.py``, not by pytest).

Builds a small model with a fixed seed on the device ``argv[2]``, calls it at two batch sizes
with ``aot=True`` (the cache root and ``assert_cache_hit`` come from the environment) and
writes the outputs (on CPU) and the compilation counters to ``argv[1]`` (``torch.save``).
"""

import dataclasses
import sys

import torch

from magi_compiler import compilation_counter, get_entry_state, magi_compile


@magi_compile(model_tag="roundtrip", config_patch={"aot": True})
class TinyBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x)) * 2 + x


def main(out_path: str, device: str) -> None:
    torch.manual_seed(0)
    block = TinyBlock().to(device)
    inputs = [torch.randn(4, 8, device=device), torch.randn(9, 8, device=device)]
    outputs = [block(x).cpu() for x in inputs]
    state = get_entry_state(block)
    torch.save(
        {
            "outputs": outputs,
            "eager": [TinyBlock.forward.__wrapped__(block, x).cpu() for x in inputs],
            "counters": dataclasses.asdict(compilation_counter),
            "aot": state.aot,
            "artifact": str(state.aot_strategy.artifact_path),
        },
        out_path,
    )


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
