"""A per-entry ``log_level`` applies to that entry's calls only (``magi_compiler.log``)."""

from __future__ import annotations

import logging
import threading

import pytest
import torch

from magi_compiler import magi_compile
from magi_compiler.log import PACKAGE_LOGGER, EntryLevelLogger, entry_log_level

MODULE_LOGGER = EntryLevelLogger(logging.getLogger(f"{PACKAGE_LOGGER}.test_entry_log_level"))


@pytest.fixture
def package_at_warning():
    """The package logger at WARNING for the test, its own level put back after."""
    package = logging.getLogger(PACKAGE_LOGGER)
    saved = package.level
    package.setLevel(logging.WARNING)
    yield package
    package.setLevel(saved)


def _entry(tmp_path, level: str | None):
    patch = {"backend": "eager", "cache_root_dir": str(tmp_path / "cache")}
    if level is not None:
        patch["log_level"] = level

    def double_plus_one(x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1

    return magi_compile(double_plus_one, config_patch=patch)


def _package_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name.startswith(f"{PACKAGE_LOGGER}.")]


def test_each_entry_logs_at_its_own_level_and_no_logger_level_changes(tmp_path, caplog, package_at_warning):
    root_level = logging.getLogger().level
    verbose, terse, plain = _entry(tmp_path, "DEBUG"), _entry(tmp_path, "INFO"), _entry(tmp_path, None)
    x = torch.randn(4, 3)

    caplog.clear()
    torch.testing.assert_close(verbose(x), x * 2 + 1)
    verbose_records = _package_records(caplog)
    assert any(r.levelno == logging.DEBUG for r in verbose_records), [r.getMessage() for r in verbose_records]
    # the records keep the name of the module that made them
    assert {r.name for r in verbose_records} >= {"magi_compiler.backend", "magi_compiler.passes.noop_elimination"}

    caplog.clear()
    terse(x)
    terse_records = _package_records(caplog)
    assert any(r.levelno == logging.INFO and "cache directory" in r.getMessage() for r in terse_records)
    assert [r.getMessage() for r in terse_records if r.levelno < logging.INFO] == []

    caplog.clear()
    plain(x)
    assert [r.getMessage() for r in _package_records(caplog) if r.levelno < logging.WARNING] == []

    assert package_at_warning.level == logging.WARNING
    assert logging.getLogger().level == root_level
    assert all(
        logger.level == logging.NOTSET
        for name, logger in logging.Logger.manager.loggerDict.items()
        if name.startswith(f"{PACKAGE_LOGGER}.") and isinstance(logger, logging.Logger)
    )


def test_an_unknown_level_name_is_a_value_error_naming_the_field(tmp_path):
    with pytest.raises(ValueError, match=r"log_level='LOUD' is not a logging level"):
        _entry(tmp_path, "loud")(torch.randn(4, 3))


def test_the_scope_is_per_thread_and_records_name_their_caller(caplog, package_at_warning):
    seen_in_thread: list[bool] = []
    with entry_log_level(logging.DEBUG):
        worker = threading.Thread(target=lambda: seen_in_thread.append(MODULE_LOGGER.isEnabledFor(logging.DEBUG)))
        worker.start()
        worker.join()
        MODULE_LOGGER.debug("inside %s", "the scope")
        with entry_log_level(logging.ERROR):
            MODULE_LOGGER.warning("silenced by the inner scope")
    MODULE_LOGGER.debug("outside the scope")
    assert seen_in_thread == [False]
    records = _package_records(caplog)
    assert [r.getMessage() for r in records] == ["inside the scope"]
    assert records[0].funcName == "test_the_scope_is_per_thread_and_records_name_their_caller"
    assert records[0].filename == "test_entry_log_level.py"
