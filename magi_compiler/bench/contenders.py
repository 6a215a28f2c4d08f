"""The contenders: eager, plain ``torch.compile`` and the three ``@magi_compile`` entry points.

All are built from one seeded reference model (identical weights) and see the same input,
whose dim 0 (batch) is the dynamic dim everywhere: ``magi_compile`` gets
``dynamic_arg_dims={"x": 0}`` and the harness marks the input's dim 0 dynamic for
``torch.compile``. Both compilers run ``fullgraph=True`` under the process's Inductor
config (no mode, no options), so they share the same Inductor options. Each compiled
contender owns its entry code object (see ``models``).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import nn

from magi_compiler import compilation_counter, magi_compile
from magi_compiler.bench.models import ModelSpec, isolated_function, isolated_subclass

CONTENDER_NAMES = ("eager", "torch_compile", "magi_class", "magi_function", "magi_method")
MAGI_CONTENDERS = ("magi_class", "magi_function", "magi_method")

ENTRY_DESCRIPTIONS = {
    "eager": "the model called eagerly",
    "torch_compile": "torch.compile(model, fullgraph=True)",
    "magi_class": "@magi_compile on the nn.Module subclass",
    "magi_function": "@magi_compile on a plain function (model, x)",
    "magi_method": "magi_compile(instance.forward)",
}


def _zero() -> int:
    return 0


@dataclasses.dataclass
class Contender:
    """``call(x)`` runs the model; ``graph_count()`` reads the counter of graphs this kind
    compiles; ``swap_count()`` the counter of calls that ran Magi's swapped-in bytecode."""

    name: str
    call: Callable[[torch.Tensor], torch.Tensor]
    graph_count: Callable[[], int]
    swap_count: Callable[[], int] = _zero

    @property
    def entry(self) -> str:
        return ENTRY_DESCRIPTIONS[self.name]


def _dynamo_graphs() -> int:
    return torch._dynamo.utils.counters["stats"]["unique_graphs"]


def _magi_graphs() -> int:
    return compilation_counter.num_backend_compilations


def _magi_swaps() -> int:
    return compilation_counter.num_swapped_calls


def build_contenders(
    spec: ModelSpec,
    device: torch.device,
    dtype: torch.dtype,
    cache_root: str,
    names: tuple[str, ...] = CONTENDER_NAMES,
) -> list[Contender]:
    """The named contenders, in the given order; Magi caches go under ``cache_root``."""
    unknown = sorted(set(names) - set(CONTENDER_NAMES))
    if unknown:
        raise ValueError(f"unknown contender(s) {unknown}; known: {list(CONTENDER_NAMES)}")
    torch.manual_seed(0)
    reference = spec.build().to(device=device, dtype=dtype).eval()
    weights = reference.state_dict()

    def copy_of(cls: type[nn.Module]) -> nn.Module:
        model = spec.build(cls).to(device=device, dtype=dtype).eval()
        model.load_state_dict(weights)
        return model

    def magi_options(name: str) -> dict:
        return {
            "dynamic_arg_dims": {"x": 0},
            "model_tag": f"bench_{spec.name}_{name}",
            "config_patch": {"cache_root_dir": cache_root},
        }

    built = []
    for name in names:
        if name == "eager":
            built.append(Contender(name, reference, _zero))
        elif name == "torch_compile":
            compiled = torch.compile(copy_of(isolated_subclass(spec.cls, name)), fullgraph=True)
            built.append(Contender(name, compiled, _dynamo_graphs))
        elif name == "magi_class":
            cls = magi_compile(isolated_subclass(spec.cls, name), **magi_options(name))
            built.append(Contender(name, copy_of(cls), _magi_graphs, _magi_swaps))
        elif name == "magi_function":
            fn = magi_compile(isolated_function(spec.function, name), **magi_options(name))
            built.append(Contender(name, functools.partial(fn, copy_of(spec.cls)), _magi_graphs, _magi_swaps))
        else:
            assert name == "magi_method"
            model = copy_of(isolated_subclass(spec.cls, name))
            magi_compile(model.forward, **magi_options(name))
            built.append(Contender(name, model, _magi_graphs, _magi_swaps))
    return built
