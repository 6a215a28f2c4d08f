"""The precision benchmark's round-25 classes from round 24's held-out set (helper h26tune24), next to
their near misses, on real git repos reviewed statically (`--suites none`).

- A check whose handler answers the value that lets a removal run (`fails_open.fails_open`) is `P2`
  `broad-except.fails-open`, narrow handlers included (optimum-neuron's lock clean-up). Near misses:
  the answer that skips the removal, a check guarding only a report, a check about the removed
  entry itself (an unreadable cache entry removed on purpose): nothing.
- A bare `except:` around a version shim (`version_shim.version_shim`) is `P3`
  `broad-except.shim-catches-exit`; under `except Exception` nothing (brevitas's `LinAlgError`). Near
  miss: a handler that binds only some of the imported names: `broad-except.swallows` as before.
- A handler that records the unit's failure as its status (`broad_except._failure_status`) is `P3`
  `broad-except.failure-status` (brevitas's crashed benchmark job). Near misses: a status without a
  failure word, a record nothing reads after the try: `broad-except.swallows`.
- A catch-all around a function that handles its own expected failures (`handled_callee`) is `P3`
  `broad-except.handled-callee` (optimum-neuron's counter reads). Near misses: a callee that opens a
  file outside its tries, a callee with a catch-all of its own: `broad-except.swallows`.
- A widened fallback that no caller in the file reads, the error printed (`data_fallback.discarded_return`),
  is `P3` `broad-except.widens-discarded` (optimum-neuron's demo `main`). Near misses: `sys.exit(main())`,
  a fixed message: `broad-except.widens-fallback`.
- A silent constant that picks the branch right after the try (`route_decision.decides_route`) is
  worded `broad-except.decides-route`, at the swallow's severity (optimum-neuron's `serve` and exporter).
  Near miss: a statement between the try and the `if`: `broad-except.swallows`.
- A bare `except:` around a call-free attribute read (`broad_except._object_lookup`) is `P3`
  `broad-except.lookup-catches-exit` (brevitas's injector lookup). Near miss: a confined try that
  calls builtins: `broad-except.confined-catches-exit` as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

CLEANUP = """
import shutil
import subprocess
from pathlib import Path


def _builder_running() -> bool:
    try:
        out = subprocess.run(["pgrep", "-c", "builder"], capture_output=True, text=True)
        return int(out.stdout.strip() or "0") > 0
    except (OSError, ValueError):
        return False


def _builder_running_closed() -> bool:
    try:
        out = subprocess.run(["pgrep", "-c", "builder"], capture_output=True, text=True)
        return int(out.stdout.strip() or "0") > 0
    except (OSError, ValueError):
        return True


def _worker_busy() -> bool:
    try:
        out = subprocess.run(["pgrep", "-c", "worker"], capture_output=True, text=True)
        return int(out.stdout.strip() or "0") > 0
    except (OSError, ValueError):
        return False


def clean(root: Path, remove_locks: bool = True) -> int:
    running = False
    if remove_locks:
        running = _builder_running()
    removed = 0
    for lock in root.glob("*.lock"):
        if remove_locks and not running:
            lock.unlink()
            removed += 1
    return removed


def clean_closed(root: Path) -> int:
    removed = 0
    for lock in root.glob("*.lock"):
        if not _builder_running_closed():
            lock.unlink()
            removed += 1
    return removed


def status() -> None:
    if not _worker_busy():
        print("idle")


def _entry_valid(entry: Path) -> bool:
    try:
        with open(entry / "index") as f:
            return int(f.read()) > 0
    except (OSError, ValueError):
        return False


def prune(root: Path) -> None:
    for entry in root.iterdir():
        if not _entry_valid(entry):
            shutil.rmtree(entry)
"""

SHIM = """
import torch

try:
    from torch.linalg import LinAlgError
except:
    LinAlgError = RuntimeError


def invert(matrix):
    try:
        return torch.linalg.cholesky(matrix)
    except LinAlgError:
        raise ValueError("not positive definite")
"""

SHIM_EXCEPTION = """
try:
    from torch.linalg import LinAlgError
except Exception:
    LinAlgError = RuntimeError
"""

SHIM_PARTLY = """
try:
    from torch.linalg import LinAlgError, cholesky
except:
    LinAlgError = RuntimeError
"""

RESULTS = """
import os


def load_results(path):
    return read_yaml(path)


def read_yaml(path):
    return {"status": "done", "path": path}


def collect(folder):
    rows = []
    for name in os.listdir(folder):
        try:
            results = load_results(os.path.join(folder, name, "results.yaml"))
        except Exception:
            results = {"status": "crashed", "elapsed": -1.0}
        if results["status"] == "crashed":
            rows.append({"name": name, "status": "crashed"})
        else:
            rows.append({"name": name, **results})
    return rows


def collect_unknown(folder):
    rows = []
    for name in os.listdir(folder):
        try:
            results = load_results(os.path.join(folder, name, "results.yaml"))
        except Exception:
            results = {"status": "unknown", "elapsed": -1.0}
        rows.append({"name": name, **results})
    return rows


def collect_unread(folder):
    for name in os.listdir(folder):
        try:
            results = load_results(os.path.join(folder, name, "results.yaml"))
        except Exception:
            results = {"status": "crashed", "elapsed": -1.0}
    return folder
"""

COUNTERS = """
from dataclasses import dataclass


@dataclass
class Counter:
    total: int | None
    peak: int | None


def read_value(path):
    with open(path) as f:
        return f.read().strip()


def read_counter(path):
    try:
        total = int(read_value(path + "/total"))
    except (FileNotFoundError, PermissionError, ValueError):
        total = None
    try:
        peak = int(read_value(path + "/peak"))
    except (FileNotFoundError, PermissionError, ValueError):
        peak = None
    return Counter(total=total, peak=peak)


def read_counter_opens(path):
    with open(path + "/name") as f:
        name = f.read()
    try:
        total = int(read_value(path + "/total"))
    except (FileNotFoundError, ValueError):
        total = None
    return Counter(total=total, peak=len(name))


def read_counter_wide(path):
    try:
        total = int(read_value(path + "/total"))
    except Exception:
        total = None
    return Counter(total=total, peak=None)


def read_all(paths):
    counters = {}
    for path in paths:
        try:
            counters[path] = read_counter(path)
        except Exception:
            continue
    return counters


def read_all_opens(paths):
    counters = {}
    for path in paths:
        try:
            counters[path] = read_counter_opens(path)
        except Exception:
            continue
    return counters


def read_all_wide(paths):
    counters = {}
    for path in paths:
        try:
            counters[path] = read_counter_wide(path)
        except Exception:
            continue
    return counters
"""

DEMO = """
import sys


def build_report():
    return {"total": 0}


def main():
    try:
        report = build_report()
        print(report)
        return report
    except RuntimeError as e:
        print(f"Error: {e}")
        return None
    except Exception as e:
        print(f"Unexpected error: {e}")
        return None


def main_status():
    try:
        report = build_report()
        print(report)
        return 0
    except RuntimeError as e:
        print(f"Error: {e}")
        return 0
    except Exception as e:
        print(f"Unexpected error: {e}")
        return 0


def main_fixed():
    try:
        report = build_report()
        print(report)
        return report
    except RuntimeError as e:
        print(f"Error: {e}")
        return None
    except Exception:
        print("Unexpected error")
        return None


if __name__ == "__main__":
    main()
    main_fixed()
    sys.exit(main_status())
"""

ROUTE = """
def load_config(model_id):
    return {"model": model_id}


def start(model_id, config):
    return (model_id, config)


def export_then_start(model_id):
    return (model_id, None)


def serve(model_id):
    try:
        config = load_config(model_id)
    except Exception:
        config = None
    if config is not None:
        return start(model_id, config)
    else:
        return export_then_start(model_id)


def serve_later(model_id):
    try:
        config = load_config(model_id)
    except Exception:
        config = None
    model_id = model_id.strip()
    if config is not None:
        return start(model_id, config)
    return export_then_start(model_id)
"""

LOOKUP = """
import os


def _state_impl(injector):
    try:
        impl = injector.state_impl
    except:
        impl = None
    return impl


def _world_size():
    try:
        value = int(os.environ["WORLD"])
    except:
        value = 1
    return value
"""

FILES = {
    "pkg/cleanup.py": CLEANUP,
    "pkg/shim.py": SHIM,
    "pkg/shim_exception.py": SHIM_EXCEPTION,
    "pkg/shim_partly.py": SHIM_PARTLY,
    "pkg/results.py": RESULTS,
    "pkg/counters.py": COUNTERS,
    "pkg/demo.py": DEMO,
    "pkg/route.py": ROUTE,
    "pkg/lookup.py": LOOKUP,
}


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round26_tune24")
    base = {"pkg/__init__.py": "", **{name: "" for name in FILES}}
    return review_shapes(path, base, FILES)


def _shown(review: list[Finding], path: str, qualname: str, rule: str = "broad-except") -> tuple[str, Severity] | None:
    finding = findings_by_rule(review, path, qualname).get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


def _module_level(review: list[Finding], path: str) -> list[tuple[str, Severity]]:
    return [(f.message_id, f.severity) for f in review if f.path == path]


def test_a_check_failing_open_before_a_removal_is_p2(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/cleanup.py", "_builder_running")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.fails-open", Severity.P2)
    assert finding.params["removal"] == "lock.unlink"


@pytest.mark.parametrize("qualname", ["_builder_running_closed", "_worker_busy", "_entry_valid"])
def test_a_check_failing_closed_guarding_a_report_or_asking_about_the_removed_thing_gives_nothing(
    review: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review, "pkg/cleanup.py", qualname) == {}


def test_a_bare_except_around_a_version_shim_is_p3(review: list[Finding]) -> None:
    assert _module_level(review, "pkg/shim.py") == [("broad-except.shim-catches-exit", Severity.P3)]


def test_a_version_shim_under_except_exception_gives_nothing(review: list[Finding]) -> None:
    assert _module_level(review, "pkg/shim_exception.py") == []


def test_a_shim_binding_only_some_names_stays_a_swallow(review: list[Finding]) -> None:
    assert _module_level(review, "pkg/shim_partly.py") == [("broad-except.swallows-one-operation", Severity.P3)]


def test_a_failure_status_read_after_the_try_is_p3(review: list[Finding]) -> None:
    assert _shown(review, "pkg/results.py", "collect") == ("broad-except.failure-status", Severity.P3)


@pytest.mark.parametrize("qualname", ["collect_unknown", "collect_unread"])
def test_near_misses_of_the_failure_status_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/results.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_catch_all_around_a_callee_handling_its_failures_is_p3(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/counters.py", "read_all")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.handled-callee", Severity.P3)
    assert finding.params["callee"] == "read_counter"


@pytest.mark.parametrize("qualname", ["read_all_opens", "read_all_wide"])
def test_near_misses_of_the_handled_callee_stay_swallows(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/counters.py", qualname) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_widened_fallback_nothing_reads_is_p3(review: list[Finding]) -> None:
    assert _shown(review, "pkg/demo.py", "main") == ("broad-except.widens-discarded", Severity.P3)


@pytest.mark.parametrize("qualname", ["main_status", "main_fixed"])
def test_near_misses_of_the_discarded_return_stay_widened(review: list[Finding], qualname: str) -> None:
    assert _shown(review, "pkg/demo.py", qualname) == ("broad-except.widens-fallback", Severity.P2)


def test_a_constant_picking_the_next_branch_is_worded_as_the_route(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/route.py", "serve")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.decides-route", Severity.P2)
    assert finding.params["name"] == "config"
    assert "decides the route" in finding.text("en").message


def test_a_statement_between_the_try_and_the_branch_stays_a_swallow(review: list[Finding]) -> None:
    assert _shown(review, "pkg/route.py", "serve_later") == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_bare_except_around_an_attribute_read_names_the_lookup(review: list[Finding]) -> None:
    finding = findings_by_rule(review, "pkg/lookup.py", "_state_impl")["broad-except"]
    assert (finding.message_id, finding.severity) == ("broad-except.lookup-catches-exit", Severity.P3)
    assert "injector.state_impl" in finding.text("en").message


def test_a_confined_try_calling_builtins_keeps_its_reason(review: list[Finding]) -> None:
    assert _shown(review, "pkg/lookup.py", "_world_size") == ("broad-except.confined-catches-exit", Severity.P3)
