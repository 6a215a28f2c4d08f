#!/usr/bin/env python3
"""Run the regression suites of `.reviewbot.yml` on one revision: JUnit XML, logs and `results.json`.

The entry point of `.github/workflows/gpu-regression.yml`; the body is `reviewbot.results.run`
(also used by the bot's `local` GPU dispatch mode). Runs from a checkout without installing the
project: the repository root is put first on `sys.path`.

    python ci/run_regression.py --out-dir OUT [--revision SHA] [--suites all|a,b] [--repo PATH]

Exit status: 0 all selected suites passed, 1 any failed / errored / timed out / not run, 2 bad arguments.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviewbot.results.run import main

if __name__ == "__main__":
    sys.exit(main())
