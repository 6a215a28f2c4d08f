"""Cold vs warm start: two fresh processes on the same (first empty) cache directories;
the warm one must load from the Magi cache instead of compiling."""

import pytest
import torch

from magi_bench.models import ModelDims
from magi_bench.progress import Progress
from magi_bench.startup import run_startup


def test_warm_process_hits_the_cache_cold_one_compiles(tmp_path):
    dims = ModelDims(hidden=16, seq=4, layers=1, batch=2)
    section = run_startup(
        torch.device("cpu"),
        torch.float32,
        dims,
        tmp_path,
        Progress(enabled=False),
        contenders=("magi_class",),
        threads=1,
    )
    cold, warm = section["runs"]
    assert (cold["cache"], warm["cache"]) == ("cold", "warm")
    assert cold["counters"]["magi_inductor_compiles"] >= 1 and cold["counters"]["magi_cache_hits"] == 0
    assert warm["counters"]["magi_inductor_compiles"] == 0 and warm["counters"]["magi_cache_hits"] >= 1
    assert warm["child"]["checksum"] == pytest.approx(cold["child"]["checksum"], rel=1e-5)
    assert cold["time_to_first_output_s"] > cold["child"]["first_call_s"] > 0
    assert section["cold_over_warm"]["magi_class"] == pytest.approx(
        cold["time_to_first_output_s"] / warm["time_to_first_output_s"]
    )
