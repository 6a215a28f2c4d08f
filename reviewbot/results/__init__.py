"""Regression results: the versioned `results.json` schema, JUnit XML conversion, environment probe.

Standard library only (plus torch, lazily, in `environment`): `ci/run_regression.py` imports this
package on GPU machines that lack the bot's extras.
"""

from reviewbot.results.schema import (
    SCHEMA_VERSION,
    SUITE_STATUSES,
    TEST_STATUSES,
    BenchFigure,
    Environment,
    RegressionResults,
    ResultsFormatError,
    SuiteResult,
    TestResult,
    is_gpu_only_skip,
)

__all__ = [
    "SCHEMA_VERSION",
    "SUITE_STATUSES",
    "TEST_STATUSES",
    "BenchFigure",
    "Environment",
    "RegressionResults",
    "ResultsFormatError",
    "SuiteResult",
    "TestResult",
    "is_gpu_only_skip",
]
