"""The precision benchmark's round-21 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`).

- A handler that ends the process with the caught exception as its message
  (`broad_except._exits_with_error`): `sys.exit(f"{e}")` prints the error on stderr and exits with
  status 1, a report where the process ends (neural-speed's download scripts). Near misses: an
  integer status, the exit only under an `if`. An exit leaves the handler, so the name the try
  binds is not left unbound (`fallthrough`); near miss: a handler that prints and falls through.
- The base's code as the fallback of a bare `except:` (`previous_behaviour.base_code_catching_exit`):
  `P3` `broad-except.base-fallback-catches-exit`, the width (Ctrl+C takes the old route too), not
  the swallow (ktransformers' transpose from before the change). Near misses: `except Exception`
  with the same fallback (nothing, as since round 16), a bare handler whose fallback changed.
- A data fallback that stood at the base over the same try (`previous_behaviour.fallback_at_base`):
  a catch-all that gives the value the base's catch-all gave, now after a narrower handler split
  off or with a report added, is no new data fallback (axolotl's prompt-strategy loader; also
  `constant-data`). Near misses: another value than the base's, a try that changed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

SCRIPT = """
import sys

from .hub import download


def fetch(name, token):
    try:
        path = download(name, token=token)
    except Exception as e:
        if e.response.status_code == 401:
            print("a token is needed for", name)
        sys.exit(f"{e}")
    return path


def fetch_text(name, token):
    try:
        path = download(name, token=token)
    except Exception as e:
        sys.exit("download failed: " + str(e))
    return path


def fetch_status(name, token):
    try:
        path = download(name, token=token)
    except Exception as e:
        print("download failed")
        sys.exit(e.errno)
    return path


def fetch_printed(name, token):
    try:
        path = download(name, token=token)
    except Exception as e:
        print(f"download failed: {e}")
    return path


def fetch_sometimes(name, token):
    path = None
    try:
        path = download(name, token=token)
    except Exception as e:
        if e.response.status_code == 401:
            sys.exit(f"{e}")
    return path
"""

LINEAR_BASE = """
def load(layer, w):
    layer.w = w.to(layer.dtype).T


def load_narrow(layer, w):
    layer.w = w.to(layer.dtype).T


def load_changed(layer, w):
    layer.w = w.to(layer.dtype).T
"""

LINEAR = """
def load(layer, w):
    try:
        layer.w = w.to(layer.dtype).view(layer.rows, layer.cols).T
    except:
        layer.w = w.to(layer.dtype).T


def load_narrow(layer, w):
    try:
        layer.w = w.to(layer.dtype).view(layer.rows, layer.cols).T
    except Exception:
        layer.w = w.to(layer.dtype).T


def load_changed(layer, w):
    try:
        layer.w = w.to(layer.dtype).view(layer.rows, layer.cols).T
    except:
        layer.w = w.to(layer.dtype).T.contiguous()
"""

STRATEGIES_BASE = """
import importlib


def load(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        return mod.load(cfg)
    except Exception:
        return None


def load_other_value(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        return mod.load(cfg)
    except Exception:
        return {}


def load_changed_try(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        return mod.load(cfg)
    except Exception:
        return None


def rows(parse, text):
    try:
        return parse(text)
    except Exception:
        return []


def rows_other(parse, text):
    try:
        return parse(text)
    except Exception:
        return None
"""

STRATEGIES = """
import importlib
import logging

LOG = logging.getLogger(__name__)


def load(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        return mod.load(cfg)
    except ModuleNotFoundError:
        return None
    except Exception as exc:
        LOG.error(f"failed to load strategy {strategy}: {exc}")
        return None


def load_other_value(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        return mod.load(cfg)
    except ModuleNotFoundError:
        return None
    except Exception as exc:
        LOG.error(f"failed to load strategy {strategy}: {exc}")
        return None


def load_changed_try(strategy, cfg):
    try:
        mod = importlib.import_module(f".{strategy}", "pkg.strategies")
        mod.validate(cfg)
        return mod.load(cfg)
    except ModuleNotFoundError:
        return None
    except Exception as exc:
        LOG.error(f"failed to load strategy {strategy}: {exc}")
        return None


def rows(parse, text):
    try:
        return parse(text)
    except Exception as exc:
        LOG.warning("unparsable rows: %s", exc)
        return []


def rows_other(parse, text):
    try:
        return parse(text)
    except Exception as exc:
        LOG.warning("unparsable rows: %s", exc)
        return []
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round21")
    base = {
        "pkg/__init__.py": "",
        "pkg/hub.py": "def download(name, token=None):\n    return name\n",
        "pkg/script.py": "",
        "pkg/linear.py": LINEAR_BASE,
        "pkg/strategies.py": STRATEGIES_BASE,
    }
    shapes = {"pkg/script.py": SCRIPT, "pkg/linear.py": LINEAR, "pkg/strategies.py": STRATEGIES}
    return review_shapes(path, base, shapes)


def _broad(review: list[Finding], path: str, qualname: str) -> Finding | None:
    return findings_by_rule(review, path, qualname).get("broad-except")


def _shown(finding: Finding | None) -> tuple[str, Severity] | None:
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize("qualname", ["fetch", "fetch_text"])
def test_an_exit_with_the_error_as_its_message_reports_it(review: list[Finding], qualname: str) -> None:
    assert _broad(review, "pkg/script.py", qualname) is None


@pytest.mark.parametrize("qualname", ["fetch_status", "fetch_sometimes"])
def test_near_misses_an_integer_status_or_an_exit_under_an_if_stay_reported(
    review: list[Finding], qualname: str
) -> None:
    finding = _broad(review, "pkg/script.py", qualname)
    assert finding is not None and finding.severity is Severity.P3  # round 26: a try around one operation


def test_an_exit_leaves_the_handler_so_no_name_is_left_unbound(review: list[Finding]) -> None:
    status = _broad(review, "pkg/script.py", "fetch_status")
    assert status is not None and status.message_id != "broad-except.unbound"
    printed = _broad(review, "pkg/script.py", "fetch_printed")
    assert printed is not None and printed.message_id == "broad-except.unbound"


def test_the_base_code_under_a_bare_except_is_a_p3_for_its_width(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/linear.py", "load")
    assert _shown(finding) == ("broad-except.base-fallback-catches-exit", Severity.P3)
    assert finding is not None and "KeyboardInterrupt" in finding.message


def test_near_misses_of_the_bare_base_fallback(review: list[Finding]) -> None:
    assert _broad(review, "pkg/linear.py", "load_narrow") is None
    assert _shown(_broad(review, "pkg/linear.py", "load_changed")) == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def test_a_data_fallback_the_base_catch_all_gave_over_the_same_try_is_not_new(review: list[Finding]) -> None:
    assert _broad(review, "pkg/strategies.py", "load") is None
    assert _broad(review, "pkg/strategies.py", "rows") is None


@pytest.mark.parametrize("qualname", ["load_other_value", "load_changed_try"])
def test_near_misses_another_value_or_a_changed_try_still_widen(review: list[Finding], qualname: str) -> None:
    finding = _broad(review, "pkg/strategies.py", qualname)
    assert _shown(finding) == ("broad-except.widens-fallback", Severity.P2)


def test_near_miss_a_constant_batch_where_the_base_gave_none_is_constant_data(review: list[Finding]) -> None:
    assert _shown(_broad(review, "pkg/strategies.py", "rows_other")) == ("broad-except.constant-data", Severity.P2)
