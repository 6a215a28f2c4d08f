"""The bench's JSON document (schema ``magi_compiler.bench``, version 1), its validation, and
the plain-text tables.

Document: ``schema``, ``schema_version``, ``created_utc``, ``command``, ``environment``,
``settings``, and three sections, each ``null`` when not run: ``latency`` (per-call time of
the model, ms), ``dispatch`` (per-call time of the tiny launch-bound graph, us) and
``startup`` (time to first output of fresh processes, cold vs warm cache, s). A timing
section lists its contenders in run order, each with every sample. Readers must check
``schema_version``; a change of meaning of any field bumps it.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import platform
import sys
from collections.abc import Sequence
from typing import Any

import torch

from magi_compiler.bench import stats
from magi_compiler.bench.harness import ContenderRun
from magi_compiler.bench.models import ModelDims

SCHEMA = "magi_compiler.bench"
SCHEMA_VERSION = 1
REFERENCE = "eager"
BASELINE = "torch_compile"
UNIT_SCALE = {"ms": 1.0, "us": 1e3}
SECTIONS = ("latency", "dispatch", "startup")

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
    summaries = {run.name: stats.summarize([s * scale for s in run.samples]) for run in runs}
    if REFERENCE not in summaries:
        raise ValueError(f"a timing section needs the {REFERENCE!r} contender")
    contenders = []
    for run in runs:
        summary = summaries[run.name]
        contenders.append(
            {
                "name": run.name,
                "entry": run.entry,
                "samples": [s * scale for s in run.samples],
                "summary": summary.as_dict(),
                "speedup_vs_eager": stats.speedup(summaries[REFERENCE], summary),
                "ratio_vs_torch_compile": stats.ratio(summary, summaries[BASELINE]) if BASELINE in summaries else None,
                "first_call_s": run.first_call_s,
                "graphs_compiled": run.graphs_compiled,
                "graphs_compiled_while_timed": run.graphs_compiled_while_timed,
                "swapped_calls_while_timed": run.swapped_calls_while_timed,
                "max_abs_diff": run.max_abs_diff,
                "rel_error": run.rel_error,
                "outputs_match": run.outputs_match,
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
        if value is None and name == "ratio_vs_torch_compile":
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
    for name in ("latency", "dispatch"):
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
            if len(samples) != section.get("iterations") or not all(
                isinstance(s, (int, float)) and s > 0 for s in samples
            ):
                problems.append(f"{where}.samples: expected {section.get('iterations')} positive numbers")
            _check_fields(
                contender.get("summary"),
                {f.name: float for f in dataclasses.fields(stats.Summary)},
                f"{where}.summary",
                problems,
            )
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
    for c in section["contenders"]:
        s = c["summary"]
        ratio = c["ratio_vs_torch_compile"]
        rows.append(
            [
                c["name"],
                f"{s['median']:.4g}",
                f"{s['min']:.4g}",
                f"{s['max']:.4g}",
                f"{s['max_over_min']:.3f}",
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
    return caption + "\n" + _table(header, rows)


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
    if doc["dispatch"] is not None:
        parts.append(format_timing_section("dispatch overhead per call", doc["dispatch"]))
    if doc["startup"] is not None:
        parts.append(format_startup_section(doc["startup"]))
    return "\n\n".join(parts) + "\n"


def print_document(doc: dict[str, Any]) -> None:
    sys.stdout.write(format_document(doc))
