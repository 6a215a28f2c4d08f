"""Model helpers, the progress line and the CLI's input validation (no compiles here)."""

import io

import pytest
import torch

from magi_bench import models
from magi_bench.__main__ import main
from magi_bench.progress import Progress


def test_isolated_copies_have_their_own_code_and_same_results():
    fn = models.isolated_function(models.simple_model_function, "copy")
    assert fn.__code__ is not models.simple_model_function.__code__
    assert fn.__code__.co_filename == models.simple_model_function.__code__.co_filename
    cls = models.isolated_subclass(models.SimpleModel, "copy")
    assert issubclass(cls, models.SimpleModel) and cls.forward.__code__ is not models.SimpleModel.forward.__code__
    dims = models.ModelDims(hidden=8, seq=3, layers=2, batch=2)
    torch.manual_seed(0)
    model = models.SimpleModel(dims)
    twin = cls(dims)
    twin.load_state_dict(model.state_dict())
    x = model.example_input(torch.device("cpu"), torch.float32)
    torch.testing.assert_close(twin(x), model(x), rtol=0, atol=0)
    torch.testing.assert_close(fn(model, x), model(x), rtol=0, atol=0)


def test_dims_reject_a_static_size_on_the_dynamic_dim():
    with pytest.raises(ValueError, match="Dynamo specializes sizes 0 and 1"):
        models.ModelDims(hidden=8, seq=4, layers=1, batch=1)
    with pytest.raises(ValueError, match="hidden"):
        models.ModelDims(hidden=0, seq=4, layers=1, batch=2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--batch", "1"], "batch must be >= 2"),
        (["--sections", "latency,speed"], "unknown ['speed']"),
        (["--iterations", "0"], "--iterations must be >= 1"),
        (["--threads", "0"], "--threads must be >= 1"),
        (["--device", "meta"], "must be cuda[:N] or cpu"),
    ],
)
def test_cli_rejects_bad_input(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--device", "cpu", *argv] if "--device" not in argv else argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_progress_off_a_terminal_prints_stages_and_quarters():
    stream = io.StringIO()
    progress = Progress(stream)
    progress.stage("compiling x")
    for done in range(1, 9):
        progress.update("timed", done, 8)
    lines = stream.getvalue().splitlines()
    assert lines == [
        "magi-bench: compiling x",
        "magi-bench: timed 1/8",
        "magi-bench: timed 2/8",
        "magi-bench: timed 4/8",
        "magi-bench: timed 6/8",
        "magi-bench: timed 8/8",
    ]
    silent = io.StringIO()
    Progress(silent, enabled=False).stage("x")
    assert silent.getvalue() == ""
