"""benchmarks/split_cost.py runs end to end on CPU (a short run at a small shape): every contender's
row, the paired per-round ratios and the profiled-call table are printed; it asserts no timing."""

import re
import subprocess
import sys

from .conftest import REPO_ROOT, script_env


def test_split_cost_script_prints_every_contender_and_the_paired_ratios(tmp_path):
    env = script_env(tmp_path / "magi", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "split_cost.py"), "--device", "cpu"]
    command += ["--hidden", "32", "--seq", "4", "--batch", "2", "--layers", "2", "--heads", "2"]
    command += ["--rounds", "2", "--calls", "2", "--warmup", "1", "--threads", "1", "--kernels"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    number = r"\s+\d+\.\d+"
    for contender in ("eager", "torch_compile", "magi_split", "magi_unsplit"):
        assert re.search(rf"^{contender}{number}{number}{number}x{number}x{number}$", out, re.MULTILINE), contender
        assert re.search(rf"^{contender}\s+\d+{number}\s+\d+{number}$", out, re.MULTILINE), contender
    for other in ("torch_compile", "magi_unsplit", "eager"):
        assert re.search(rf"^  {other}{number}x  \(\d+\.\d+ - \d+\.\d+\)$", out, re.MULTILINE), other


def test_split_cost_script_refuses_bad_dims_in_one_line(tmp_path):
    env = script_env(tmp_path / "magi")
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "split_cost.py"), "--device", "cpu"]
    proc = subprocess.run(
        [*command, "--hidden", "30", "--heads", "4"], check=False, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert "--hidden 30 is not a multiple of --heads 4" in proc.stderr
    assert "Traceback" not in proc.stderr
