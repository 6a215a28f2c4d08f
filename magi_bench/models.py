"""The benchmarked models and the dims presets of the ``cpu`` and ``gpu`` profiles.

``AttentionModel`` is a pre-norm transformer block stack whose attention is the registered
custom op ``magi_bench::attention`` (scaled dot-product attention of head-split tensors), the
op the Magi contenders split the graph at (``ModelSpec.splitting_ops``), as attention is in
the models Magi targets; ``torch.compile`` sees the same op as an opaque call. The op writes
its result into an output tensor the layer allocates before it (``mutates_args=("out",)``, as
vLLM's attention does), so under ``PIECEWISE`` the piece after it reads that tensor where the
piece before it allocated it, without a copy (docs/cudagraphs.md, "Stable addresses").

``SimpleModel`` is big enough at the ``gpu`` dims (hidden 1024, sequence 512) that GPU
compute, not launch jitter, dominates a call; ``TinyModel`` (one 64x64 relu) is launch-bound,
so its per-call time is the dispatch overhead of whatever wraps it.

Every contender gets its own copy of the entry's code object (:func:`isolated_function`,
:func:`isolated_subclass`): Dynamo keeps compiled entries and guards per code object, so
sharing one ``forward`` code between contenders would make one contender's call evaluate
(and fail) another contender's guards first.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import Any

import torch
from torch import nn


@dataclasses.dataclass(frozen=True)
class ModelDims:
    """Input is ``(batch, seq, hidden)``; ``batch`` is the dynamic dim and must be >= 2."""

    hidden: int
    seq: int
    layers: int
    batch: int

    heads: int = 4

    def __post_init__(self) -> None:
        for name in ("hidden", "seq", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.batch < 2:
            raise ValueError(
                f"batch must be >= 2, got {self.batch}: it is the dynamic dim, and Dynamo specializes sizes 0 and 1"
            )
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")


@dataclasses.dataclass(frozen=True)
class Profile:
    """A preset of dims and run lengths; command-line flags override single values."""

    name: str
    dims: ModelDims
    iterations: int
    warmup: int
    dispatch_samples: int
    dispatch_calls: int
    dynamic_passes: int


PROFILES: dict[str, Profile] = {
    "gpu": Profile(
        "gpu",
        ModelDims(hidden=1024, seq=512, layers=4, batch=8, heads=16),
        iterations=200,
        warmup=20,
        dispatch_samples=100,
        dispatch_calls=200,
        dynamic_passes=5,
    ),
    "cpu": Profile(
        "cpu",
        ModelDims(hidden=128, seq=32, layers=2, batch=4),
        iterations=200,
        warmup=5,
        dispatch_samples=30,
        dispatch_calls=100,
        dynamic_passes=3,
    ),
}

TINY_DIMS = ModelDims(hidden=64, seq=1, layers=1, batch=64)


class SimpleLayer(nn.Module):
    """Linear (4x expansion) + GELU + Linear, residual, LayerNorm."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(nn.functional.gelu(self.up(x))))


class SimpleModel(nn.Module):
    """``layers`` stacked :class:`SimpleLayer` blocks over ``(batch, seq, hidden)`` inputs."""

    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.dims = dims
        self.layers = nn.ModuleList(SimpleLayer(dims.hidden) for _ in range(dims.layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def example_input(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(self.dims.batch, self.dims.seq, self.dims.hidden, device=device, dtype=dtype)


def simple_model_function(model: SimpleModel, x: torch.Tensor) -> torch.Tensor:
    """The function entry point: the model's computation as a plain function."""
    for layer in model.layers:
        x = layer(x)
    return x


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    """Scaled dot-product attention of ``(batch, heads, seq, head_dim)`` inputs, written into
    ``out`` (their shape). The op only calls the kernel: the layer splits heads and merges them
    back around it, in the compiled code (under ``PIECEWISE`` this op runs eagerly between the
    graphs, and every tensor op it makes costs a dispatch on the CPU)."""
    out.copy_(nn.functional.scaled_dot_product_attention(q, k, v))


# Registered as a kernel of the CPU and CUDA dispatch keys (as vLLM registers its ops), not with
# torch.library.custom_op, whose Python dispatch layers cost more than the op's own work at small
# shapes (86 us against 37 us per call on a 2-core CPU, batch 2, seq 4, hidden 64); it has no
# autograd kernel: the bench runs it under torch.no_grad().
_LIBRARY = torch.library.Library("magi_bench", "FRAGMENT")
_LIBRARY.define("attention(Tensor q, Tensor k, Tensor v, Tensor(a!) out) -> ()")
for _dispatch_key in ("CPU", "CUDA"):
    _LIBRARY.impl("attention", attention, _dispatch_key)


@torch.library.register_fake("magi_bench::attention", lib=_LIBRARY)
def _(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, out: torch.Tensor) -> None:
    return None


ATTENTION_OP = "magi_bench::attention"


class AttentionLayer(nn.Module):
    """Pre-norm block: LayerNorm, q/k/v projections, :func:`attention`, output projection,
    residual; then LayerNorm, Linear (4x) + GELU + Linear, residual."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(hidden)
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm2 = nn.LayerNorm(hidden)
        self.up = nn.Linear(hidden, 4 * hidden)
        self.down = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        h = self.norm1(x)

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)

        q = split(self.q(h))
        attended = torch.empty_like(q)
        torch.ops.magi_bench.attention(q, split(self.k(h)), split(self.v(h)), attended)
        x = x + self.out(attended.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.down(nn.functional.gelu(self.up(self.norm2(x))))


class AttentionModel(nn.Module):
    """``layers`` stacked :class:`AttentionLayer` blocks over ``(batch, seq, hidden)`` inputs."""

    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.dims = dims
        self.layers = nn.ModuleList(AttentionLayer(dims.hidden, dims.heads) for _ in range(dims.layers))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x

    def example_input(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(self.dims.batch, self.dims.seq, self.dims.hidden, device=device, dtype=dtype)


def attention_model_function(model: AttentionModel, x: torch.Tensor) -> torch.Tensor:
    """The function entry point of :class:`AttentionModel`."""
    for layer in model.layers:
        x = layer(x)
    return x


class TinyModel(nn.Module):
    """One relu on a ``(batch, hidden)`` input: a launch-bound graph for dispatch overhead."""

    def __init__(self, dims: ModelDims) -> None:
        super().__init__()
        self.dims = dims

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)

    def example_input(self, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
        return torch.randn(self.dims.batch, self.dims.hidden, device=device, dtype=dtype)


def tiny_model_function(model: TinyModel, x: torch.Tensor) -> torch.Tensor:
    """The function entry point of :class:`TinyModel`."""
    return torch.relu(x)


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """A model class, its function entry point, its dims and the ops Magi splits it at."""

    name: str
    cls: type[nn.Module]
    function: Callable[..., torch.Tensor]
    dims: ModelDims
    splitting_ops: tuple[str, ...] = ()

    def build(self, cls: type[nn.Module] | None = None) -> nn.Module:
        return (cls or self.cls)(self.dims)


def simple_spec(dims: ModelDims) -> ModelSpec:
    return ModelSpec("SimpleModel", SimpleModel, simple_model_function, dims)


def attention_spec(dims: ModelDims) -> ModelSpec:
    return ModelSpec("AttentionModel", AttentionModel, attention_model_function, dims, (ATTENTION_OP,))


def tiny_spec() -> ModelSpec:
    return ModelSpec("TinyModel", TinyModel, tiny_model_function, TINY_DIMS)


def isolated_function(fn: Callable[..., Any], name: str) -> types.FunctionType:
    """A copy of ``fn`` with its own code object (same file and lines, so the same traced source)."""
    assert isinstance(fn, types.FunctionType), f"expected a plain function, got {type(fn).__name__}"
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, name, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    copy.__qualname__ = f"{fn.__qualname__}[{name}]"
    copy.__module__ = fn.__module__
    copy.__doc__ = fn.__doc__
    return copy


def isolated_subclass(cls: type[nn.Module], name: str) -> type[nn.Module]:
    """A subclass of ``cls`` whose ``forward`` has its own code object; decorating it leaves ``cls`` alone."""
    forward = isolated_function(cls.forward, "forward")
    return type(f"{cls.__name__}_{name}", (cls,), {"forward": forward, "__module__": cls.__module__})
