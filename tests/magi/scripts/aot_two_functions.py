"""Compiles a function whose dynamic dim is called at 8 rows and then at 1 (a size Dynamo
specializes, so the AOT entry compiles a second function, as a prefill and a decode step do),
saves its and eager's outputs with torch.save to argv[1] and prints the compilation counters as
JSON on the last stdout line. JIT or AOT and the cache come from the MAGI_COMPILE_* environment."""

import dataclasses
import json
import sys

import torch

from magi_compiler import compilation_counter, magi_compile


def project(x, w):
    return torch.tanh(x @ w) * 2


def main():
    torch.manual_seed(0)
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, model_tag="two")(project)
    w = torch.randn(4, 4)
    inputs = [torch.randn(rows, 4) for rows in (8, 1, 6)]
    with torch.no_grad():
        outputs = [compiled(x, w) for x in inputs]
        eager = [project(x, w) for x in inputs]
    torch.save({"outputs": outputs, "eager": eager}, sys.argv[1])
    print(json.dumps(dataclasses.asdict(compilation_counter)))


if __name__ == "__main__":
    main()
