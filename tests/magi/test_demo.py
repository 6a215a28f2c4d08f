"""``python -m magi_compiler.demo``: the README's fallback main job, run for real."""

import re
import subprocess
import sys

from .conftest import script_env


def test_demo_second_process_hits_cache(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "magi_compiler.demo", "--cache-dir", str(tmp_path / "cache")],
        env=script_env(tmp_path / "unused"),
        capture_output=True,
        text=True,
        timeout=400,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    first = re.search(r"process 1: (\d+) Inductor compile\(s\), (\d+) cache hit", proc.stdout)
    second = re.search(r"process 2: (\d+) Inductor compile\(s\), (\d+) cache hit", proc.stdout)
    assert first and int(first.group(1)) >= 1 and int(first.group(2)) == 0
    assert second and int(second.group(1)) == 0 and int(second.group(2)) >= 1
    assert "the second process hit the cache" in proc.stdout
    assert list((tmp_path / "cache").glob("model_*_demo_rank_0_ws1/*/index.json"))


def test_demo_with_a_malformed_config_variable_says_so_in_one_line(tmp_path):
    """Before, the first demo process printed the ValueError's whole traceback, then 'the demo
    process failed with exit code 1' (found trying the backend as a new user, round 20)."""
    env = script_env(tmp_path / "unused", MAGI_COMPILE_AOT="maybe")
    proc = subprocess.run(
        [sys.executable, "-m", "magi_compiler.demo", "--cache-dir", str(tmp_path / "cache")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    choices = "['0', '1', 'false', 'no', 'off', 'on', 'true', 'yes']"
    expected = f"python -m magi_compiler.demo: MAGI_COMPILE_AOT='maybe' is not a boolean (use one of {choices})"
    assert proc.stderr.strip().splitlines() == [expected]
    assert not (tmp_path / "cache").exists(), "no process started"
