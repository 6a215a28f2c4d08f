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

``--layers`` adds a per-layer table: each layer of the Magi call path called on its own, from the
entry down to Inductor's generated ``call()`` (the Magi entry of the tiny model, and one compiled
and one splitting-op piece of the split model), the minimum over the rounds of the per-call time.
A layer's own cost is its figure less the next one's. It reaches into private torch objects (the
artifact's ``_compiled_fn``, AOTAutograd's and Inductor's wrappers); a layer it cannot find in
this torch version is printed as ``n/a``.

``--baseline DIR`` adds, for every Magi contender, its twin built by another checkout's
``magi_compiler`` (``DIR/magi_compiler``, e.g. ``git archive <rev> magi_compiler | tar -x -C DIR``),
timed in the same rounds of the same process: a copy of that package imported as
``magi_baseline`` (its imports, and the namespace of the custom op it registers, renamed). Printed
for each pair: the per-round ratio, median and 10th-90th percentile, which separates a change of a
few percent from the machine's drift better than two runs can.

Usage: ``python benchmarks/dispatch_overhead.py [--device cpu|cuda] [--rounds 30] [--calls 200]
[--pieces 8] [--threads 1] [--cache-dir DIR] [--layers] [--baseline DIR]`` (without ``--cache-dir``
the Magi cache is a fresh temporary directory: every piece is compiled in this process; run twice
with one directory to time cache-loaded pieces).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch

from magi_bench.stats import paired_ratios

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


BASELINE_SUFFIX = "_baseline"


def magi(
    model: torch.nn.Module, package: types.ModuleType | None = None, **patch: object
) -> Callable[[torch.Tensor], torch.Tensor]:
    """``model``'s forward compiled by ``package`` (default: this checkout's ``magi_compiler``); a
    baseline package's entries get their own model tag, so the two never share cache entries."""
    if package is None:
        import magi_compiler as package
    tag = "baseline" if package.__name__ != "magi_compiler" else None
    instance = private_copy(model)
    return package.magi_compile(
        instance, method_name="forward", dynamic_arg_dims={"x": 0}, model_tag=tag, config_patch=dict(patch)
    )


def load_baseline(directory: str, scratch: Path) -> types.ModuleType:
    """``directory/magi_compiler`` importable beside this checkout's as ``magi_baseline``: a copy under
    ``scratch`` whose imports and custom-op namespace are renamed (see the module doc)."""
    source = Path(directory) / "magi_compiler"
    if not (source / "__init__.py").is_file():
        raise ValueError(f"--baseline {directory}: no magi_compiler package there ({source}/__init__.py)")
    target = scratch / "baseline" / "magi_baseline"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    for path in target.rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        path.write_text(text.replace("magi_compiler", "magi_baseline").replace('"magi::', '"magi_baseline::'))
    sys.path.insert(0, str(target.parent))
    return importlib.import_module("magi_baseline")


def contenders(
    model_name: str, pieces: int, batch: int, cuda: bool, baseline: types.ModuleType | None = None
) -> dict[str, Callable[..., torch.Tensor]]:
    build: Callable[[], torch.nn.Module] = Tiny if model_name == "tiny" else (lambda: SplitChain(pieces))
    split_patch = {"splitting_ops": [SPLIT_OP]}
    runs: dict[str, Callable[..., torch.Tensor]] = {
        "eager": build(),
        "torch_compile": torch.compile(private_copy(build()), fullgraph=True),
    }
    graphs = {"cudagraph_capture_sizes": [batch]}
    for package, suffix in ((None, ""), (baseline, BASELINE_SUFFIX)):
        if suffix and package is None:
            continue
        if model_name == "tiny":
            runs["magi" + suffix] = magi(build(), package)
            if cuda:
                runs["magi_full_cudagraph" + suffix] = magi(build(), package, cudagraph_mode="FULL", **graphs)
        else:
            runs["magi_split" + suffix] = magi(build(), package, **split_patch)
            runs["magi_unsplit" + suffix] = magi(build(), package, **split_patch, disable_graph_split=True)
            if cuda:
                runs["magi_piecewise_cudagraph" + suffix] = magi(
                    build(), package, **split_patch, cudagraph_mode="PIECEWISE", **graphs
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
    for name, values in samples.items():
        twin = samples.get(name + BASELINE_SUFFIX)
        if twin is not None:
            median, low, high = paired_ratios(values, twin)
            print(
                f"per round, {name} over {name}{BASELINE_SUFFIX}: {median:.3f}x (10th-90th percentile {low:.3f}-{high:.3f})"
            )


def _closure_value(fn: object, name: str) -> object:
    code = getattr(fn, "__code__", None)
    closure = getattr(fn, "__closure__", None)
    if code is None or closure is None or name not in code.co_freevars:
        return None
    return closure[code.co_freevars.index(name)].cell_contents


def _boxed_layers(artifact: object) -> list[tuple[str, Callable[[list], object]]]:
    """The layers below an Inductor artifact that take a list of arguments: AOTAutograd's runtime
    wrapper, Inductor's compiled graph and its generated ``call()`` (those found)."""
    from torch._inductor.output_code import CompiledFxGraph

    layers: list[tuple[str, Callable[[list], object]]] = []
    fn = getattr(artifact, "_compiled_fn", None)
    for _ in range(10):
        if fn is None:
            break
        if isinstance(fn, CompiledFxGraph):
            layers += [("Inductor CompiledFxGraph.__call__", fn), ("Inductor generated call()", fn.current_callable)]
            break
        if getattr(fn, "_torchdynamo_disable", False) and getattr(fn, "_torchdynamo_wrapper_id", None) == id(fn):
            fn = fn._torchdynamo_orig_callable
        elif getattr(fn, "__name__", "") == "runtime_wrapper":
            layers.append(("AOTAutograd runtime wrapper", fn))
            inner = _closure_value(fn, "_inner_compiled_fn")  # torch 2.13; 2.11 names it compiled_fn
            fn = inner if inner is not None else _closure_value(fn, "compiled_fn")
        else:
            inner = _closure_value(fn, "compiled_fn")
            fn = inner if inner is not None else getattr(fn, "compiled_fn", None)
    return layers


def _recorded_args(owner: dict, name: str, target: Callable[..., object], run: Callable[[], object]) -> tuple:
    """The arguments ``target``, reached as ``owner[name]``, is called with while ``run()`` runs
    (``owner`` is restored afterwards)."""
    had, original = name in owner, owner.get(name)
    seen: list[tuple] = []

    def recorder(*args: object) -> object:
        seen.append(args)
        return target(*args)

    owner[name] = recorder
    try:
        run()
    finally:
        if had:
            owner[name] = original
        else:
            del owner[name]
    assert seen, f"{name} was not called"
    return seen[0]


def layer_table(model_name: str, pieces: int, x: torch.Tensor, rounds: int, calls: int) -> None:
    """Each layer of one Magi entry's call path timed on its own (see the module doc)."""
    from magi_compiler import get_entry_state, swapped_code
    from magi_compiler.swapped_code import call_without_dynamo

    entry = magi(Tiny()) if model_name == "tiny" else magi(SplitChain(pieces), splitting_ops=[SPLIT_OP])
    entry(x)
    entry(x)
    state = get_entry_state(entry)
    (swapped,) = state._swapped.values()
    (direct_name,) = [n for n in swapped.__code__.co_names if n.startswith(swapped_code.DIRECT_PREFIX)]
    fn_globals = swapped.__globals__
    backend_output = swapped_code._disabled_callable(fn_globals[direct_name[len(swapped_code.DIRECT_PREFIX) :]])
    full_args = (state.bound_self, x)
    graph_args = _recorded_args(
        fn_globals, direct_name, fn_globals[direct_name], lambda: call_without_dynamo(swapped, *full_args)
    )
    lean = getattr(swapped_code, "lean_callable", None)
    eager = Tiny() if model_name == "tiny" else SplitChain(pieces)
    rows: list[tuple[str, Callable[[], object] | None]] = [
        ("eager: the model called", lambda: eager(x)),
        ("entry: Module.__call__ + decorator + EntryState + swapped code + graph", lambda: entry(x)),
        ("EntryState.__call__", lambda: state(x)),
        ("EntryState._dispatch_signature", lambda: state._dispatch_signature((x,), {})),
        ("call_without_dynamo(swapped code)", lambda: call_without_dynamo(swapped, *full_args)),
        ("graph as Dynamo's guarded code calls it (backend output)", lambda: backend_output(*graph_args)),
        ("graph as the swapped code calls it (relinked global)", lambda: fn_globals[direct_name](*graph_args)),
    ]
    if model_name == "tiny":
        artifact = backend_output
        piece_args = graph_args
    else:
        split_gm = backend_output
        compiled = split_gm.__dict__["submod_0"]
        piece_args = _recorded_args(split_gm.__dict__, "submod_0", compiled, lambda: split_gm(*graph_args))
        eager_piece = split_gm._modules["submod_1"]
        eager_args = _recorded_args(split_gm.__dict__, "submod_1", eager_piece, lambda: split_gm(*graph_args))
        (op_node,) = [node for node in eager_piece.graph.nodes if node.op == "call_function"]
        lean_piece = lean(compiled) if lean is not None else None
        rows += [
            ("compiled piece 0 as stored in the split module", lambda: compiled(*piece_args)),
            ("compiled piece 0 made lean", (lambda: lean_piece(*piece_args)) if lean_piece else None),
            ("splitting-op piece 1: module call", lambda: eager_piece(*eager_args)),
            ("splitting-op piece 1: forward", lambda: eager_piece.forward(*eager_args)),
            ("splitting-op piece 1: the op itself", lambda: op_node.target(*eager_args[:1])),
        ]
        # a cache-loaded piece with one output is compiler_interface's single_output closure
        loaded = _closure_value(compiled, "loaded")
        artifact = compiled if loaded is None else loaded
    found = dict(_boxed_layers(artifact))
    for name in ("AOTAutograd runtime wrapper", "Inductor CompiledFxGraph.__call__", "Inductor generated call()"):
        layer = found.get(name)
        rows.append((name, (lambda f=layer: f(list(piece_args))) if layer is not None else None))
    print(f"\nlayers of the {model_name} entry: minimum over {rounds} rounds x {calls} calls (us per call)")
    gc.disable()
    try:
        for name, fn in rows:
            if fn is None:
                print(f"{name:75} {'n/a':>8}")
                continue
            best = min(_per_call_us(fn, calls) for _ in range(rounds))
            print(f"{name:75} {best:8.2f}")
    finally:
        gc.enable()


def _per_call_us(fn: Callable[[], object], calls: int) -> float:
    begin = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - begin) / calls / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20, help="untimed calls per contender after the first")
    parser.add_argument("--pieces", type=int, default=8, help="compiled pieces of the split model (>= 2)")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--cache-dir", default=None, help="Magi cache root (default: a fresh temporary directory)")
    parser.add_argument(
        "--baseline",
        metavar="DIR",
        default=None,
        help="also time every Magi contender as built by DIR/magi_compiler (another checkout), in the same rounds",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="also time each layer of the Magi call path on its own (CPU-side time per call; no CUDA synchronisation)",
    )
    args = parser.parse_args()
    if args.pieces < 2 or args.rounds < 1 or args.calls < 1:
        parser.error("--pieces must be >= 2, --rounds and --calls >= 1")
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    scratch = tempfile.TemporaryDirectory(prefix="magi-dispatch-")
    try:
        baseline = load_baseline(args.baseline, Path(scratch.name)) if args.baseline is not None else None
    except ValueError as error:
        parser.error(str(error))
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
            runs = contenders(model_name, args.pieces, batch, cuda, baseline)
            expected = runs["eager"](x)
            for name, fn in runs.items():
                out = fn(x)
                if not torch.allclose(out, expected, rtol=1e-5, atol=1e-5):
                    print(f"{model_name}/{name}: output differs from eager's", file=sys.stderr)
                    status = 1
                for _ in range(args.warmup):
                    fn(x)
            samples = time_rounds(runs, x, args.rounds, args.calls, cuda)
            title = f"{model_name}: {args.rounds} interleaved rounds x {args.calls} calls" + (
                f", {args.pieces} compiled pieces, {args.pieces - 1} splitting ops" if model_name == "split" else ""
            )
            report(title, samples, args.pieces if model_name == "split" else None)
            if args.layers:
                layer_table(model_name, args.pieces, x, args.rounds, args.calls)
    scratch.cleanup()
    return status


if __name__ == "__main__":
    sys.exit(main())
