"""The contenders: eager, ``torch.compile`` (default and ``reduce-overhead``) and
``@magi_compile`` through its three entry points and with each CUDA-graph mode.

All are built from one seeded reference model (identical weights) and see the same input,
whose dim 0 (batch) is the dynamic dim everywhere: ``magi_compile`` gets
``dynamic_arg_dims={"x": 0}`` and the harness marks the input's dim 0 dynamic for
``torch.compile``. Both compilers run ``fullgraph=True`` under the process's Inductor
config, so they share the same Inductor options. The Magi contenders split the graph at the
model's ``splitting_ops`` (attention in ``AttentionModel``), except ``magi_full_cudagraph``,
which captures the whole model as one graph and so compiles those ops into it
(``disable_graph_split``). Each compiled contender owns its
entry code object (see ``models``).

A contender that cannot run here is built with a ``skipped`` reason and no ``call`` (it is
reported, never dropped): ``torch_compile_reduce_overhead`` and the Magi CUDA-graph
contenders need CUDA; the Magi CUDA-graph contenders also need ``CompileConfig.cudagraph_mode``.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import torch
from torch import nn

from magi_bench.models import ModelSpec, isolated_function, isolated_subclass
from magi_compiler import compilation_counter, magi_compile
from magi_compiler.config import CompileConfig

CONTENDER_NAMES = (
    "eager",
    "torch_compile",
    "torch_compile_reduce_overhead",
    "magi_class",
    "magi_function",
    "magi_method",
    "magi_piecewise_cudagraph",
    "magi_full_cudagraph",
)
MAGI_CONTENDERS = ("magi_class", "magi_function", "magi_method", "magi_piecewise_cudagraph", "magi_full_cudagraph")
CUDAGRAPH_MODES = {"magi_piecewise_cudagraph": "PIECEWISE", "magi_full_cudagraph": "FULL"}

ENTRY_DESCRIPTIONS = {
    "eager": "the model called eagerly",
    "torch_compile": "torch.compile(model, fullgraph=True)",
    "torch_compile_reduce_overhead": 'torch.compile(model, fullgraph=True, mode="reduce-overhead")',
    "magi_class": "@magi_compile on the nn.Module subclass",
    "magi_function": "@magi_compile on a plain function (model, x)",
    "magi_method": "magi_compile(instance.forward)",
    "magi_piecewise_cudagraph": '@magi_compile on the class, config_patch={"cudagraph_mode": "PIECEWISE"}',
    "magi_full_cudagraph": '@magi_compile on the class, config_patch={"cudagraph_mode": "FULL"} '
    '(and "disable_graph_split": True where the model has splitting ops)',
}


def skip_reason(name: str, device: torch.device) -> str | None:
    """Why contender ``name`` cannot run on ``device`` with this ``magi_compiler``; None if it can."""
    if name == "torch_compile_reduce_overhead" and device.type != "cuda":
        return "needs CUDA (reduce-overhead records CUDA graphs)"
    if name in CUDAGRAPH_MODES:
        if device.type != "cuda":
            return "needs CUDA (Magi CUDA graphs)"
        if "cudagraph_mode" not in {field.name for field in dataclasses.fields(CompileConfig)}:
            return "magi_compiler.config.CompileConfig has no cudagraph_mode field in this version"
    return None


def _zero() -> int:
    return 0


@dataclasses.dataclass
class Contender:
    """``call(x)`` runs the model; ``graph_count()`` reads the counter of graphs this kind
    compiles; ``swap_count()`` the counter of calls that ran Magi's swapped-in bytecode.
    A skipped contender has a ``skipped`` reason and no ``call``."""

    name: str
    call: Callable[[torch.Tensor], torch.Tensor] | None
    graph_count: Callable[[], int]
    swap_count: Callable[[], int] = _zero
    skipped: str | None = None

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
    capture_sizes: tuple[int, ...] | None = None,
) -> list[Contender]:
    """The named contenders, in the given order; Magi caches go under ``cache_root``; Magi's CUDA
    graph contenders capture ``capture_sizes`` (default: Magi's own list)."""
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
        patch: dict = {"cache_root_dir": cache_root, "splitting_ops": list(spec.splitting_ops)}
        if name in CUDAGRAPH_MODES:
            patch["cudagraph_mode"] = CUDAGRAPH_MODES[name]
            if capture_sizes is not None:
                patch["cudagraph_capture_sizes"] = list(capture_sizes)
        if name == "magi_full_cudagraph" and spec.splitting_ops:
            patch["disable_graph_split"] = True  # one graph around the whole model, the splitting ops inside
        return {"dynamic_arg_dims": {"x": 0}, "model_tag": f"bench_{spec.name}_{name}", "config_patch": patch}

    built = []
    for name in names:
        reason = skip_reason(name, device)
        if reason is not None:
            built.append(Contender(name, None, _zero, skipped=reason))
        elif name == "eager":
            built.append(Contender(name, reference, _zero))
        elif name == "torch_compile":
            compiled = torch.compile(copy_of(isolated_subclass(spec.cls, name)), fullgraph=True)
            built.append(Contender(name, compiled, _dynamo_graphs))
        elif name == "torch_compile_reduce_overhead":
            model = copy_of(isolated_subclass(spec.cls, name))
            compiled = torch.compile(model, fullgraph=True, mode="reduce-overhead")
            built.append(Contender(name, compiled, _dynamo_graphs))
        elif name in ("magi_class", *CUDAGRAPH_MODES):
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
