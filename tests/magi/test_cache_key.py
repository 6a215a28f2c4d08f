"""cache_key_factors, the placement factor and ``python -m magi_compiler.cache_key --explain``."""

import json
import shutil
import subprocess
import sys

import torch

from magi_compiler.cache_key import FACTOR_NAMES, cache_key, cache_key_factors, traced_sources_hash
from magi_compiler.config import CompileConfig, apply_config_patch
from magi_compiler.placement_hash import compute_input_placement_hash

from .conftest import REPO_ROOT, script_env


def test_factor_names_and_order(tmp_path):
    source = tmp_path / "model.py"
    source.write_text("def f(x):\n    return x + 1\n")
    factors = cache_key_factors(CompileConfig(), [str(source)], [torch.ones(2)])
    assert (
        tuple(factors)
        == FACTOR_NAMES
        == (
            "compile_config",
            "inductor_config",
            "compiler_version",
            "compiler_source",
            "traced_sources",
            "input_placements",
        )
    )
    assert cache_key(factors) == cache_key(dict(factors))


def test_key_tracks_codegen_config_and_source_edits_only(tmp_path):
    source = tmp_path / "model.py"
    source.write_text("def f(x):\n    return x + 1\n")
    base = CompileConfig()
    key = cache_key(cache_key_factors(base, [str(source)], []))
    unrelated = apply_config_patch(base, {"log_level": "DEBUG", "cache_root_dir": str(tmp_path)})
    assert cache_key(cache_key_factors(unrelated, [str(source)], [])) == key
    codegen = apply_config_patch(base, {"fsdp": {"bucket_size_mib": 32}})
    assert cache_key(cache_key_factors(codegen, [str(source)], [])) != key
    # the same content elsewhere (a relocated checkout) keeps the key; an edit changes it
    moved = tmp_path / "moved"
    moved.mkdir()
    (moved / "model.py").write_text(source.read_text())
    assert traced_sources_hash([str(moved / "model.py"), "<string>"]) == traced_sources_hash([str(source)])
    source.write_text("def f(x):\n    return x + 2\n")
    assert cache_key(cache_key_factors(base, [str(source)], [])) != key


def _explain_key(package_parent, tmp_path) -> dict:
    env = script_env(tmp_path)
    env["PYTHONPATH"] = str(package_parent)
    proc = subprocess.run(
        [sys.executable, "-m", "magi_compiler.cache_key", "--explain", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(proc.stdout)["cases"]["default"]


def test_key_sees_magi_compilers_own_source(tmp_path):
    # two copies of the package at different paths: same key; an edited pass: a new key
    copies = [tmp_path / "a", tmp_path / "b"]
    for copy in copies:
        shutil.copytree(
            REPO_ROOT / "magi_compiler", copy / "magi_compiler", ignore=shutil.ignore_patterns("__pycache__")
        )
    first, second = (_explain_key(copy, tmp_path) for copy in copies)
    assert first == second
    pass_file = copies[1] / "magi_compiler" / "passes" / "noop_elimination.py"
    pass_file.write_text(pass_file.read_text() + "\n# an edit that changes generated code\n")
    edited = _explain_key(copies[1], tmp_path)
    assert edited["factors"]["compiler_source"] != first["factors"]["compiler_source"]
    assert edited["key"] != first["key"]
    assert {k: v for k, v in edited["factors"].items() if k != "compiler_source"} == {
        k: v for k, v in first["factors"].items() if k != "compiler_source"
    }


def test_placement_hash_ignores_plain_inputs():
    empty = compute_input_placement_hash([])
    assert compute_input_placement_hash([torch.ones(2), torch.ones(3, dtype=torch.float16), 3, 2.5]) == empty


def test_placement_hash_covers_dtensor_layout(single_rank_mesh):
    from torch.distributed.tensor import DTensor, Replicate, Shard

    local = torch.ones(4, 4)
    shard = DTensor.from_local(local, single_rank_mesh, [Shard(0)])
    replicate = DTensor.from_local(local, single_rank_mesh, [Replicate()])
    half = DTensor.from_local(local.half(), single_rank_mesh, [Shard(0)])
    base = compute_input_placement_hash([shard])
    assert base != compute_input_placement_hash([])
    assert base != compute_input_placement_hash([replicate])
    assert base != compute_input_placement_hash([half])
    assert compute_input_placement_hash([shard, replicate]) != compute_input_placement_hash([replicate, shard])
    assert compute_input_placement_hash([torch.ones(2), shard, 1.0]) == base


def test_explain_json_runs_fresh_and_covers_reference_cases(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "magi_compiler.cache_key", "--explain", "--json"],
        env=script_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert "RuntimeWarning" not in proc.stderr, proc.stderr
    cases = json.loads(proc.stdout)["cases"]
    assert {"default", "backend_eager", "fsdp_bucket_16mib"} <= set(cases)
    for case in cases.values():
        assert tuple(case["factors"]) == FACTOR_NAMES
        assert case["key"] == cache_key(case["factors"])
    default, eager, fsdp = cases["default"], cases["backend_eager"], cases["fsdp_bucket_16mib"]
    assert eager["factors"]["compile_config"] != default["factors"]["compile_config"]
    assert fsdp["factors"]["compile_config"] != default["factors"]["compile_config"]
    assert len({default["key"], eager["key"], fsdp["key"]}) == 3
    assert eager["factors"]["traced_sources"] == default["factors"]["traced_sources"]
    text = subprocess.run(
        [sys.executable, "-m", "magi_compiler.cache_key", "--explain", "--from-env"],
        env=script_env(tmp_path, MAGI_COMPILE_BACKEND="eager", MAGI_COMPILE_LOG_LEVEL="DEBUG"),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=REPO_ROOT,
    ).stdout
    assert f"default: key={default['key']}" in text
    assert f"environment: key={eager['key']}" in text, "the environment's config is backend=eager"
