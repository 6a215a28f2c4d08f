"""Compiles a function split at a custom op that returns a tuple, calls it at three sizes
(the dynamic dim marked), saves its and eager's outputs with torch.save to argv[1] and prints
the compilation counters as JSON on the last stdout line. JIT or AOT and the cache come from
the MAGI_COMPILE_* environment."""

import dataclasses
import json
import sys

import torch
from tuple_op import PAIR_OP

from magi_compiler import compilation_counter, magi_compile


def pair_chain(x, w):
    a, b = torch.ops.magi_tuple_test.pair(torch.relu(x @ w))
    return torch.tanh(a) - b, b.sum(0)


def main():
    torch.manual_seed(0)
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, model_tag="pair", config_patch={"splitting_ops": [PAIR_OP]})(
        pair_chain
    )
    w = torch.randn(4, 4)
    inputs = [torch.randn(rows, 4) for rows in (3, 5, 7)]
    with torch.no_grad():
        outputs = [compiled(x, w) for x in inputs]
        eager = [pair_chain(x, w) for x in inputs]
    torch.save({"outputs": outputs, "eager": eager}, sys.argv[1])
    print(json.dumps(dataclasses.asdict(compilation_counter)))


if __name__ == "__main__":
    main()
