"""``magi_compiler.bench.check``: the contract and stability checks of a bench document."""

import json

import torch

from magi_compiler.bench import check, report
from magi_compiler.bench.contenders import CONTENDER_NAMES
from magi_compiler.bench.harness import ContenderRun, compare_outputs
from magi_compiler.bench.models import ModelDims


def _document(spread: float = 1.1):
    runs = [
        ContenderRun(
            name,
            name,
            [1.0, spread, 1.05],
            first_call_s=1.0,
            graphs_compiled=int(name != "eager"),
            graphs_compiled_while_timed=0,
            swapped_calls_while_timed=3 if name.startswith("magi_") else 0,
            max_abs_diff=0.0,
            rel_error=0.0,
            outputs_match=True,
        )
        for name in CONTENDER_NAMES
    ]
    latency = report.timing_section("SimpleModel", ModelDims(8, 4, 1, 2), "ms", runs, 1, 3, 1)
    return report.build_document(
        ["magi-bench"],
        report.environment(torch.device("cpu")),
        {"dtype": "float32", "threads": 1},
        {"latency": latency},
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
    problems = check.contract_problems(doc)
    assert len(problems) == 4
    assert any("magi_class: 2 of 3 timed calls ran the swapped-in bytecode" in p for p in problems)
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
    assert len(check.contract_problems(doc)) == 3
    doc["settings"]["magi_bytecode_swap"] = False
    assert check.contract_problems(doc) == []


def test_missing_contender_and_invalid_schema_are_problems():
    doc = _document()
    doc["latency"]["contenders"].pop()
    assert "contenders" in check.contract_problems(doc)[0]
    doc["schema_version"] = 99
    assert "schema" in check.contract_problems(doc)[0]


def test_stability_bound():
    assert check.stability_problems(_document(spread=1.25)) == [
        f"latency.{name}: max/min 1.250 >= 1.2" for name in CONTENDER_NAMES
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
