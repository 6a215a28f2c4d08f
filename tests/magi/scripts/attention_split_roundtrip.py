"""A causal self-attention block shaped like nanoGPT's (``(batch, seq, hidden)`` viewed as heads,
both batch and sequence dynamic), split at an attention custom op, called at three shapes; saves
its and eager's outputs with torch.save to argv[1] and prints the compilation counters as JSON on
the last stdout line. JIT or AOT and the cache come from the MAGI_COMPILE_* environment."""

import torch
from roundtrip import run_and_report

from magi_compiler import magi_compile

ATTENTION_OP = "magi_attn_split_test::causal"


@torch.library.custom_op(ATTENTION_OP, mutates_args=())
def causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)


@causal.register_fake
def _(q, k, v):
    return torch.empty_like(q)


class SelfAttention(torch.nn.Module):
    def __init__(self, hidden: int = 32, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv = torch.nn.Linear(hidden, 3 * hidden)
        self.proj = torch.nn.Linear(hidden, hidden)

    def forward(self, x):
        batch, seq, hidden = x.size()
        q, k, v = self.qkv(x).split(hidden, dim=2)
        q, k, v = (t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2) for t in (q, k, v))
        y = torch.ops.magi_attn_split_test.causal(q, k, v)
        return self.proj(y.transpose(1, 2).contiguous().view(batch, seq, hidden))


def main():
    torch.manual_seed(0)
    model = SelfAttention()
    eager = SelfAttention.forward
    magi_compile(
        model,
        method_name="forward",
        dynamic_arg_dims={"x": [0, 1]},
        model_tag="attn",
        config_patch={"splitting_ops": [ATTENTION_OP]},
    )
    calls = [(torch.randn(batch, seq, 32),) for batch, seq in ((2, 8), (3, 12), (2, 5))]
    run_and_report(model, lambda x: eager(model, x), calls)


if __name__ == "__main__":
    main()
