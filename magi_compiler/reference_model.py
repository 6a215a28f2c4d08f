"""A small reference model whose source file is the ``traced_sources`` input of the
reference cases printed by ``python -m magi_compiler.cache_key --explain``.

Editing this file changes those reference keys, as editing any traced model source
changes a real key. It is also the model the demo (``python -m magi_compiler.demo``) runs.
"""

import torch


class ReferenceMLP(torch.nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(x)))
