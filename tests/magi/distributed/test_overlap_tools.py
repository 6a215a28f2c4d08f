"""The overlap report entry point, the benchmark's exposed-time arithmetic, and the benchmark's
documented CPU command run as a real process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from magi_bench import overlap_report
from magi_bench.overlap import exposed_all_gather_us, overlap_us
from tests.home_guard import isolate

REPO_ROOT = Path(__file__).resolve().parents[3]


def test_overlap_us_counts_only_covered_time():
    assert overlap_us([(0, 10)], []) == 0
    assert overlap_us([(0, 10)], [(2, 4), (3, 6), (8, 20)]) == 4 + 2  # union (2, 6) and (8, 20)
    assert overlap_us([(0, 10), (20, 30)], [(5, 25)]) == 5 + 5
    assert overlap_us([(0, 10)], [(10, 12)]) == 0


def test_overlap_report_json(capsys):
    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    assert overlap_report.main(["--layers", "2", "--hidden", "32", "--bucket-size-mib", "0.02", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["before"]) == 2 * 12 + 2, "one blocking gather per parameter before the pass"
    assert all(row["compute_nodes_overlapped"] == 0 for row in report["before"])
    after = report["after"]
    assert sum(len(row["params"]) for row in after) == 2 * 12 + 2 and len(after) < len(report["before"])
    assert [row["issue_step"] <= row["wait_step"] <= row["first_use_step"] for row in after] == [True] * len(after)
    assert any(row["compute_nodes_overlapped"] > 0 for row in after)


def test_no_profiled_all_gather_is_zero_time_not_an_error():
    assert exposed_all_gather_us([], cuda=False) == (0.0, 0.0)
    assert exposed_all_gather_us([], cuda=True) == (0.0, 0.0)


def test_the_documented_cpu_benchmark_command_prints_its_figures(tmp_path):
    """The CPU command of docs/fsdp.md (`python -m magi_bench.overlap --layers 2 --hidden 64`, one
    gloo rank) at smaller sizes and with two of its three variants (each variant compiles a forward
    and a backward graph with Inductor, cold: all three took ~75 s on 2 busy cores). With the pass
    off DTensor needs no collective, so that variant has no all-gather and says so in one line; the
    pass's variant profiles gloo all-gathers. Printed figures and the JSON line agree."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR")}
    isolate(tmp_path / "home", env)
    env.update(CUDA_VISIBLE_DEVICES="", PYTHONPATH=str(REPO_ROOT))
    sizes = ["--layers", "1", "--hidden", "32", "--steps", "1", "--warmup", "1", "--variants", "off,coalesced"]
    command = [sys.executable, "-m", "magi_bench.overlap", *sizes]
    done = subprocess.run(command, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "Traceback" not in done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["device"] == "cpu" and report["config"]["layers"] == 1 and report["config"]["hidden"] == 32
    results = {r["variant"]: r for r in report["results"]}
    assert list(results) == ["off", "coalesced"]
    off = results.pop("off")
    assert off["all_gather_ms_per_step"] == off["exposed_all_gather_ms_per_step"] == 0.0
    assert off["hidden_fraction"] is None and off["step_time_vs_off"] == 1.0
    for name, r in results.items():
        assert r["all_gather_ms_per_step"] > 0, f"{name}: the pass's all-gathers were not profiled"
        assert 0 <= r["exposed_all_gather_ms_per_step"] <= r["all_gather_ms_per_step"] + 1e-9
        assert 0 <= r["hidden_fraction"] <= 1
        assert r["exposed_vs_off"] is None, "no ratio against a variant without all-gathers"
    notes = [line for line in done.stderr.splitlines() if "no all-gather was profiled" in line]
    assert len(notes) == 1 and "one rank" in notes[0], done.stderr[-4000:]
    for r in report["results"]:
        line = re.search(
            rf"^ *{r['variant']}: step +(\S+) ms  all-gather +(\S+) ms  exposed +(\S+) ms  hidden (\S+)$",
            done.stderr,
            re.MULTILINE,
        )
        assert line is not None, (r["variant"], done.stderr[-4000:])
        figures = (r["step_ms"], r["all_gather_ms_per_step"], r["exposed_all_gather_ms_per_step"])
        hidden = "n/a" if r["hidden_fraction"] is None else f"{r['hidden_fraction']:.0%}"
        assert line.groups() == (*(f"{x:.2f}" for x in figures), hidden)
