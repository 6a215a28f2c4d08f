"""``magi_bench.check``: the contract and stability checks of a bench document."""

import json

import torch

from magi_bench import check, report
from magi_bench.contenders import CONTENDER_NAMES, MAGI_CONTENDERS
from magi_bench.harness import ContenderRun, DynamicRun, compare_outputs
from magi_bench.models import ModelDims

CUDA_ONLY = {"torch_compile_reduce_overhead", "magi_piecewise_cudagraph", "magi_full_cudagraph"}


def _samples(spread: float) -> list[float]:
    """40 samples in 4 blocks of 10 whose medians and lower quartiles are 1.0, ``spread``, 1.05
    and 1.0, each block with one preempted call (max/min 10 and more)."""
    return [m * (10.0 if i == 3 else 1.0) for m in (1.0, spread, 1.05, 1.0) for i in range(10)]


def _document(spread: float = 1.1, skipped: frozenset = frozenset(CUDA_ONLY), eager_spread: float | None = None):
    runs = [
        ContenderRun(
            name,
            name,
            [] if name in skipped else _samples(eager_spread if name == "eager" and eager_spread else spread),
            first_call_s=1.0,
            graphs_compiled=int(name != "eager" and name not in skipped),
            graphs_compiled_while_timed=0,
            swapped_calls_while_timed=40 if name in MAGI_CONTENDERS and name not in skipped else 0,
            max_abs_diff=0.0,
            rel_error=0.0,
            outputs_match=True,
            skipped="needs CUDA" if name in skipped else None,
        )
        for name in CONTENDER_NAMES
    ]
    latency = report.timing_section("SimpleModel", ModelDims(8, 4, 1, 2), "ms", runs, 1, 40, 1)
    dynamic_runs = [
        DynamicRun(name, name, [] if name in skipped else [2.0, 0.5], int(name != "eager"), 0, 0.0, True)
        if name not in skipped
        else DynamicRun(name, name, [], 0, 0, 0.0, True, "needs CUDA")
        for name in CONTENDER_NAMES
    ]
    dynamic = report.dynamic_section("AttentionModel", ModelDims(8, 4, 1, 2), [2, 3], dynamic_runs)
    return report.build_document(
        ["magi-bench"],
        report.environment(torch.device("cpu")),
        {"dtype": "float32", "threads": 1},
        {"latency": latency, "dynamic": dynamic},
    )


def test_a_sound_document_passes_both_checks(tmp_path, capsys):
    doc = _document()
    assert check.contract_problems(doc) == []
    assert check.stability_problems(doc) == []
    path = tmp_path / "bench.json"
    report.write_json(doc, str(path))
    assert check.main([str(path), "--stability"]) == 0
    assert capsys.readouterr().out.splitlines() == ["contract: ok", "stability: ok"]


def test_contract_problems_name_each_breach(tmp_path, capsys):
    doc = _document()
    by_name = {c["name"]: c for c in doc["latency"]["contenders"]}
    by_name["magi_function"]["outputs_match"] = False
    by_name["magi_method"]["graphs_compiled"] = 2
    by_name["torch_compile"]["graphs_compiled_while_timed"] = 1
    by_name["magi_class"]["swapped_calls_while_timed"] = 2
    doc["dynamic"]["contenders"][1]["graphs_compiled_later"] = 2
    problems = check.contract_problems(doc)
    assert len(problems) == 5
    assert "dynamic.torch_compile: compiled 2 graph(s) after the first pass" in problems
    assert any("magi_class: 2 of 40 timed calls ran the swapped-in bytecode" in p for p in problems)
    assert any("magi_function: output differs" in p for p in problems)
    assert any("magi_method: compiled 2 graph(s), expected 1" in p for p in problems)
    assert any("torch_compile: compiled 1 graph(s) while timed" in p for p in problems)
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(doc))
    assert check.main([str(path)]) == 1
    assert "contract: FAILED" in capsys.readouterr().out


def test_unswapped_calls_pass_when_the_swap_is_off():
    doc = _document()
    for contender in doc["latency"]["contenders"]:
        contender["swapped_calls_while_timed"] = 0
    assert len(check.contract_problems(doc)) == 3  # the three Magi entry points that ran
    doc["settings"]["magi_bytecode_swap"] = False
    assert check.contract_problems(doc) == []


def test_missing_contender_and_invalid_schema_are_problems():
    doc = _document()
    doc["latency"]["contenders"].pop()
    assert "contenders" in check.contract_problems(doc)[0]
    doc["schema_version"] = 99
    assert "schema" in check.contract_problems(doc)[0]


def test_skips_need_a_reason_and_only_cuda_only_contenders_may_skip():
    doc = _document()
    assert [c["name"] for c in doc["latency"]["contenders"] if c["skipped"]] == sorted(
        CUDA_ONLY, key=CONTENDER_NAMES.index
    )
    assert check.contract_problems(doc) == []
    doc["environment"]["device"] = "cuda"
    assert check.contract_problems(doc) == [
        "latency.torch_compile_reduce_overhead: skipped (needs CUDA), but it must run on cuda",
        "dynamic.torch_compile_reduce_overhead: skipped (needs CUDA), but it must run on cuda",
    ]
    doc = _document(skipped=frozenset(CUDA_ONLY | {"magi_method"}))
    assert "latency.magi_method: skipped (needs CUDA), but it must run on cpu" in check.contract_problems(doc)
    doc = _document()
    doc["latency"]["contenders"][2]["skipped"] = " "
    assert check.contract_problems(doc) == ["latency.torch_compile_reduce_overhead: skipped without a reason"]
    doc = _document()
    doc["latency"]["contenders"][2]["samples"] = [1.0]
    assert "skipped (needs CUDA) but has samples" in check.contract_problems(doc)[0]


def test_stability_bounds_block_spreads_per_device():
    compiled = [name for name in CONTENDER_NAMES if name not in CUDA_ONLY and name != "eager"]
    stable = _document(spread=1.1)
    assert all(c["summary"]["max_over_min"] >= 10 for c in stable["latency"]["contenders"] if not c["skipped"])
    assert check.stability_problems(stable) == []
    # CPU: a stretch of rounds slowed for everyone (eager too) cancels; a compiled contender's own drift does not
    machine_drift = _document(spread=1.6)
    assert {c["relative_block_p25_spread"] for c in machine_drift["latency"]["contenders"] if not c["skipped"]} == {1.0}
    assert check.stability_problems(machine_drift) == []
    own_drift = _document(spread=1.6, eager_spread=1.0)
    assert check.stability_problems(own_drift) == [
        f"latency.{name}: relative_block_p25_spread 1.600 >= 1.5 (over 4 blocks of consecutive calls)"
        for name in compiled
    ]
    # CUDA: every contender's block medians, eager included
    gpu_drift = _document(spread=1.25)
    gpu_drift["environment"]["device"] = "cuda"
    assert check.stability_problems(gpu_drift) == [
        f"latency.{name}: block_median_spread 1.250 >= 1.2 (over 4 blocks of consecutive calls)"
        for name in ["eager", *compiled]
    ]


def test_compare_outputs_uses_relative_error_per_dtype():
    reference = torch.ones(4, 256, dtype=torch.bfloat16)
    one_element_off = reference.clone()
    one_element_off[0, 0] = 1.25
    checked = compare_outputs(one_element_off, reference)
    assert checked.match and checked.max_abs_diff == 0.25 and 0 < checked.rel_error < 2e-2
    assert not compare_outputs(reference * 1.1, reference).match
    assert not compare_outputs(reference.float(), reference).match
    assert not compare_outputs(reference[:2], reference).match
    exact = compare_outputs(reference.float(), reference.float())
    assert exact.match and exact.rel_error == 0.0
