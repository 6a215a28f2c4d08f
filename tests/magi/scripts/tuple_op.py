"""A splitting op with two outputs (``x * 2, x + 3``), registered once for every test that splits
at it: the scripts of this directory import it as ``tuple_op`` (in their own process), the test
modules as ``tests.magi.scripts.tuple_op``."""

import torch

PAIR_OP = "magi_tuple_test::pair"


@torch.library.custom_op(PAIR_OP, mutates_args=())
def pair(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x * 2, x + 3


@pair.register_fake
def _(x):
    return torch.empty_like(x), torch.empty_like(x)
