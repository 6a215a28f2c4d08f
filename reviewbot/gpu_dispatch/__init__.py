"""The bot's GPU dispatch modes (issue 8), registered with the service on import of this package.

- `local` (`local.py`): the worker runs `ci/run_regression.py`'s body in a scrubbed child process
  and reads back its `results.json`.
- `actions` (`actions.py`): the worker dispatches `.github/workflows/gpu-regression.yml` and reads
  `results.json` from the run's artifact when the `workflow_run` webhook says it completed.
`outcome.py` turns a `results.json` into the service's `GpuOutcome` for both; `artifacts.py`
fetches it from a workflow run; `store.py` keeps the dispatched runs.

`reviewbot serve` and every worker import this package at start (the service's `PLUGIN_PACKAGES`).
"""

from reviewbot.gpu_dispatch import actions, local

__all__ = ["actions", "local"]
