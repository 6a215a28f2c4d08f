"""``python -m magi_bench`` / ``magi-bench``: time SimpleModel and AttentionModel
through every ``@magi_compile`` entry point (and Magi's CUDA-graph modes) against eager,
``torch.compile`` and ``torch.compile(mode="reduce-overhead")``.

Prints the tables on stdout, progress on stderr; ``--json`` writes every sample,
``--plot`` a box plot. Exit status 1 when a contender's output differs from eager's.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from magi_bench import plot, report
from magi_bench.contenders import CONTENDER_NAMES, build_contenders
from magi_bench.harness import run_dynamic_batches, run_interleaved
from magi_bench.models import PROFILES, ModelDims, ModelSpec, attention_spec, simple_spec, tiny_spec
from magi_bench.progress import Progress
from magi_bench.startup import run_startup
from magi_bench.timers import Timer
from magi_compiler.config import CompileConfig
from magi_compiler.log import configure_cli

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
# mostly not capture sizes of a power-of-two or multiple-of-8 padding scheme; each pass runs them twice
DYNAMIC_BATCH_SIZES = (2, 3, 5, 8, 13, 21, 34, 55)
DYNAMIC_REPEATS = 2
# the dynamic section's compiling call: a batch size outside the sequence (a capture size of Magi's default list)
DYNAMIC_COMPILE_BATCH = 64


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="magi-bench",
        description="Time SimpleModel and AttentionModel through @magi_compile (class, function, instance method, "
        "CUDA-graph modes) against eager, torch.compile and torch.compile(mode=reduce-overhead), interleaved in "
        "one process; plus dispatch overhead, a dynamic-batch sequence and cold/warm start.",
    )
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when available)")
    parser.add_argument(
        "--dtype", choices=sorted(DTYPES), default=None, help="default: bfloat16 on cuda, float32 on cpu"
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        default=None,
        help="dims and run-length preset (default: gpu on cuda, cpu otherwise; cpu = reduced dims)",
    )
    parser.add_argument("--hidden", type=int, help="hidden size (overrides the profile)")
    parser.add_argument("--seq", type=int, help="sequence length (overrides the profile)")
    parser.add_argument("--layers", type=int, help="number of layers (overrides the profile)")
    parser.add_argument("--batch", type=int, help="batch size, the dynamic dim, >= 2 (overrides the profile)")
    parser.add_argument("--heads", type=int, help="attention heads of AttentionModel (overrides the profile)")
    parser.add_argument("--iterations", type=int, help="timed interleaved rounds (overrides the profile)")
    parser.add_argument("--warmup", type=int, help="untimed rounds after the first call (overrides the profile)")
    parser.add_argument("--dispatch-samples", type=int, help="dispatch-overhead samples (overrides the profile)")
    parser.add_argument("--dispatch-calls", type=int, help="calls per dispatch-overhead sample")
    parser.add_argument(
        "--dynamic-passes", type=int, help="passes over the batch-size sequence, >= 2 (overrides the profile)"
    )
    parser.add_argument(
        "--sections",
        default=",".join(report.SECTIONS),
        help=f"comma-separated subset of {','.join(report.SECTIONS)} (default: all)",
    )
    parser.add_argument("--json", dest="json_path", metavar="PATH", help="write every sample as JSON here")
    parser.add_argument("--plot", metavar="OUT.png", help="write a box plot per contender (needs matplotlib)")
    parser.add_argument(
        "--cache-dir",
        help="root of the Magi cache (<dir>/magi) and of the startup runs' caches "
        "(<dir>/startup, wiped before each cold run); default: a temporary directory, removed after",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch.set_num_threads for this process and the startup "
        "processes (default: torch's own); 1 keeps CPU figures stable on a shared machine",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return parser


def resolve_settings(args: argparse.Namespace, parser: argparse.ArgumentParser) -> dict[str, Any]:
    """Device, dtype, dims and run lengths from the flags and the profile; exits on bad input."""
    device = torch.device(args.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available in this torch build / machine")
    if device.type not in ("cuda", "cpu"):
        parser.error(f"--device must be cuda[:N] or cpu, got {args.device}")
    profile = PROFILES[args.profile or ("gpu" if device.type == "cuda" else "cpu")]
    sections = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = sorted(set(sections) - set(report.SECTIONS))
    if unknown or not sections:
        parser.error(f"--sections: unknown {unknown or 'empty list'}; choose from {','.join(report.SECTIONS)}")
    try:
        dims = ModelDims(
            hidden=args.hidden or profile.dims.hidden,
            seq=args.seq or profile.dims.seq,
            layers=args.layers or profile.dims.layers,
            batch=args.batch or profile.dims.batch,
            heads=args.heads or profile.dims.heads,
        )
    except ValueError as err:
        parser.error(str(err))
    runs = {
        "iterations": args.iterations if args.iterations is not None else profile.iterations,
        "warmup": args.warmup if args.warmup is not None else profile.warmup,
        "dispatch_samples": args.dispatch_samples if args.dispatch_samples is not None else profile.dispatch_samples,
        "dispatch_calls": args.dispatch_calls if args.dispatch_calls is not None else profile.dispatch_calls,
        "dynamic_passes": args.dynamic_passes if args.dynamic_passes is not None else profile.dynamic_passes,
    }
    minimum = {"warmup": 0, "dynamic_passes": 2}
    for name, value in runs.items():
        if value < minimum.get(name, 1):
            parser.error(f"--{name.replace('_', '-')} must be >= {minimum.get(name, 1)}, got {value}")
    if args.threads is not None and args.threads < 1:
        parser.error(f"--threads must be >= 1, got {args.threads}")
    return {
        "threads": args.threads,
        "device": device,
        "dtype": DTYPES[args.dtype or ("bfloat16" if device.type == "cuda" else "float32")],
        "profile": profile.name,
        "dims": dims,
        "sections": sections,
        **runs,
    }


def _timing(
    spec: ModelSpec,
    settings: dict[str, Any],
    cache_root: Path,
    progress: Progress,
    label: str,
    iterations: int,
    calls: int,
    unit: str,
) -> dict[str, Any]:
    device, dtype = settings["device"], settings["dtype"]
    contenders = build_contenders(spec, device, dtype, str(cache_root), CONTENDER_NAMES)
    torch.manual_seed(1)
    x = spec.build().example_input(device, dtype)
    runs = run_interleaved(
        contenders, x, Timer(device), iterations, settings["warmup"], progress, calls_per_sample=calls, label=label
    )
    return report.timing_section(spec.name, spec.dims, unit, runs, calls, iterations, settings["warmup"])


def _dynamic(settings: dict[str, Any], cache_root: Path, progress: Progress) -> dict[str, Any]:
    device, dtype = settings["device"], settings["dtype"]
    spec = attention_spec(settings["dims"])
    contenders = build_contenders(spec, device, dtype, str(cache_root), CONTENDER_NAMES)
    sizes = DYNAMIC_BATCH_SIZES * DYNAMIC_REPEATS
    dims = settings["dims"]
    torch.manual_seed(2)
    inputs = [torch.randn(b, dims.seq, dims.hidden, device=device, dtype=dtype) for b in sizes]
    first = torch.randn(DYNAMIC_COMPILE_BATCH, dims.seq, dims.hidden, device=device, dtype=dtype)
    runs = run_dynamic_batches(contenders, inputs, Timer(device), settings["dynamic_passes"], progress, first)
    return report.dynamic_section(spec.name, spec.dims, sizes, runs)


def run(settings: dict[str, Any], cache_dir: Path, progress: Progress, command: list[str]) -> dict[str, Any]:
    """Run the selected sections and return the (validated) JSON document."""
    device, dtype = settings["device"], settings["dtype"]
    sections: dict[str, dict[str, Any] | None] = {}
    if "latency" in settings["sections"]:
        sections["latency"] = _timing(
            simple_spec(settings["dims"]),
            settings,
            cache_dir / "magi",
            progress,
            "latency",
            settings["iterations"],
            1,
            "ms",
        )
    if "attention" in settings["sections"]:
        sections["attention"] = _timing(
            attention_spec(settings["dims"]),
            settings,
            cache_dir / "magi",
            progress,
            "attention",
            settings["iterations"],
            1,
            "ms",
        )
    if "dispatch" in settings["sections"]:
        sections["dispatch"] = _timing(
            tiny_spec(),
            settings,
            cache_dir / "magi",
            progress,
            "dispatch",
            settings["dispatch_samples"],
            settings["dispatch_calls"],
            "us",
        )
    if "dynamic" in settings["sections"]:
        sections["dynamic"] = _dynamic(settings, cache_dir / "magi", progress)
    if "startup" in settings["sections"]:
        sections["startup"] = run_startup(
            device, dtype, settings["dims"], cache_dir / "startup", progress, threads=settings["threads"]
        )
    doc = report.build_document(
        command,
        report.environment(device),
        {
            "profile": settings["profile"],
            "dtype": str(dtype).removeprefix("torch."),
            "dims": {k: getattr(settings["dims"], k) for k in ("hidden", "seq", "layers", "batch", "heads")},
            "iterations": settings["iterations"],
            "warmup": settings["warmup"],
            "dispatch_samples": settings["dispatch_samples"],
            "dispatch_calls": settings["dispatch_calls"],
            "dynamic_passes": settings["dynamic_passes"],
            "timer": Timer(device).name,
            "order": "round-robin, start rotating each round",
            "sections": list(settings["sections"]),
            "magi_bytecode_swap": CompileConfig.from_env().bytecode_swap,
            "threads": torch.get_num_threads(),
        },
        sections,
    )
    report.validate_document(doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    configure_cli()
    parser = build_parser()
    args = parser.parse_args(argv)
    settings = resolve_settings(args, parser)
    if settings["threads"] is not None:
        torch.set_num_threads(settings["threads"])
    if settings["device"].type == "cuda" and settings["device"].index is not None:
        torch.cuda.set_device(settings["device"])
    if args.plot:
        try:
            plot.require_matplotlib()
        except plot.PlotUnavailableError as err:
            parser.error(str(err))
    progress = Progress(enabled=not args.quiet)
    command = ["magi-bench", *(sys.argv[1:] if argv is None else argv)]
    if args.cache_dir:
        doc = run(settings, Path(args.cache_dir).resolve(), progress, command)
    else:
        with tempfile.TemporaryDirectory(prefix="magi-bench-") as tmp:
            doc = run(settings, Path(tmp), progress, command)
    report.print_document(doc)
    if args.json_path:
        report.write_json(doc, args.json_path)
        progress.stage(f"wrote {args.json_path}")
    if args.plot:
        plot.write_box_plot(doc, args.plot)
        progress.stage(f"wrote {args.plot}")
    mismatched = [
        f"{name}:{c['name']}"
        for name in (*report.TIMING_SECTIONS, "dynamic")
        if doc[name] is not None
        for c in doc[name]["contenders"]
        if not c["outputs_match"]
    ]
    if mismatched:
        sys.stderr.write(f"magi-bench: outputs differ from eager beyond tolerance: {', '.join(mismatched)}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
