"""A small pre-norm Transformer used by the FSDP overlap report, benchmark and tests."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """Pre-norm self-attention + MLP block."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        assert hidden % heads == 0, "hidden must be a multiple of heads"
        self.heads = heads
        self.attn_norm = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.mlp_norm = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        q, k, v = self.qkv(self.attn_norm(x)).split(hidden, dim=-1)
        q, k, v = (t.view(batch, seq, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.down(torch.nn.functional.gelu(self.up(self.mlp_norm(x))))


class TinyTransformer(nn.Module):
    """`layers` blocks and a final norm; input and output are `(batch, seq, hidden)`."""

    def __init__(self, hidden: int = 16, layers: int = 2, heads: int = 2) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(hidden, heads) for _ in range(layers))
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return self.norm(x)
