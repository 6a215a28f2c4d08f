"""The overlap report entry point and the benchmark's exposed-time arithmetic."""

from __future__ import annotations

import json

import pytest
import torch.distributed as dist

from magi_bench import overlap_report
from magi_bench.overlap import overlap_us


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
