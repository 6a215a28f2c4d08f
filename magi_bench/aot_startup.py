"""Startup benchmark: time to first output of a small model in fresh processes, cold vs warm.

``python -m magi_bench.aot_startup [--repeats N] [--width W] [--device cpu|cuda] [--json]``

Each measurement is a separate fresh Python process; the parent records the wall time from
launching it to the child reporting its first output (interpreter start and ``import torch``
included), and the child reports the part after its imports. Scenarios, side by side in one
run:

- ``cold``: JIT, fresh Magi cache and fresh ``TORCHINDUCTOR_CACHE_DIR`` (nothing cached);
- ``aot_cold``: the same for AOT (it also writes the AOT artifact);
- ``jit_warm``: JIT, Magi cache and Inductor cache filled by ``cold`` (Dynamo traces again,
  the compiled pieces load from the Magi cache);
- ``aot_warm``: AOT, artifact written by ``aot_cold`` (no Dynamo tracing, no backend call).

Warm scenarios run ``--repeats`` times; the median is reported. Ratios printed: cold/jit_warm,
cold/aot_warm and jit_warm/aot_warm.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

CHILD_FLAG = "--child"


class SmallModel(torch.nn.Module):
    """A pre-norm MLP block; module level, since AOT cannot save guards on a local class."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(width)
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


def _child(width: int, device: str) -> None:
    started = time.perf_counter()
    from magi_compiler import compilation_counter, magi_compile

    magi_compile(SmallModel, model_tag="startup_bench")
    torch.manual_seed(0)
    model = SmallModel(width).to(device)
    x = torch.randn(8, width, device=device)
    imported = time.perf_counter()
    with torch.no_grad():
        output = model(x)
    if device == "cuda":
        torch.cuda.synchronize()
    first = time.perf_counter()
    report = {
        "import_s": imported - started,
        "first_call_s": first - imported,
        "num_graphs_seen": compilation_counter.num_graphs_seen,
        "num_inductor_compiles": compilation_counter.num_inductor_compiles,
        "checksum": float(output.sum()),
    }
    print(json.dumps(report), flush=True)


def _run_child(env: dict[str, str], width: int, device: str) -> dict[str, float]:
    launched = time.perf_counter()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "magi_bench.aot_startup",
            CHILD_FLAG,
            "--width",
            str(width),
            "--device",
            device,
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - launched
    if result.returncode != 0:
        raise RuntimeError(f"benchmark child failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    report["wall_s"] = wall
    return report


def _scenario_env(base: dict[str, str], magi_cache: Path, inductor_cache: Path, aot: bool) -> dict[str, str]:
    env = dict(base)
    env.update(
        MAGI_COMPILE_CACHE_ROOT_DIR=str(magi_cache),
        TORCHINDUCTOR_CACHE_DIR=str(inductor_cache),
        MAGI_COMPILE_AOT="1" if aot else "0",
    )
    return env


def run(repeats: int, width: int, device: str) -> dict[str, dict[str, float]]:
    repo_root = Path(__file__).resolve().parents[1]
    base = dict(os.environ)
    base["PYTHONPATH"] = os.pathsep.join(filter(None, [str(repo_root), base.get("PYTHONPATH", "")]))
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="magi-startup-bench-") as tmp:
        root = Path(tmp)
        jit_env = _scenario_env(base, root / "jit_magi", root / "jit_inductor", aot=False)
        aot_env = _scenario_env(base, root / "aot_magi", root / "aot_inductor", aot=True)
        runs = {
            "cold": [_run_child(jit_env, width, device)],
            "aot_cold": [_run_child(aot_env, width, device)],
            "jit_warm": [],
            "aot_warm": [],
        }
        for _ in range(repeats):
            runs["jit_warm"].append(_run_child(jit_env, width, device))
            runs["aot_warm"].append(_run_child(aot_env, width, device))
        for name, reports in runs.items():
            results[name] = {
                key: statistics.median(r[key] for r in reports)
                for key in ("wall_s", "import_s", "first_call_s", "num_graphs_seen", "num_inductor_compiles")
            }
            checksums = {round(r["checksum"], 4) for r in reports}
            assert len(checksums) == 1, f"{name}: outputs differ between runs: {checksums}"
            results[name]["checksum"] = checksums.pop()
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each warm scenario (median reported)")
    parser.add_argument("--width", type=int, default=64, help="hidden width of the model")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="device of the model")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    if args.child:
        _child(args.width, args.device)
        return
    if args.repeats < 1:
        raise ValueError("--repeats must be at least 1")
    results = run(args.repeats, args.width, args.device)
    ratios = {
        "cold/jit_warm": results["cold"]["wall_s"] / results["jit_warm"]["wall_s"],
        "cold/aot_warm": results["cold"]["wall_s"] / results["aot_warm"]["wall_s"],
        "jit_warm/aot_warm": results["jit_warm"]["wall_s"] / results["aot_warm"]["wall_s"],
    }
    if args.json:
        print(
            json.dumps(
                {"torch": torch.__version__, "device": args.device, "results": results, "ratios": ratios}, indent=1
            )
        )
        return
    print(f"torch {torch.__version__}, {args.device}; time to first output, fresh process each (median of warm runs)")
    print(f"{'scenario':<10} {'wall s':>8} {'after import s':>15} {'graphs traced':>14} {'inductor compiles':>18}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['wall_s']:>8.2f} {r['first_call_s']:>15.2f} "
            f"{r['num_graphs_seen']:>14.0f} {r['num_inductor_compiles']:>18.0f}"
        )
    for name, value in ratios.items():
        print(f"{name:<18} {value:6.2f}x")


if __name__ == "__main__":
    main()
