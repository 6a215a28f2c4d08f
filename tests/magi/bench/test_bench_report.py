"""The bench's JSON document: building, writing, reading back, schema validation, and the text tables."""

import copy
import json

import pytest

from magi_bench import report
from magi_bench.models import ModelDims

DIMS = ModelDims(hidden=8, seq=4, layers=1, batch=2)
SAMPLES = ["eager", "torch_compile", "magi_class"]  # the contenders of the conftest runs


def test_timing_section_comparisons_and_units(runs_factory):
    section = report.timing_section("TinyModel", DIMS, "us", runs_factory(), 100, 3, 2)
    by_name = {c["name"]: c for c in section["contenders"]}
    assert [c["name"] for c in section["contenders"]] == list(SAMPLES)
    assert by_name["eager"]["samples"] == pytest.approx([2000.0, 2200.0, 2100.0])
    assert by_name["eager"]["summary"]["median"] == pytest.approx(2100.0)
    assert by_name["torch_compile"]["speedup_vs_eager"] == pytest.approx(2.1 / 1.05)
    assert by_name["magi_class"]["ratio_vs_torch_compile"] == pytest.approx(1.0 / 1.05)
    assert by_name["torch_compile"]["ratio_vs_torch_compile"] == pytest.approx(1.0)


def test_timing_section_needs_eager_and_a_known_unit(runs_factory):
    with pytest.raises(ValueError, match="eager"):
        report.timing_section("M", DIMS, "ms", runs_factory({"magi_class": [1.0]}), 1, 1, 0)
    with pytest.raises(ValueError, match="unit"):
        report.timing_section("M", DIMS, "s", runs_factory(), 1, 3, 0)


def test_ratio_is_null_without_torch_compile(runs_factory):
    section = report.timing_section("M", DIMS, "ms", runs_factory({"eager": [1.0], "magi_class": [0.5]}), 1, 1, 0)
    assert section["contenders"][1]["ratio_vs_torch_compile"] is None


def test_write_json_round_trip_validates(tmp_path, document_factory):
    doc = document_factory()
    path = tmp_path / "out" / "bench.json"
    report.write_json(doc, str(path))
    loaded = json.loads(path.read_text())
    report.validate_document(loaded)
    assert loaded == json.loads(json.dumps(doc))
    assert loaded["schema"] == "magi_compiler.bench" and loaded["schema_version"] == 3
    assert [p.name for p in path.parent.iterdir()] == ["bench.json"]


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(schema_version=1), "v1"),
        (lambda d: d.pop("dispatch"), "missing section 'dispatch'"),
        (lambda d: d["latency"]["contenders"][0]["samples"].pop(), "expected 3 positive numbers"),
        (lambda d: d["latency"]["contenders"][1].pop("graphs_compiled"), "missing 'graphs_compiled'"),
        (lambda d: d["latency"]["contenders"][1].update(outputs_match="yes"), "outputs_match: expected bool"),
        (lambda d: d["dispatch"]["contenders"][0]["summary"].pop("median"), "missing 'median'"),
        (lambda d: d["startup"]["runs"][0].pop("time_to_first_output_s"), "time_to_first_output_s"),
    ],
)
def test_validate_rejects_broken_documents(mutate, message, tmp_path, document_factory):
    doc = copy.deepcopy(document_factory())
    mutate(doc)
    with pytest.raises(ValueError, match=message):
        report.validate_document(doc)
    with pytest.raises(ValueError):
        report.write_json(doc, str(tmp_path / "bad.json"))
    assert not (tmp_path / "bad.json").exists()


def test_null_sections_are_valid():
    doc = report.build_document(
        ["magi-bench"],
        {"torch": "x", "device": "cpu", "device_name": "cpu"},
        {"dtype": "float32", "threads": 1},
        {"latency": None},
    )
    report.validate_document(doc)
    assert doc["dispatch"] is None and doc["startup"] is None


def test_text_tables_show_every_contender_and_figure(document_factory):
    text = report.format_document(document_factory())
    assert "latency per call: SimpleModel" in text
    assert "dispatch overhead per call: TinyModel" in text
    assert "median us" in text and "median ms" in text
    for name in SAMPLES:
        assert name in text
    startup_row = next(line for line in text.splitlines() if line.startswith("magi_class") and "6.00x" in line)
    assert startup_row.split() == ["magi_class", "30.00", "5.00", "6.00x", "25.00", "1.00", "1", "0"]
    assert "2.000x" in text  # torch_compile's speedup vs eager (2.1 / 1.05)


def test_skipped_contenders_are_reported_not_dropped(runs_factory, document_factory):
    runs = runs_factory()
    runs[2].samples, runs[2].skipped = [], "needs CUDA (Magi CUDA graphs)"
    section = report.timing_section("SimpleModel", DIMS, "ms", runs, 1, 3, 2)
    skipped = section["contenders"][2]
    assert skipped["skipped"] == "needs CUDA (Magi CUDA graphs)"
    assert skipped["samples"] == [] and skipped["summary"] is None and skipped["speedup_vs_eager"] is None
    doc = document_factory()
    doc["latency"] = section
    report.validate_document(doc)
    text = report.format_document(doc)
    assert "  magi_class: skipped, needs CUDA (Magi CUDA graphs)" in text
    assert not any(line.startswith("magi_class ") for line in text.splitlines()[:8])


def test_dynamic_section_figures_and_table(document_factory):
    from magi_bench.harness import DynamicRun

    runs = [
        DynamicRun("eager", "e", [1.0, 1.0, 1.2], 0, 0, 0.0, True),
        DynamicRun("torch_compile_reduce_overhead", "r", [], 0, 0, 0.0, True, "needs CUDA"),
        DynamicRun("magi_class", "m", [9.0, 0.5, 0.7], 1, 0, 1e-7, True, compile_call_s=3.5),
    ]
    section = report.dynamic_section("AttentionModel", DIMS, [2, 3, 5], runs)
    magi = section["contenders"][2]
    assert (magi["first_pass_s"], magi["steady_pass_s"], magi["total_s"]) == (9.0, 0.6, pytest.approx(10.2))
    assert magi["compile_call_s"] == 3.5 and section["contenders"][1]["compile_call_s"] is None
    assert section["passes"] == 3 and section["contenders"][1]["total_s"] is None
    doc = document_factory()
    doc["dynamic"] = section
    report.validate_document(doc)
    text = report.format_document(doc)
    assert "batch sizes 2,3,5, 3 passes" in text
    assert "  torch_compile_reduce_overhead: skipped, needs CUDA" in text
    doc["dynamic"]["contenders"][2]["pass_s"].pop()
    with pytest.raises(ValueError, match="expected 3 pass times"):
        report.validate_document(doc)
