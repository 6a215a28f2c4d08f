"""Compiles a function split at a custom op that returns a tuple, calls it at three sizes
(the dynamic dim marked), saves its and eager's outputs with torch.save to argv[1] and prints
the compilation counters as JSON on the last stdout line. JIT or AOT and the cache come from
the MAGI_COMPILE_* environment."""

import torch
from roundtrip import run_and_report
from tuple_op import PAIR_OP

from magi_compiler import magi_compile


def pair_chain(x, w):
    a, b = torch.ops.magi_tuple_test.pair(torch.relu(x @ w))
    return torch.tanh(a) - b, b.sum(0)


def main():
    torch.manual_seed(0)
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, model_tag="pair", config_patch={"splitting_ops": [PAIR_OP]})(
        pair_chain
    )
    w = torch.randn(4, 4)
    run_and_report(compiled, pair_chain, [(torch.randn(rows, 4), w) for rows in (3, 5, 7)])


if __name__ == "__main__":
    main()
