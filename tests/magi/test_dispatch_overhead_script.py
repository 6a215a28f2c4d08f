"""benchmarks/dispatch_overhead.py runs end to end on CPU (a short run): every contender's row, the
per-piece figure, every layer of the call path and, with ``--baseline``, every Magi contender's
twin from another checkout with the per-round ratio are printed; it asserts no timing."""

import re
import shutil
import subprocess
import sys

from .conftest import REPO_ROOT, script_env


def test_dispatch_overhead_script_prints_every_row_and_layer(tmp_path):
    env = script_env(tmp_path / "magi", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    baseline = tmp_path / "checkout"
    shutil.copytree(REPO_ROOT / "magi_compiler", baseline / "magi_compiler")
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "dispatch_overhead.py")]
    command += ["--device", "cpu", "--rounds", "1", "--calls", "2", "--warmup", "1", "--pieces", "2", "--threads", "1"]
    command += ["--layers", "--baseline", str(baseline)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    number = r"\s+\d+\.\d+"
    magi_contenders = ("magi", "magi_split", "magi_unsplit")
    for contender in ("eager", "torch_compile", *magi_contenders, *(f"{name}_baseline" for name in magi_contenders)):
        assert re.search(rf"^{contender}{number}{number}{number}x$", out, re.MULTILINE), contender
    for name in magi_contenders:
        assert re.search(
            rf"^per round, {name} over {name}_baseline: \d+\.\d+x \(10th-90th percentile", out, re.MULTILINE
        ), name
    assert re.search(r"per extra piece .*: -?\d+\.\d+ us", out)
    layer_rows = re.findall(r"^(\S.*?)\s+(\d+\.\d+|n/a)$", out, re.MULTILINE)
    layers = {name.strip(): value for name, value in layer_rows}
    for layer in (
        "EntryState._dispatch_signature",
        "graph as the swapped code calls it (relinked global)",
        "compiled piece 0 made lean",
        "splitting-op piece 1: forward",
        "AOTAutograd runtime wrapper",
        "Inductor generated call()",
    ):
        assert layers.get(layer) not in (None, "n/a"), layer
    assert "magi_full_cudagraph" not in out  # CUDA-only contenders are not run on CPU, even where CUDA is


def test_dispatch_overhead_script_refuses_a_baseline_without_the_package(tmp_path):
    env = script_env(tmp_path / "magi", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "dispatch_overhead.py"), "--baseline", str(tmp_path)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert f"--baseline {tmp_path}: no magi_compiler package there" in proc.stderr
    assert "Traceback" not in proc.stderr
