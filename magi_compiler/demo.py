"""``python -m magi_compiler.demo [--cache-dir DIR]``: the persistent cache at work.

Runs a small compiled model (``reference_model.ReferenceMLP``) in a fresh Python process
twice against one cache directory (a temp dir unless ``--cache-dir`` is given) and prints,
per process, how many pieces Inductor compiled and how many came from the cache. The second
process should compile nothing. Exits non-zero if it did. Progress goes to stderr. A malformed
``MAGI_COMPILE_*`` value is one line on stderr and exit status 2, before any process starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence

from magi_compiler.config import CompileConfig
from magi_compiler.log import configure_cli

CHILD_FLAG = "--child"


def _child() -> None:
    import torch

    from magi_compiler import compilation_counter, magi_compile
    from magi_compiler.reference_model import ReferenceMLP

    torch.manual_seed(0)
    model = magi_compile(ReferenceMLP(), method_name="forward", model_tag="demo")
    with torch.no_grad():
        for batch in (4, 9, 17):
            model(torch.randn(batch, 16))
    print(json.dumps(dataclasses.asdict(compilation_counter)))


def _run_child(cache_dir: str) -> tuple[dict, float]:
    package_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, MAGI_COMPILE_CACHE_ROOT_DIR=cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "magi_compiler.demo", CHILD_FLAG],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"the demo process failed with exit code {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), elapsed


def main(argv: Sequence[str] | None = None) -> int:
    configure_cli()
    parser = argparse.ArgumentParser(prog="python -m magi_compiler.demo", description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", help="cache root to use (default: a fresh temp dir)")
    parser.add_argument(CHILD_FLAG, action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child()
        return 0
    try:
        CompileConfig.from_env()  # the processes below would fail on the same value, with a traceback
    except ValueError as exc:  # a malformed MAGI_COMPILE_* value, named in the message
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="magi_demo_") as scratch:
        cache_dir = os.path.abspath(args.cache_dir or scratch)
        print(f"cache directory: {cache_dir}", file=sys.stderr)
        results = []
        for run in (1, 2):
            print(f"starting process {run} ...", file=sys.stderr)
            counters, elapsed = _run_child(cache_dir)
            results.append(counters)
            print(
                f"process {run}: {counters['num_inductor_compiles']} Inductor compile(s), "
                f"{counters['num_cache_hits']} cache hit(s), {counters['num_cache_misses']} miss(es), "
                f"{counters['num_swapped_calls']} call(s) through the swapped bytecode, {elapsed:.1f} s"
            )
    if results[1]["num_inductor_compiles"] == 0 and results[1]["num_cache_hits"] > 0:
        print("the second process hit the cache: it compiled nothing")
        return 0
    print("the second process did NOT hit the cache")
    return 1


if __name__ == "__main__":
    sys.exit(main())
