"""The precision benchmark's round-20 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`).

- Clean-up on an error path that raises right after (`broad_except._raising_handler_cleanup`): a
  catch-all that only passes, inside an `except` handler whose last statement is `raise`, is
  teardown like a `finally:` clause (NeMo-RL's placement groups removed before the `TimeoutError`).
  Near miss: the same clean-up in a handler that returns.
- A new gate in front of the base's code (`previous_behaviour.gate_before_base`): a try that can only
  end its function early, a handler that falls through, and the rest of the function as at the base
  (TVM's Metal tag registration, behind a new LLVM probe). Near misses: the rest changed, a handler
  that returns, a try that also does work.
- A unit boundary that ends its own object (`broad_except._closes_own_unit`): the traceback logged
  and `self.close()` (TVM's tracker closing one peer's connection). Near miss: the same without
  the traceback.
- A constant added to the collection the try fills (`data_fallback`): `results.append(0.0)` where
  the try appends the computed score is `broad-except.constant-data`. Near misses: a constant added
  to another collection, the error kept in the results.
- New code under an existing data fallback (`guarded_code`): an unchanged catch-all repeating a
  narrower handler's fallback is reported again when its try calls something it did not call.
  Near misses: only the handler's print changed, the same calls rearranged, a plain swallow over a
  changed try.
- A try that raises on purpose into its own catch-all (`own_raise`): `P3`
  `broad-except.raises-into-handler`, claiming `P0`. Near misses: no raise of its own, a substitute
  computed in the handler, a raise only in a nested function.
- A name a later try binds in its own loop before reading it is not left unbound by the earlier
  try (`fallthrough`, slime's address strategies). Near miss: the later loop reads it first.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

CLUSTER = """
import logging

logger = logging.getLogger(__name__)


def create(groups, remove, wait):
    try:
        wait(groups, timeout=180)
    except TimeoutError:
        for group in groups:
            try:
                remove(group)
            except Exception:
                pass
        raise TimeoutError("placement groups not ready")
    return groups


def create_or_none(groups, remove, wait):
    try:
        wait(groups, timeout=180)
    except TimeoutError:
        for group in groups:
            try:
                remove(group)
            except Exception:
                pass
        return None
    return groups
"""

SERVER = """
import logging

logger = logging.getLogger(__name__)


class Connection:
    def on_message(self, message):
        try:
            self.handle(message)
        except Exception:
            logger.warning("error handling a message from %s", self.peer, exc_info=True)
            self.close()
            return

    def on_message_untold(self, message):
        try:
            self.handle(message)
        except Exception:
            logger.warning("error handling a message from %s", self.peer)
            self.close()
            return
"""

VERIFY = """
def verify(check, preds, golds):
    results = []
    for pred, gold in zip(preds, golds):
        try:
            score = check(pred, gold)
            results.append(float(score))
        except Exception:
            results.append(0.0)
    return results


def verify_counting(check, preds, golds):
    results = []
    failed = []
    for i, (pred, gold) in enumerate(zip(preds, golds)):
        try:
            results.append(float(check(pred, gold)))
        except Exception:
            failed.append(0)
    return results, failed


def verify_keeping(check, preds, golds):
    results = []
    for pred, gold in zip(preds, golds):
        try:
            results.append(float(check(pred, gold)))
        except Exception as e:
            results.append({"error": repr(e)})
    return results
"""

FLAGS = """
import subprocess

import torch

try:
    if torch.jit.is_scripting():
        raise Exception()
    from torch.compiler import is_compiling
except Exception:
    # older torch without torch.compiler
    def is_compiling() -> bool:
        return False


def local_version():
    revision = ""
    try:
        status = subprocess.check_output(["git", "status", "--porcelain"]).decode()
        if status:
            print("dirty tree")
            assert False, "dirty tree"
        revision = "+" + subprocess.check_output(["git", "rev-parse", "HEAD"]).decode()
    except:
        revision = "+local"
    return revision


def no_raise_of_its_own(read):
    try:
        value = read()
    except Exception:
        value = None
    return value


def substitute(read, build):
    try:
        if read() is None:
            raise LookupError("nothing")
        return read()
    except Exception:
        return build()


def nested_raise(read):
    try:
        def inner():
            raise LookupError("nothing")

        value = read(inner)
    except Exception:
        value = None
    return value
"""

TAGS_BASE = """
from .registry import register


def register_tag(name, cpu):
    register(name, {"kind": "metal", "host": {"triple": "arm64-apple-macos", "cpu": cpu}})


def register_changed(name, cpu):
    register(name, {"kind": "metal", "host": {"triple": "arm64-apple-macos", "cpu": cpu}})


def register_returning(name, cpu):
    register(name, {"kind": "metal", "host": {"triple": "arm64-apple-macos", "cpu": cpu}})


def register_working(name, cpu):
    register(name, {"kind": "metal", "host": {"triple": "arm64-apple-macos", "cpu": cpu}})
"""

TAGS = """
from .registry import register

_TRIPLE = "arm64-apple-macos"


def register_tag(name, cpu):
    try:
        from .codegen import valid_cpu

        if not valid_cpu(cpu, _TRIPLE):
            return
    except Exception:
        pass  # no LLVM: register unconditionally
    register(name, {"kind": "metal", "host": {"triple": _TRIPLE, "cpu": cpu}})


def register_changed(name, cpu):
    try:
        from .codegen import valid_cpu

        if not valid_cpu(cpu, _TRIPLE):
            return
    except Exception:
        pass  # no LLVM: register unconditionally
    register(name, {"kind": "metal", "host": {"triple": _TRIPLE, "cpu": cpu, "features": "+fast"}})


def register_returning(name, cpu):
    try:
        from .codegen import valid_cpu

        if not valid_cpu(cpu, _TRIPLE):
            return
    except Exception:
        return  # no LLVM: skip it
    register(name, {"kind": "metal", "host": {"triple": _TRIPLE, "cpu": cpu}})


def register_working(name, cpu):
    try:
        from .codegen import prepare, valid_cpu

        prepare(cpu)
        if not valid_cpu(cpu, _TRIPLE):
            return
    except Exception:
        pass  # no LLVM: register unconditionally
    register(name, {"kind": "metal", "host": {"triple": _TRIPLE, "cpu": cpu}})
"""

SCORING_BASE = """
import asyncio


def score_batch(run, batch):
    try:
        scores = asyncio.run(run(batch))
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"error, all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores


def score_batch_printed(run, batch):
    try:
        scores = asyncio.run(run(batch))
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"error, all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores


def load_or_skip(load, path):
    try:
        state = load(path)
    except Exception:
        state = None
    return state

def score_rows(run, batch):
    try:
        scores = asyncio.run(asyncio.wait_for(run(batch), 300))
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"error, all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores
"""

SCORING = """
import asyncio


def run_scoring(run, batch):
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(run(batch))
    finally:
        loop.close()


def score_batch(run, batch):
    try:
        scores = run_scoring(run, batch)
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"[error] all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores


def score_batch_printed(run, batch):
    try:
        scores = asyncio.run(run(batch))
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"[error] all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores


def load_or_skip(load, path):
    try:
        state = load(path, strict=True)
    except Exception:
        state = None
    return state

def score_rows(run, batch):
    try:
        pending = run(batch)
        scores = asyncio.run(asyncio.wait_for(pending, timeout=600))
    except asyncio.TimeoutError:
        print("timed out, all 0")
        scores = [0.0 for _ in batch]
    except Exception as e:
        print(f"[error] all 0: {e}")
        scores = [0.0 for _ in batch]
    return scores
"""


ADDRESS = """
import socket


def resolve(family, target, host):
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((target, 80))
            ip = s.getsockname()[0]
            if not ip.startswith("127."):
                return ip
    except Exception:
        pass
    try:
        for info in socket.getaddrinfo(host, None, family=family):
            ip = info[4][0]
            if not ip.startswith("127."):
                return ip
    except OSError:
        pass
    return None


def resolve_stale(family, target, host):
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((target, 80))
            ip = s.getsockname()[0]
            if not ip.startswith("127."):
                return ip
    except Exception:
        pass
    try:
        for info in socket.getaddrinfo(host, None, family=family):
            if ip and info[4][0] != ip:
                ip = info[4][0]
                return ip
    except OSError:
        pass
    return None
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round20")
    base = {
        "pkg/__init__.py": "",
        "pkg/cluster.py": "",
        "pkg/server.py": "",
        "pkg/verify.py": "",
        "pkg/flags.py": "",
        "pkg/tags.py": TAGS_BASE,
        "pkg/scoring.py": SCORING_BASE,
        "pkg/address.py": "",
    }
    shapes = {
        "pkg/cluster.py": CLUSTER,
        "pkg/server.py": SERVER,
        "pkg/verify.py": VERIFY,
        "pkg/flags.py": FLAGS,
        "pkg/tags.py": TAGS,
        "pkg/scoring.py": SCORING,
        "pkg/address.py": ADDRESS,
    }
    return review_shapes(path, base, shapes)


def _broad(review: list[Finding], path: str, qualname: str) -> Finding | None:
    return findings_by_rule(review, path, qualname).get("broad-except")


def _shown(finding: Finding | None) -> tuple[str, Severity] | None:
    return None if finding is None else (finding.message_id, finding.severity)


def test_a_cleanup_before_the_raise_of_an_error_path_is_teardown(review: list[Finding]) -> None:
    assert _broad(review, "pkg/cluster.py", "create") is None
    assert _shown(_broad(review, "pkg/cluster.py", "create_or_none")) == (
        "broad-except.swallows-one-operation",
        Severity.P3,
    )


def test_a_boundary_that_logs_the_traceback_and_closes_its_own_object(review: list[Finding]) -> None:
    assert _broad(review, "pkg/server.py", "Connection.on_message") is None
    untold = _broad(review, "pkg/server.py", "Connection.on_message_untold")
    assert _shown(untold) == ("broad-except.swallows-one-operation", Severity.P3)


def test_a_constant_added_to_the_collection_the_try_fills_is_constant_data(review: list[Finding]) -> None:
    assert _shown(_broad(review, "pkg/verify.py", "verify")) == ("broad-except.constant-data", Severity.P2)
    counting = _broad(review, "pkg/verify.py", "verify_counting")
    assert counting is not None and counting.message_id != "broad-except.constant-data"
    keeping = _broad(review, "pkg/verify.py", "verify_keeping")
    assert keeping is None or keeping.message_id != "broad-except.constant-data"


@pytest.mark.parametrize(("qualname", "by_assert"), [("", False), ("local_version", True)])
def test_a_try_raising_into_its_own_catch_all_is_a_p3_claiming_p0(
    review: list[Finding], qualname: str, by_assert: bool
) -> None:
    finding = _broad(review, "pkg/flags.py", qualname)
    assert _shown(finding) == ("broad-except.raises-into-handler", Severity.P3)
    assert finding is not None and finding.evidence.claimed is Severity.P0
    assert ("python -O" in finding.why) is by_assert


@pytest.mark.parametrize(
    ("qualname", "expected"),
    [
        # round 26: a try around one operation is a P3 swallow, a wider one the P2
        ("no_raise_of_its_own", ("broad-except.swallows-one-operation", Severity.P3)),
        ("substitute", ("broad-except.swallows", Severity.P2)),
        ("nested_raise", ("broad-except.swallows-one-operation", Severity.P3)),
    ],
)
def test_near_misses_without_a_raise_into_the_handler_stay_the_swallow(
    review: list[Finding], qualname: str, expected: tuple[str, Severity]
) -> None:
    finding = _broad(review, "pkg/flags.py", qualname)
    assert _shown(finding) == expected


def test_a_new_gate_in_front_of_the_base_code_gives_nothing(review: list[Finding]) -> None:
    assert _broad(review, "pkg/tags.py", "register_tag") is None


@pytest.mark.parametrize(
    ("qualname", "severity"),
    [("register_changed", Severity.P3), ("register_returning", Severity.P3), ("register_working", Severity.P2)],
)
def test_near_misses_of_the_gate_stay_reported(review: list[Finding], qualname: str, severity: Severity) -> None:
    # round 26: the swallow of a try around one operation is a P3
    finding = _broad(review, "pkg/tags.py", qualname)
    assert finding is not None and finding.severity is severity


def test_an_unchanged_data_fallback_over_new_code_is_reported_again(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/scoring.py", "score_batch")
    assert _shown(finding) == ("broad-except.widens-fallback", Severity.P2)


def test_near_misses_only_the_report_changed_or_a_plain_swallow_over_a_changed_try(review: list[Finding]) -> None:
    assert _broad(review, "pkg/scoring.py", "score_batch_printed") is None
    assert _broad(review, "pkg/scoring.py", "load_or_skip") is None


def test_near_miss_the_same_calls_rearranged_are_no_new_code(review: list[Finding]) -> None:
    assert _broad(review, "pkg/scoring.py", "score_rows") is None


def test_a_name_a_later_try_binds_before_reading_it_is_not_left_unbound(review: list[Finding]) -> None:
    finding = _broad(review, "pkg/address.py", "resolve")
    assert finding is None or finding.message_id != "broad-except.unbound"
    stale = _broad(review, "pkg/address.py", "resolve_stale")
    assert stale is not None and stale.message_id == "broad-except.unbound"
    assert stale.params["name"] == "ip"
