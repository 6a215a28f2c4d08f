"""Per-call dispatch overhead of a compiled entry: eager, ``torch.compile`` and ``@magi_compile``
side by side in one process, in interleaved rounds.

Two models, each built fresh per contender (every compiled contender gets its own copy of
``forward``'s code object, so no contender checks another's Dynamo cache entries):

- ``tiny``: one ``relu`` on a ``64 x 64`` input (the dispatch section of docs/benchmarks.md: the
  call path dominates, the kernel is trivial).
- ``split``: ``--pieces`` compiled pieces (each ``relu(x) + 1``) separated by ``--pieces - 1``
  calls of a registered custom op (``magi_dispatch_bench::ident``, a clone) that Magi splits at
  (``splitting_ops``). ``magi_unsplit`` compiles the same model with ``disable_graph_split``
  (one piece, the custom op called from the compiled code), so
  ``(magi_split - magi_unsplit) / (pieces - 1)`` is the cost of one more piece boundary:
  one more compiled piece's call path plus one eagerly run splitting-op piece.

Contenders: ``eager``, ``torch_compile`` (default mode, dim 0 marked dynamic), ``magi``
(``dynamic_arg_dims={"x": 0}``, cudagraph_mode NONE); for the split model also ``magi_split`` and
``magi_unsplit``; on CUDA also ``magi_full_cudagraph`` (tiny) and ``magi_piecewise_cudagraph``
(split), with one capture size, the input's batch. One sample times ``--calls`` back-to-back
calls (CUDA: synchronized before and after) divided by that count; a round takes one sample of
every contender, starting one contender further each round; Python's garbage collector is off
while timing. Printed: per-call median and min over the rounds, the ratio of medians to eager's,
and for the split model the cost per extra piece. Figures only: nothing here asserts a speed.

Usage: ``python benchmarks/dispatch_overhead.py [--device cpu|cuda] [--rounds 30] [--calls 200]
[--pieces 8] [--threads 1] [--cache-dir DIR]`` (without ``--cache-dir`` the Magi cache is a fresh
temporary directory: every piece is compiled in this process; run twice with one directory to
time cache-loaded pieces).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable

import torch

SPLIT_OP = "magi_dispatch_bench::ident"


@torch.library.custom_op(SPLIT_OP, mutates_args=())
def ident(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@ident.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


class Tiny(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class SplitChain(torch.nn.Module):
    def __init__(self, pieces: int) -> None:
        super().__init__()
        self.pieces = pieces

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.pieces - 1):
            x = torch.relu(x) + 1
            x = torch.ops.magi_dispatch_bench.ident(x)
        return torch.relu(x) + 1


def private_copy(model: torch.nn.Module) -> torch.nn.Module:
    """``model`` with a ``forward`` whose code object is its own (Dynamo keys its cache on it)."""
    forward = type(model).forward
    code = forward.__code__.replace()
    model.forward = types.MethodType(  # type: ignore[method-assign]
        types.FunctionType(code, forward.__globals__, forward.__name__, forward.__defaults__, forward.__closure__),
        model,
    )
    return model


def magi(model: torch.nn.Module, **patch: object) -> Callable[[torch.Tensor], torch.Tensor]:
    from magi_compiler import magi_compile

    instance = private_copy(model)
    return magi_compile(instance, method_name="forward", dynamic_arg_dims={"x": 0}, config_patch=dict(patch))


def contenders(model_name: str, pieces: int, batch: int, cuda: bool) -> dict[str, Callable[..., torch.Tensor]]:
    build: Callable[[], torch.nn.Module] = Tiny if model_name == "tiny" else (lambda: SplitChain(pieces))
    split_patch = {"splitting_ops": [SPLIT_OP]}
    runs: dict[str, Callable[..., torch.Tensor]] = {
        "eager": build(),
        "torch_compile": torch.compile(private_copy(build()), fullgraph=True),
    }
    if model_name == "tiny":
        runs["magi"] = magi(build())
        if cuda:
            runs["magi_full_cudagraph"] = magi(build(), cudagraph_mode="FULL", cudagraph_capture_sizes=[batch])
    else:
        runs["magi_split"] = magi(build(), **split_patch)
        runs["magi_unsplit"] = magi(build(), **split_patch, disable_graph_split=True)
        if cuda:
            runs["magi_piecewise_cudagraph"] = magi(
                build(), **split_patch, cudagraph_mode="PIECEWISE", cudagraph_capture_sizes=[batch]
            )
    return runs


def time_rounds(
    runs: dict[str, Callable[..., torch.Tensor]], x: torch.Tensor, rounds: int, calls: int, cuda: bool
) -> dict[str, list[float]]:
    """Per-call microseconds of every contender, one sample per round."""
    names = list(runs)
    samples: dict[str, list[float]] = {name: [] for name in names}
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    gc.collect()
    gc.disable()
    try:
        for round_index in range(rounds):
            start = round_index % len(names)
            for name in names[start:] + names[:start]:
                fn = runs[name]
                sync()
                begin = time.perf_counter_ns()
                for _ in range(calls):
                    fn(x)
                sync()
                samples[name].append((time.perf_counter_ns() - begin) / calls / 1000)
    finally:
        gc.enable()
    return samples


def report(title: str, samples: dict[str, list[float]], pieces: int | None) -> None:
    medians = {name: statistics.median(values) for name, values in samples.items()}
    eager = medians["eager"]
    print(f"\n{title}")
    print(f"{'contender':26} {'median us':>10} {'min us':>9} {'x eager':>8}")
    for name, values in samples.items():
        print(f"{name:26} {medians[name]:10.2f} {min(values):9.2f} {medians[name] / eager:7.2f}x")
    if pieces is not None and pieces > 1:
        extra = (medians["magi_split"] - medians["magi_unsplit"]) / (pieces - 1)
        print(
            f"per extra piece (compiled piece + eager splitting op), (magi_split - magi_unsplit) / {pieces - 1}: "
            f"{extra:.2f} us"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per contender after the first")
    parser.add_argument("--pieces", type=int, default=8, help="compiled pieces of the split model (>= 2)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--cache-dir", default=None, help="Magi cache root (default: a fresh temporary directory)")
    args = parser.parse_args()
    if args.pieces < 2 or args.rounds < 1 or args.calls < 1:
        parser.error("--pieces must be >= 2, --rounds and --calls >= 1")
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    scratch = tempfile.TemporaryDirectory(prefix="magi-dispatch-")
    os.environ["MAGI_COMPILE_CACHE_ROOT_DIR"] = args.cache_dir or os.path.join(scratch.name, "magi")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, {platform.machine()}, "
        f"{os.cpu_count()} CPUs, load average {load:.2f}, device {args.device}, threads {torch.get_num_threads()}"
    )
    print(f"command: {' '.join([os.path.basename(sys.executable), *sys.argv])}")
    batch = 64
    status = 0
    with torch.no_grad():
        for model_name in ("tiny", "split"):
            x = torch.randn(batch, 64, device=args.device)
            runs = contenders(model_name, args.pieces, batch, cuda)
            expected = runs["eager"](x)
            for name, fn in runs.items():
                out = fn(x)
                if not torch.allclose(out, expected, rtol=1e-5, atol=1e-5):
                    print(f"{model_name}/{name}: output differs from eager's", file=sys.stderr)
                    status = 1
                for _ in range(args.warmup):
                    fn(x)
            samples = time_rounds(runs, x, args.rounds, args.calls, cuda)
            title = (
                f"{model_name}: {args.rounds} interleaved rounds x {args.calls} calls"
                + (f", {args.pieces} compiled pieces, {args.pieces - 1} splitting ops" if model_name == "split" else "")
            )
            report(title, samples, args.pieces if model_name == "split" else None)
    scratch.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
