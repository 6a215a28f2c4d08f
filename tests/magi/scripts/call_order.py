"""Compiles a function and calls it under `torch.no_grad()` (inference) and with grad enabled
(training, with a backward): two graphs, numbered in call order. argv[2] picks the order
(`inference-first` or `training-first`); saves the outputs and eager's to argv[1] with torch.save
and prints the compilation counters as JSON on the last stdout line. The cache comes from the
MAGI_COMPILE_* environment."""

import sys

import torch
from aot_two_functions import project
from roundtrip import report

from magi_compiler import magi_compile


def main():
    torch.manual_seed(0)
    compiled = magi_compile(dynamic_arg_dims={"x": 0}, model_tag="order")(project)
    x = torch.randn(8, 4)
    w = torch.randn(4, 4, requires_grad=True)
    outputs, eager = {}, {}

    def inference():
        with torch.no_grad():
            outputs["inference"], eager["inference"] = compiled(x, w), project(x, w)

    def training():
        out = compiled(x, w)
        (grad,) = torch.autograd.grad(out.sum(), w)
        ref = project(x, w)
        (ref_grad,) = torch.autograd.grad(ref.sum(), w)
        outputs["training"], eager["training"] = (out.detach(), grad), (ref.detach(), ref_grad)

    steps = [inference, training] if sys.argv[2] == "inference-first" else [training, inference]
    for step in steps:
        step()
    report(outputs, eager)


if __name__ == "__main__":
    main()
