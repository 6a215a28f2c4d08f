"""The bench's JSON document (schema ``magi_compiler.bench``, version 3), its validation, and
the plain-text tables.

Document: ``schema``, ``schema_version``, ``created_utc``, ``command``, ``environment``,
``settings``, and five sections, each ``null`` when not run: ``latency`` (per-call time of
SimpleModel, ms), ``attention`` (per-call time of AttentionModel, split at its attention op
by the Magi contenders, ms), ``dispatch`` (per-call time of the tiny launch-bound graph, us),
``dynamic`` (time of passes over a sequence of batch sizes, s) and ``startup`` (time to first
output of fresh processes, cold vs warm cache, s). A timing section lists its contenders in
run order, each with every sample; a contender that could not run here has a ``skipped``
reason, no samples and null figures. Readers must check ``schema_version``; a change of
meaning of any field bumps it (2: ``skipped``, the summary's ``blocks`` and
``block_median_spread``, ``block_p25_spread``, ``relative_block_p25_spread``, the ``attention`` and ``dynamic`` sections, ``dims.heads``;
3: the dynamic section's ``compile_call_s``, the compiling call before the passes, which the first
pass no longer includes).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from typing import Any

import torch

from magi_bench import stats
from magi_bench.harness import ContenderRun, DynamicRun
from magi_bench.models import ModelDims

SCHEMA = "magi_compiler.bench"
SCHEMA_VERSION = 3
REFERENCE = "eager"
BASELINE = "torch_compile"
UNIT_SCALE = {"ms": 1.0, "us": 1e3}
SECTIONS = ("latency", "attention", "dispatch", "dynamic", "startup")
TIMING_SECTIONS = ("latency", "attention", "dispatch")

_CONTENDER_FIELDS = {
    "name": str,
    "entry": str,
    "samples": list,
    "summary": dict,
    "speedup_vs_eager": float,
    "ratio_vs_torch_compile": float,
    "first_call_s": float,
    "graphs_compiled": int,
    "graphs_compiled_while_timed": int,
    "swapped_calls_while_timed": int,
    "max_abs_diff": float,
    "rel_error": float,
    "outputs_match": bool,
    "skipped": str,
    "relative_block_p25_spread": float,
}
# null for a skipped contender (and the ratio also without a torch_compile contender)
_NULLABLE = {"summary", "speedup_vs_eager", "ratio_vs_torch_compile", "skipped", "relative_block_p25_spread"}
_DYNAMIC_CONTENDER_FIELDS = {
    "name": str,
    "entry": str,
    "pass_s": list,
    "compile_call_s": float,
    "first_pass_s": float,
    "steady_pass_s": float,
    "total_s": float,
    "graphs_compiled_first_pass": int,
    "graphs_compiled_later": int,
    "rel_error": float,
    "outputs_match": bool,
    "skipped": str,
}
_SECTION_FIELDS = {
    "model": str,
    "dims": dict,
    "unit": str,
    "calls_per_sample": int,
    "iterations": int,
    "warmup": int,
    "reference": str,
    "baseline": str,
    "contenders": list,
}
_STARTUP_RUN_FIELDS = {
    "contender": str,
    "cache": str,
    "time_to_first_output_s": float,
    "child": dict,
    "counters": dict,
}


def environment(device: torch.device) -> dict[str, Any]:
    return {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "device": device.type,
        "device_name": torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu",
        "cpu_count": os.cpu_count(),
        "load_average_1min": os.getloadavg()[0],
    }


def timing_section(
    model: str,
    dims: ModelDims,
    unit: str,
    runs: Sequence[ContenderRun],
    calls_per_sample: int,
    iterations: int,
    warmup: int,
) -> dict[str, Any]:
    """A timing section from harness runs (samples in ms, converted to ``unit``)."""
    if unit not in UNIT_SCALE:
        raise ValueError(f"unit must be one of {sorted(UNIT_SCALE)}, got {unit!r}")
    scale = UNIT_SCALE[unit]
    summaries = {run.name: stats.summarize([s * scale for s in run.samples]) for run in runs if run.skipped is None}
    if REFERENCE not in summaries:
        raise ValueError(f"a timing section needs the {REFERENCE!r} contender")
    reference = next(run for run in runs if run.name == REFERENCE)
    contenders = []
    for run in runs:
        summary = summaries.get(run.name)
        contenders.append(
            {
                "name": run.name,
                "entry": run.entry,
                "samples": [s * scale for s in run.samples],
                "summary": None if summary is None else summary.as_dict(),
                "speedup_vs_eager": None if summary is None else stats.speedup(summaries[REFERENCE], summary),
                "ratio_vs_torch_compile": (
                    stats.ratio(summary, summaries[BASELINE]) if summary is not None and BASELINE in summaries else None
                ),
                "first_call_s": run.first_call_s,
                "graphs_compiled": run.graphs_compiled,
                "graphs_compiled_while_timed": run.graphs_compiled_while_timed,
                "swapped_calls_while_timed": run.swapped_calls_while_timed,
                "max_abs_diff": run.max_abs_diff,
                "rel_error": run.rel_error,
                "outputs_match": run.outputs_match,
                "skipped": run.skipped,
                "relative_block_p25_spread": (
                    None if summary is None else stats.relative_block_p25_spread(run.samples, reference.samples)
                ),
            }
        )
    return {
        "model": model,
        "dims": dataclasses.asdict(dims),
        "unit": unit,
        "calls_per_sample": calls_per_sample,
        "iterations": iterations,
        "warmup": warmup,
        "reference": REFERENCE,
        "baseline": BASELINE,
        "contenders": contenders,
    }


def dynamic_section(
    model: str, dims: ModelDims, batch_sizes: Sequence[int], runs: Sequence[DynamicRun]
) -> dict[str, Any]:
    """The dynamic-batch section: per contender, the wall time of the compiling call before
    the passes and of each pass over ``batch_sizes``; ``steady_pass_s`` is the median of the
    passes after the first, ``total_s`` the sum of the passes (the compiling call left out)."""
    contenders = []
    for run in runs:
        ran = run.skipped is None
        contenders.append(
            {
                "name": run.name,
                "entry": run.entry,
                "pass_s": list(run.pass_s),
                "compile_call_s": run.compile_call_s if ran else None,
                "first_pass_s": run.pass_s[0] if ran else None,
                "steady_pass_s": statistics.median(run.pass_s[1:]) if ran else None,
                "total_s": sum(run.pass_s) if ran else None,
                "graphs_compiled_first_pass": run.graphs_compiled_first_pass,
                "graphs_compiled_later": run.graphs_compiled_later,
                "rel_error": run.rel_error,
                "outputs_match": run.outputs_match,
                "skipped": run.skipped,
            }
        )
    return {
        "model": model,
        "dims": dataclasses.asdict(dims),
        "unit": "s",
        "batch_sizes": list(batch_sizes),
        "passes": len(next(r.pass_s for r in runs if r.skipped is None)),
        "contenders": contenders,
    }


def build_document(
    command: Sequence[str],
    env: dict[str, Any],
    settings: dict[str, Any],
    sections: dict[str, dict[str, Any] | None],
) -> dict[str, Any]:
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        raise ValueError(f"unknown section(s) {unknown}; known: {list(SECTIONS)}")
    return {
        "schema": SCHEMA,
        "schema_version": SCHEMA_VERSION,
        "created_utc": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": list(command),
        "environment": env,
        "settings": settings,
        **{name: sections.get(name) for name in SECTIONS},
    }


def _check_fields(obj: Any, fields: dict[str, type], where: str, problems: list[str]) -> None:
    if not isinstance(obj, dict):
        problems.append(f"{where}: expected an object, got {type(obj).__name__}")
        return
    for name, kind in fields.items():
        if name not in obj:
            problems.append(f"{where}: missing {name!r}")
            continue
        value = obj[name]
        if value is None and (name in _NULLABLE or (obj.get("skipped") is not None and kind is float)):
            continue
        accepted = (int, float) if kind is float else kind
        if not isinstance(value, accepted) or (kind is not bool and isinstance(value, bool)):
            problems.append(f"{where}.{name}: expected {kind.__name__}, got {type(value).__name__}")


def validate_document(doc: Any) -> None:
    """Raise ``ValueError`` listing every way ``doc`` departs from schema version 1."""
    problems: list[str] = []
    _check_fields(
        doc,
        {
            "schema": str,
            "schema_version": int,
            "created_utc": str,
            "command": list,
            "environment": dict,
            "settings": dict,
        },
        "document",
        problems,
    )
    if problems:
        raise ValueError("invalid bench document: " + "; ".join(problems))
    if doc["schema"] != SCHEMA or doc["schema_version"] != SCHEMA_VERSION:
        raise ValueError(
            f"invalid bench document: schema {doc['schema']!r} v{doc['schema_version']}, "
            f"expected {SCHEMA!r} v{SCHEMA_VERSION}"
        )
    for name in SECTIONS:
        if name not in doc:
            problems.append(f"document: missing section {name!r} (null when not run)")
    for name in TIMING_SECTIONS:
        section = doc.get(name)
        if section is None:
            continue
        _check_fields(section, _SECTION_FIELDS, name, problems)
        for i, contender in enumerate(section.get("contenders", []) if isinstance(section, dict) else []):
            where = f"{name}.contenders[{i}]"
            _check_fields(contender, _CONTENDER_FIELDS, where, problems)
            if not isinstance(contender, dict) or not isinstance(contender.get("samples"), list):
                continue
            samples = contender["samples"]
            if contender.get("skipped") is not None:
                if samples or contender.get("summary") is not None:
                    problems.append(f"{where}: skipped ({contender['skipped']}) but has samples or a summary")
                continue
            if len(samples) != section.get("iterations") or not all(
                isinstance(s, (int, float)) and s > 0 for s in samples
            ):
                problems.append(f"{where}.samples: expected {section.get('iterations')} positive numbers")
            summary = contender.get("summary")
            if summary is None:
                problems.append(f"{where}.summary: null for a contender that ran")
                continue
            _check_fields(
                summary, {f.name: float for f in dataclasses.fields(stats.Summary)}, f"{where}.summary", problems
            )
    dynamic = doc.get("dynamic")
    if dynamic is not None:
        _check_fields(
            dynamic,
            {"model": str, "dims": dict, "unit": str, "batch_sizes": list, "passes": int, "contenders": list},
            "dynamic",
            problems,
        )
        for i, contender in enumerate(dynamic.get("contenders", []) if isinstance(dynamic, dict) else []):
            where = f"dynamic.contenders[{i}]"
            _check_fields(contender, _DYNAMIC_CONTENDER_FIELDS, where, problems)
            if isinstance(contender, dict) and contender.get("skipped") is None:
                passes = contender.get("pass_s")
                if not isinstance(passes, list) or len(passes) != dynamic.get("passes"):
                    problems.append(f"{where}.pass_s: expected {dynamic.get('passes')} pass times")
    startup = doc.get("startup")
    if startup is not None:
        _check_fields(
            startup,
            {"model": str, "dims": dict, "unit": str, "runs": list, "cold_over_warm": dict},
            "startup",
            problems,
        )
        for i, run in enumerate(startup.get("runs", []) if isinstance(startup, dict) else []):
            _check_fields(run, _STARTUP_RUN_FIELDS, f"startup.runs[{i}]", problems)
    if problems:
        raise ValueError("invalid bench document: " + "; ".join(problems))


def write_json(doc: dict[str, Any], path: str) -> None:
    """Validate ``doc`` and write it (temp file + rename, so a reader never sees half a file)."""
    validate_document(doc)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(doc, handle, indent=1)
        handle.write("\n")
    os.replace(tmp, path)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(header[i]), *(len(r[i]) for r in rows)) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for row in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def _swapped_share(contender: dict[str, Any], section: dict[str, Any]) -> str:
    """The share of timed calls that ran Magi's swapped-in bytecode ("-" for non-Magi contenders)."""
    if not contender["name"].startswith("magi_"):
        return "-"
    timed_calls = section["iterations"] * section["calls_per_sample"]
    return f"{contender['swapped_calls_while_timed'] / timed_calls:.0%}"


def format_timing_section(title: str, section: dict[str, Any]) -> str:
    unit = section["unit"]
    rows = []
    skipped = []
    for c in section["contenders"]:
        s = c["summary"]
        if s is None:
            skipped.append(f"  {c['name']}: skipped, {c['skipped']}")
            continue
        ratio = c["ratio_vs_torch_compile"]
        rows.append(
            [
                c["name"],
                f"{s['median']:.4g}",
                f"{s['min']:.4g}",
                f"{s['max']:.4g}",
                f"{s['max_over_min']:.3f}",
                f"{s['block_median_spread']:.3f}",
                f"{s['block_p25_spread']:.3f}",
                f"{c['relative_block_p25_spread']:.3f}",
                f"{c['speedup_vs_eager']:.3f}x",
                "-" if ratio is None else f"{ratio:.3f}",
                str(c["graphs_compiled"]),
                _swapped_share(c, section),
                f"{c['first_call_s']:.2f}",
                f"{c['rel_error']:.1e}",
                "yes" if c["outputs_match"] else "NO",
            ]
        )
    header = [
        "contender",
        f"median {unit}",
        f"min {unit}",
        f"max {unit}",
        "max/min",
        "blk median spread",
        "blk p25 spread",
        "vs eager blk p25 spread",
        "vs eager",
        "vs torch.compile",
        "graphs",
        "swapped",
        "first call s",
        "rel err",
        "output ok",
    ]
    dims = section["dims"]
    caption = (
        f"{title}: {section['model']} (hidden {dims['hidden']}, seq {dims['seq']}, layers {dims['layers']}, "
        f"batch {dims['batch']}), {section['iterations']} interleaved rounds x {section['calls_per_sample']} "
        f"call(s), {section['warmup']} warm-up"
    )
    return "\n".join([caption, _table(header, rows), *skipped])


def format_dynamic_section(section: dict[str, Any]) -> str:
    rows = []
    skipped = []
    for c in section["contenders"]:
        if c["skipped"] is not None:
            skipped.append(f"  {c['name']}: skipped, {c['skipped']}")
            continue
        rows.append(
            [
                c["name"],
                f"{c['compile_call_s']:.3f}",
                f"{c['first_pass_s']:.3f}",
                f"{c['steady_pass_s']:.4f}",
                f"{c['total_s']:.3f}",
                str(c["graphs_compiled_first_pass"]),
                str(c["graphs_compiled_later"]),
                f"{c['rel_error']:.1e}",
                "yes" if c["outputs_match"] else "NO",
            ]
        )
    header = [
        "contender",
        "compile call s",
        "first pass s",
        "steady pass s",
        "total s",
        "graphs 1st",
        "graphs later",
        "rel err",
        "output ok",
    ]
    dims = section["dims"]
    caption = (
        f"dynamic batch: {section['model']} (hidden {dims['hidden']}, seq {dims['seq']}, layers {dims['layers']}), "
        f"batch sizes {','.join(map(str, section['batch_sizes']))}, {section['passes']} passes after one compiling "
        "call at another size (the first pass with the CUDA-graph recordings of its sizes); total: the passes"
    )
    return "\n".join([caption, _table(header, rows), *skipped])


def _compiles(run: dict[str, Any]) -> str:
    """Inductor compiles of a startup run: Magi's own count for Magi, Inductor FX-cache misses otherwise."""
    counters = run["counters"]
    if run["contender"].startswith("magi_"):
        return str(counters["magi_inductor_compiles"])
    return "0" if run["contender"] == "eager" else str(counters["fxgraph_cache_misses"])


def format_startup_section(section: dict[str, Any]) -> str:
    by_contender: dict[str, dict[str, dict[str, Any]]] = {}
    for run in section["runs"]:
        by_contender.setdefault(run["contender"], {})[run["cache"]] = run
    rows = []
    for name, runs in by_contender.items():
        cold, warm = runs["cold"], runs["warm"]
        rows.append(
            [
                name,
                f"{cold['time_to_first_output_s']:.2f}",
                f"{warm['time_to_first_output_s']:.2f}",
                f"{section['cold_over_warm'][name]:.2f}x",
                f"{cold['child']['first_call_s']:.2f}",
                f"{warm['child']['first_call_s']:.2f}",
                _compiles(cold),
                _compiles(warm),
            ]
        )
    header = [
        "contender",
        "cold s",
        "warm s",
        "cold/warm",
        "cold 1st call s",
        "warm 1st call s",
        "cold compiles",
        "warm compiles",
    ]
    return (
        "startup: time to first output of a fresh process (interpreter start to first output), "
        f"{section['model']}\n" + _table(header, rows)
    )


def format_document(doc: dict[str, Any]) -> str:
    env = doc["environment"]
    title = (
        f"magi-bench  torch {env['torch']}  {env['device']} ({env['device_name']})  "
        f"dtype {doc['settings']['dtype']}  threads {doc['settings']['threads']}  "
        f"load {env.get('load_average_1min', float('nan')):.1f}  {doc['created_utc']}"
    )
    parts = [title]
    if doc["latency"] is not None:
        parts.append(format_timing_section("latency per call", doc["latency"]))
    if doc.get("attention") is not None:
        parts.append(format_timing_section("latency per call, split at attention", doc["attention"]))
    if doc["dispatch"] is not None:
        parts.append(format_timing_section("dispatch overhead per call", doc["dispatch"]))
    if doc.get("dynamic") is not None:
        parts.append(format_dynamic_section(doc["dynamic"]))
    if doc["startup"] is not None:
        parts.append(format_startup_section(doc["startup"]))
    return "\n\n".join(parts) + "\n"


def print_document(doc: dict[str, Any]) -> None:
    sys.stdout.write(format_document(doc))
