"""Child process of the startup measurement: build one contender, make one call, print
``FIRST_OUTPUT <json>`` on stdout and exit.

The parent (``startup``) times the process from its start to that line and points
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR`` and the Magi cache at its own
directories. The JSON holds the child's own breakdown (``build_s``: model and input;
``first_call_s``: trace, compile or cache load, and the run; the rest of the parent's time
is interpreter start and imports) and its compile/cache counters.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

MARKER = "FIRST_OUTPUT "


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m magi_bench.first_output")
    parser.add_argument("--contender", required=True)
    parser.add_argument("--device", required=True)
    parser.add_argument("--dtype", required=True)
    parser.add_argument("--hidden", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--layers", type=int, required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--heads", type=int, required=True)
    parser.add_argument("--magi-cache-dir", required=True)
    parser.add_argument("--threads", type=int)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    from magi_bench.contenders import build_contenders
    from magi_bench.models import ModelDims, simple_spec
    from magi_compiler import compilation_counter

    device = torch.device(args.device)
    if device.type == "cuda" and device.index is not None:
        torch.cuda.set_device(device)
    dtype = getattr(torch, args.dtype)
    spec = simple_spec(
        ModelDims(hidden=args.hidden, seq=args.seq, layers=args.layers, batch=args.batch, heads=args.heads)
    )
    (contender,) = build_contenders(spec, device, dtype, args.magi_cache_dir, names=(args.contender,))
    torch.manual_seed(1)
    x = spec.build().example_input(device, dtype)
    torch._dynamo.mark_dynamic(x, 0)
    built = time.perf_counter()
    with torch.no_grad():
        out = contender.call(x)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    done = time.perf_counter()
    inductor = torch._dynamo.utils.counters["inductor"]
    report = {
        "build_s": built - started,
        "first_call_s": done - built,
        "checksum": out.float().norm().item(),
        "counters": {
            "magi_inductor_compiles": compilation_counter.num_inductor_compiles,
            "magi_cache_hits": compilation_counter.num_cache_hits,
            "magi_cache_misses": compilation_counter.num_cache_misses,
            "fxgraph_cache_hits": inductor["fxgraph_cache_hit"],
            "fxgraph_cache_misses": inductor["fxgraph_cache_miss"],
        },
    }
    sys.stdout.write(MARKER + json.dumps(report) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
