"""The timing bench as a regression suite: ``python -m magi_bench`` on SimpleModel
through eager, torch.compile (default and reduce-overhead) and the ``@magi_compile`` entry
points and CUDA-graph modes.

``[contract]`` (CPU and GPU): the CLI exits 0, writes a schema-valid JSON with every
contender's samples (or, for a contender that cannot run here, its skip reason), every entry
point compiled exactly one graph and none while timed, and all outputs match eager.
``[stability]`` (CPU and GPU): the timed calls are cut into 4 blocks of consecutive calls (50
each); on GPU, for every contender, the largest block median over the smallest stays below 1.2;
on CPU, for every compiled contender, the same spread of its block lower quartiles divided by
eager's in the same rounds stays below 1.5 (``magi_bench.check``): a statistic of the
program (drift, recompiles, re-recorded graphs), not of single preempted calls or of a shared
runner's load. On CPU the reduced ``cpu`` profile runs; on GPU the default model
(``gpu`` profile). Speed ratios are bench figures (docs/benchmarks.md), not asserted.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from magi_bench.check import contract_problems, stability_problems
from magi_bench.contenders import CONTENDER_NAMES
from magi_bench.models import PROFILES

REPO_ROOT = Path(__file__).resolve().parents[2]
CUDA = torch.cuda.is_available()
PROFILE = PROFILES["gpu" if CUDA else "cpu"]
CPU_ITERATIONS = 200  # 4 blocks of 50 calls for the stability statistic (about 1.5 s of calls)


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("timing_bench")
    json_path = out / "bench.json"
    command = [
        sys.executable,
        "-m",
        "magi_bench",
        "--sections",
        "latency",
        "--profile",
        PROFILE.name,
        "--json",
        str(json_path),
        "--cache-dir",
        str(out / "cache"),
    ]
    if CUDA:
        command += ["--device", "cuda"]
    else:
        command += ["--device", "cpu", "--iterations", str(CPU_ITERATIONS), "--warmup", "2", "--threads", "1"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAGI_COMPILE_")}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert proc.returncode == 0, f"magi-bench failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    return proc, json.loads(json_path.read_text())


@pytest.mark.parametrize("check", ["contract", "stability"])
def test_simple_model_timing_class_function_instance_method(bench_run, check):
    proc, doc = bench_run
    latency = doc["latency"]
    if check == "contract":
        assert contract_problems(doc) == []
        assert doc["dispatch"] is None and doc["startup"] is None
        assert latency["model"] == "SimpleModel"
        assert latency["dims"] == {
            "hidden": PROFILE.dims.hidden,
            "seq": PROFILE.dims.seq,
            "layers": PROFILE.dims.layers,
            "batch": PROFILE.dims.batch,
            "heads": PROFILE.dims.heads,
        }
        assert doc["settings"]["timer"] == ("cuda_events" if CUDA else "perf_counter")
        iterations = PROFILE.iterations if CUDA else CPU_ITERATIONS
        assert [c["name"] for c in latency["contenders"]] == list(CONTENDER_NAMES)
        ran = 0
        for contender in latency["contenders"]:
            assert contender["name"] in proc.stdout
            if contender["skipped"] is not None:
                assert not CUDA or contender["name"] != "torch_compile_reduce_overhead"
                assert f"{contender['name']}: skipped, {contender['skipped']}" in proc.stdout
                continue
            ran += 1
            assert len(contender["samples"]) == iterations, contender["name"]
        assert ran >= (6 if CUDA else 5)
        assert re.search(rf"magi-bench: latency: first call \(compile\) of \w+ \({ran}/{ran}\)", proc.stderr)
        return
    assert all(c["summary"]["blocks"] == 4 for c in latency["contenders"] if c["skipped"] is None)
    assert stability_problems(doc) == []
