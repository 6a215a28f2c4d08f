"""Fixtures of the bench unit tests: synthetic harness runs and a full bench document."""

import pytest
import torch

from magi_bench import report
from magi_bench.harness import ContenderRun
from magi_bench.models import ModelDims

DIMS = ModelDims(hidden=8, seq=4, layers=1, batch=2)
SAMPLES = {"eager": [2.0, 2.2, 2.1], "torch_compile": [1.0, 1.1, 1.05], "magi_class": [1.0, 1.02, 0.98]}


def make_runs(samples=SAMPLES):
    return [
        ContenderRun(
            name,
            f"entry of {name}",
            list(values),
            first_call_s=0.5,
            graphs_compiled=int(name != "eager"),
            graphs_compiled_while_timed=0,
            swapped_calls_while_timed=len(values) if name.startswith("magi_") else 0,
            max_abs_diff=0.0,
            rel_error=0.0,
            outputs_match=True,
        )
        for name, values in samples.items()
    ]


def make_document():
    latency = report.timing_section("SimpleModel", DIMS, "ms", make_runs(), 1, 3, 2)
    dispatch = report.timing_section("TinyModel", DIMS, "us", make_runs(), 100, 3, 2)
    startup = {
        "model": "SimpleModel",
        "dims": {"hidden": 8, "seq": 4, "layers": 1, "batch": 2},
        "unit": "s",
        "runs": [
            {
                "contender": "magi_class",
                "cache": "cold",
                "time_to_first_output_s": 30.0,
                "child": {"build_s": 0.1, "first_call_s": 25.0},
                "counters": {"magi_inductor_compiles": 1},
            },
            {
                "contender": "magi_class",
                "cache": "warm",
                "time_to_first_output_s": 5.0,
                "child": {"build_s": 0.1, "first_call_s": 1.0},
                "counters": {"magi_inductor_compiles": 0},
            },
        ],
        "cold_over_warm": {"magi_class": 6.0},
    }
    settings = {"dtype": "float32", "threads": 1}
    return report.build_document(
        ["magi-bench"],
        report.environment(torch.device("cpu")),
        settings,
        {"latency": latency, "dispatch": dispatch, "startup": startup},
    )


@pytest.fixture
def runs_factory():
    """``make_runs(samples)``: one ContenderRun per name of ``samples`` (name -> per-call ms)."""
    return make_runs


@pytest.fixture
def document_factory():
    """``make_document()``: a fresh schema-valid document with latency, dispatch and startup sections."""
    return make_document
