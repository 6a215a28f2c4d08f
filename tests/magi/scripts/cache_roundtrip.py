"""Compiles a tiny model (split at a custom op, a Python float that makes Dynamo restart)
and a tiny function; saves their outputs with torch.save to argv[1] and prints the
compilation counters as JSON on the last stdout line. With MAGI_COMPILE_ASSERT_CACHE_HIT=1
a cache miss is reported as {"error": ...} instead."""

import dataclasses
import json
import sys

import torch

from magi_compiler import compilation_counter, magi_compile


@torch.library.custom_op("magi_test::mix", mutates_args=())
def mix(x: torch.Tensor) -> torch.Tensor:
    return x.flip(-1) * 0.5 + x


@mix.register_fake
def _(x):
    return torch.empty_like(x)


@magi_compile(model_tag="tiny", config_patch={"splitting_ops": ["magi_test::mix"]})
class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(16, 16)
        self.b = torch.nn.Linear(16, 16)

    def forward(self, x, limit: float):
        return torch.clamp(self.b(torch.ops.magi_test.mix(torch.relu(self.a(x)))), max=limit)


@magi_compile(model_tag="fn")
def gelu_twice(x):
    return torch.nn.functional.gelu(x) * 2


def main():
    torch.manual_seed(0)
    model = Tiny()
    x, y = torch.randn(8, 16), torch.randn(5, 16)
    try:
        with torch.no_grad():
            outputs = [model(x, 0.5), model(x, 0.25), model(y, 0.25), gelu_twice(x), gelu_twice(y)]
    except RuntimeError as err:
        if isinstance(err, torch.OutOfMemoryError):
            raise
        print(json.dumps({"error": str(err)}))
        return
    torch.save(outputs, sys.argv[1])
    print(json.dumps(dataclasses.asdict(compilation_counter)))


if __name__ == "__main__":
    main()
