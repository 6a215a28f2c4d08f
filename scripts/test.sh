#!/usr/bin/env bash
# The project's test command: creates .venv if missing, installs the project with every
# extra (CPU torch pinned to 2.13.0), then runs the whole pytest suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0 -e '.[all]'
exec .venv/bin/python -m pytest "$@"
