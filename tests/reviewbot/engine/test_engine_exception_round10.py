"""The precision benchmark's round-10 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`):

- an `__eq__` that compares hash values only (`key-shares-artifacts.hash-equality`): a proxy that
  keeps `hash(fingerprint)` and compares only that makes two objects whose hashes collide equal, so
  as a cache key they share one entry (CPython's `hash(-1) == hash(-2)` shows it, below); the near
  misses compare the fingerprints themselves, compare the hash first as a quick rejection and then
  the fingerprints, or compare an integer id that no `hash()` produced;
- a catch-all converted into the "not supported here" signal (`NotImplementedError`, a class named
  `...Unsupported...`) that nothing in the revision catches: a dispatch layer or the library's users
  catch it to fall back, so every bug takes the fallback; the near miss converts into `ValueError`,
  which reaches the user chained;
- a guarded probe whose expected failure is stated in code: a one-call try under `except Exception`
  around a function of the same file that raises a named exception on purpose (`raise
  RuntimeError("not a TPU device")`), with a constant fallback; the near misses call a helper that
  raises nothing or only `Exception(...)`, or catch with a bare `except:` (Ctrl+C too);
- a reported fallback whose report is guarded by the process's rank (`if not dist.is_initialized()
  or dist.get_rank() == 0: print(ex)`, then `return None`): one process of many reports the error,
  as a plain `print(ex)` does; the near misses print only a message without the error on rank 0, or
  print the error only `if verbose:`.

The first is the class of the one miss of the round-10 held-out set (google/flax's `nn.jit`
fingerprint), the second that of keras' fused-LSTM catch-all in the tuning set (its catching caller
is not in the case's bundle), the third that of sglang-jax's tuned block-size lookup, the fourth that
of apex's FX-graph printer; all now tuning material of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

PROXY_BASE = """
import dataclasses


def fingerprint(module):
    return (type(module), tuple(sorted(vars(module).items())))


@dataclasses.dataclass(frozen=True)
class Proxy:
    module: object

    def __hash__(self):
        return hash(fingerprint(self.module))

    def __eq__(self, other):
        return isinstance(other, Proxy) and fingerprint(self.module) == fingerprint(other.module)
"""

PROXY_HEAD = """
import dataclasses


def fingerprint(module):
    return (type(module), tuple(sorted(vars(module).items())))


@dataclasses.dataclass(frozen=True)
class Proxy:
    module: object
    hash_key: int

    @classmethod
    def from_module(cls, module):
        key = hash(fingerprint(module))
        return cls(module, key)

    def __hash__(self):
        return self.hash_key

    def __eq__(self, other):
        return isinstance(other, Proxy) and self.hash_key == other.hash_key


class Digest:
    def __init__(self, value):
        self.value = value
        self._hash = hash(value)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, Digest):
            return NotImplemented
        return self._hash == other._hash


class Direct:
    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return type(self) is type(other) and hash(self.value) == hash(other.value)

    def __hash__(self):
        return hash(self.value)


@dataclasses.dataclass(frozen=True)
class QuickReject:
    module: object
    hash_key: int

    @classmethod
    def from_module(cls, module):
        return cls(module, hash_key=hash(fingerprint(module)))

    def __hash__(self):
        return self.hash_key

    def __eq__(self, other):
        return (
            isinstance(other, QuickReject)
            and self.hash_key == other.hash_key
            and fingerprint(self.module) == fingerprint(other.module)
        )


class Handle:
    _next = 0

    def __init__(self):
        self.ident = Handle._next
        Handle._next += 1

    def __hash__(self):
        return self.ident

    def __eq__(self, other):
        return isinstance(other, Handle) and self.ident == other.ident
"""

FUSED = """
from pkg import errors


def _cudnn_lstm(inputs, kernel):
    return inputs @ kernel


def fused_lstm(inputs, kernel):
    try:
        return _cudnn_lstm(inputs, kernel)
    except Exception:
        raise NotImplementedError("no fused kernel for these inputs")


def fused_gru(inputs, kernel):
    try:
        return _cudnn_lstm(inputs, kernel)
    except Exception as error:
        raise errors.BackendUnsupportedError("no fused kernel") from error


def checked(inputs, kernel):
    try:
        return _cudnn_lstm(inputs, kernel)
    except Exception as error:
        raise ValueError(f"bad inputs: {error}") from error
"""

ERRORS = """
class BackendUnsupportedError(Exception):
    pass
"""

TUNED = """
from pkg import backend

TUNED = {"TPU v5e": {(64, 8): 64}}


def _device_name():
    kind = backend.devices()[0].device_kind
    if "TPU" not in kind:
        raise RuntimeError("not a TPU device")
    return kind


def _device_name_loose():
    kind = backend.devices()[0].device_kind
    if "TPU" not in kind:
        raise Exception("not a TPU device")
    return kind


def _device_kind():
    return backend.devices()[0].device_kind


def tuned_size(tokens, topk):
    try:
        device = _device_name()
    except Exception:
        return None
    return TUNED.get(device, {}).get((tokens, topk))


def tuned_size_loose(tokens, topk):
    try:
        device = _device_name_loose()
    except Exception:
        return None
    return TUNED.get(device, {}).get((tokens, topk))


def tuned_size_any(tokens, topk):
    try:
        device = _device_kind()
    except Exception:
        return None
    return TUNED.get(device, {}).get((tokens, topk))


def tuned_size_bare(tokens, topk):
    try:
        device = _device_name()
    except:
        return None
    return TUNED.get(device, {}).get((tokens, topk))
"""

PRINTER = """
import torch


def print_graph(model, trace):
    try:
        graph = trace(model)
    except Exception as ex:
        if not torch.distributed.is_initialized() or torch.distributed.get_rank() == 0:
            print(ex)
            print("cannot trace the model")
        return None
    print(graph)


def print_graph_quietly(model, trace):
    try:
        graph = trace(model)
    except Exception:
        if torch.distributed.get_rank() == 0:
            print("cannot trace the model")
        return None
    print(graph)


def print_graph_verbose(model, trace, verbose):
    try:
        graph = trace(model)
    except Exception as ex:
        if verbose:
            print(ex)
        return None
    print(graph)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round10") / "r",
        {"pkg/__init__.py": "", "pkg/proxy.py": PROXY_BASE},
        {
            "pkg/proxy.py": PROXY_HEAD,
            "pkg/fused.py": FUSED,
            "pkg/errors.py": ERRORS,
            "pkg/tuned.py": TUNED,
            "pkg/printer.py": PRINTER,
        },
    )


def test_an_eq_that_compares_a_stored_hash_only_is_a_key_collision(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/proxy.py", "Proxy.__eq__")["key-shares-artifacts"]
    assert found.message_id == "key-shares-artifacts.hash-equality"
    assert found.params == {"class_name": "Proxy"}
    assert (found.line_start, found.line_end) == (21, 22)
    # a static pattern: claimed P0, shown as an unconfirmed P2
    assert found.severity == Severity.P2 and found.evidence.claimed == Severity.P0
    assert "compares hash values only" in found.message


def test_a_hash_set_in_init_or_compared_directly_is_the_same_class(review: list[Finding]) -> None:
    for qualname in ("Digest.__eq__", "Direct.__eq__"):
        found = findings_by_rule(review, "pkg/proxy.py", qualname)["key-shares-artifacts"]
        assert found.message_id == "key-shares-artifacts.hash-equality", qualname


def test_near_misses_compare_the_values_or_an_id_no_hash_produced(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/proxy.py", "QuickReject.__eq__") == {}
    assert findings_by_rule(review, "pkg/proxy.py", "Handle.__eq__") == {}
    assert {f.qualname for f in review if f.rule == "key-shares-artifacts"} == {
        "Proxy.__eq__",
        "Digest.__eq__",
        "Direct.__eq__",
    }


def test_the_base_version_that_compares_fingerprints_gives_nothing(tmp_path_factory: pytest.TempPathFactory) -> None:
    unchanged_eq = review_shapes(
        tmp_path_factory.mktemp("round10-base") / "r",
        {"pkg/__init__.py": ""},
        {"pkg/proxy.py": PROXY_BASE},
    )
    assert [f.location for f in unchanged_eq if f.rule == "key-shares-artifacts"] == []


def test_a_catch_all_converted_into_the_not_supported_signal(review: list[Finding]) -> None:
    for qualname, target in (("fused_lstm", "NotImplementedError"), ("fused_gru", "errors.BackendUnsupportedError")):
        found = findings_by_rule(review, "pkg/fused.py", qualname)["broad-except"]
        assert found.message_id == "broad-except.converts-to-signal", qualname
        assert found.params["target"] == target and found.severity == Severity.P2
        assert 'the "not supported here" signal callers catch to fall back' in found.message


def test_a_conversion_nothing_catches_into_another_type_reaches_the_user(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/fused.py", "checked") == {}


def test_a_probe_of_a_helper_that_raises_on_purpose_states_its_expected_failure(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/tuned.py", "tuned_size") == {}


def test_near_misses_a_helper_raising_nothing_or_only_exception_or_a_bare_except(review: list[Finding]) -> None:
    for qualname in ("tuned_size_loose", "tuned_size_any", "tuned_size_bare"):
        assert "broad-except" in findings_by_rule(review, "pkg/tuned.py", qualname), qualname


def test_a_fallback_reported_on_rank_zero_is_a_reported_fallback(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/printer.py", "print_graph") == {}


def test_near_misses_report_no_error_or_only_when_verbose(review: list[Finding]) -> None:
    for qualname in ("print_graph_quietly", "print_graph_verbose"):
        assert "broad-except" in findings_by_rule(review, "pkg/printer.py", qualname), qualname
