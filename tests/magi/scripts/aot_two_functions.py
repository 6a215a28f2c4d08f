"""Compiles a function whose dynamic dim is called at 8 rows and then at 1 (a size Dynamo
specializes, so the AOT entry compiles a second function, as a prefill and a decode step do),
saves its and eager's outputs with torch.save to argv[1] and prints the compilation counters as
JSON on the last stdout line. JIT or AOT and the cache come from the MAGI_COMPILE_* environment."""

import torch
from roundtrip import run_and_report

from magi_compiler import magi_compile


def project(x, w):
    return torch.tanh(x @ w) * 2


def main():
    torch.manual_seed(0)
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, model_tag="two")(project)
    w = torch.randn(4, 4)
    run_and_report(compiled, project, [(torch.randn(rows, 4), w) for rows in (8, 1, 6)])


if __name__ == "__main__":
    main()
