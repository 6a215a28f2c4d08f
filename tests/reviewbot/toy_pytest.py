"""The pytest options of the toy projects' suites that run `python -m pytest`."""

# Each pytest run otherwise first imports every pytest plugin of this venv (hypothesis, benchmark, anyio,
# timeout: ~1 s a run on the 2-core machine), and none of the toy suites uses one. The sandbox passes no
# PYTEST_* variable to a suite (reviewbot.sandbox.child_env), so the suite's command line has to say it.
NO_PLUGINS = "-p no:hypothesispytest -p no:benchmark -p no:anyio -p no:timeout"
