"""The precision benchmark's round-9 class, next to its near misses, on a real git repo reviewed
statically (`--suites none`):

- a handler that falls through and leaves a name unbound: the try's body alone binds `dev`, the
  handler only passes (its comment names the expected failure, which made it a guarded probe), and
  the statement after the try reads `dev`: on the first failing turn an `UnboundLocalError`, on a
  later one the previous turn's device;
- `except RuntimeError` in a revision none of whose files imports torch: no out-of-memory error can
  come from its code, and `RuntimeError` is the project's own answer (an overload lookup's "no
  match"); the same handler in a revision that imports torch stays reported;
- a package probe through an `importlib.metadata` listing (`packages_distributions()`), whose failure
  (`AttributeError` before Python 3.10) only selects the route that builds the same map; a listing
  followed by work that does not use its answer stays reported;
- a placeholder in display-only code: a helper called only from `__str__` returns `"{...}"` when
  the value cannot be read; the same helper also called by other code stays reported.

These are the classes of two misses and five false findings of the round-9 held-out set
(NVIDIA/warp, diffusers, onnxscript), now tuning material of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding

DEVICES = """
def preload(devices, to_device, load):
    for d in devices:
        try:
            dev = to_device(d)
        except Exception:
            # ignore unsupported devices like TPUs
            pass
        if dev.is_cuda:
            load(dev)


def preload_then_define(devices, to_device, load):
    for d in devices:
        try:
            dev = to_device(d)
        except Exception:
            # ignore unsupported devices like TPUs
            pass

        def describe():
            dev = "unknown"
            return dev

        if dev.is_cuda:
            load(dev, describe)


def preload_skipping(devices, to_device, load):
    for d in devices:
        try:
            dev = to_device(d)
        except Exception:
            # ignore unsupported devices like TPUs
            continue
        if dev.is_cuda:
            load(dev)


def preload_with_default(devices, to_device, load):
    for d in devices:
        dev = None
        try:
            dev = to_device(d)
        except Exception:
            # ignore unsupported devices like TPUs
            pass
        if dev is not None and dev.is_cuda:
            load(dev)


def preload_flagged(devices, to_device, load):
    for d in devices:
        try:
            dev = to_device(d)
            ok = True
        except Exception:
            # ignore unsupported devices like TPUs
            ok = False
        if ok:
            load(dev)
"""


LOOKUP = """
def resolve(overloads, args):
    try:
        return overloads.match(args)
    except RuntimeError:
        return None
"""


PACKAGES = """
import importlib.metadata as importlib_metadata

try:
    _package_map = importlib_metadata.packages_distributions()
except Exception:
    _package_map = None


def scan(refresh):
    try:
        found = importlib_metadata.packages_distributions()
        refresh()
    except Exception:
        found = None
    return found
"""


DISPLAY = """
def _short(value):
    try:
        data = value.numpy().tolist()
    except Exception:
        return "{...}"
    return str(data)


def _short_shared(value):
    try:
        data = value.numpy().tolist()
    except Exception:
        return "{...}"
    return str(data)


class Node:
    def __init__(self, value):
        self.value = value

    def __str__(self):
        return f"Node({_short(self.value)}, {_short_shared(self.value)})"

    def export(self):
        return _short_shared(self.value)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round9") / "r",
        {"pkg/__init__.py": ""},
        {"pkg/devices.py": DEVICES, "pkg/lookup.py": LOOKUP, "pkg/packages.py": PACKAGES, "pkg/display.py": DISPLAY},
    )


def test_a_fall_through_that_leaves_a_name_unbound_is_reported_even_as_a_probe(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/devices.py", "preload")["broad-except"]
    assert found.message_id == "broad-except.unbound"
    assert found.params["name"] == "dev" and found.params["line"] == 8
    assert "line 8 reads it after the try" in found.message


def test_a_name_bound_inside_a_later_def_is_that_function_s_own(review: list[Finding]) -> None:
    # `describe`'s local `dev` binds nothing in the loop: line 24 still reads the loop's `dev`
    found = findings_by_rule(review, "pkg/devices.py", "preload_then_define")["broad-except"]
    assert found.message_id == "broad-except.unbound"
    assert found.params["name"] == "dev" and found.params["line"] == 24


def test_near_misses_leave_the_turn_or_bind_a_default_or_a_flag(review: list[Finding]) -> None:
    # the handler leaves the turn, a default is bound before the try, the handler sets the flag the
    # code after the try tests: no unbound name, the rules of the other classes decide, as before
    # (a guarded probe passes, returns or assigns a constant: `continue` is none of those)
    assert findings_by_rule(review, "pkg/devices.py", "preload_skipping")["broad-except"].message_id == (
        "broad-except.swallows-one-operation"
    )
    for name in ("preload_with_default", "preload_flagged"):
        assert findings_by_rule(review, "pkg/devices.py", name) == {}, name


def test_runtime_error_is_the_projects_own_answer_where_torch_is_never_imported(
    review: list[Finding], tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert findings_by_rule(review, "pkg/lookup.py", "resolve") == {}
    # near miss: the same handler in a revision one of whose files imports torch
    with_torch = review_shapes(
        tmp_path_factory.mktemp("round9-torch") / "r",
        {"pkg/__init__.py": "import torch\n"},
        {"pkg/lookup.py": LOOKUP},
    )
    found = findings_by_rule(with_torch, "pkg/lookup.py", "resolve")["runtime-error-fallback"]
    assert found.message_id == "runtime-error-fallback.no-oom-reraise"


def test_a_package_listing_probe_falls_back_to_the_route_that_builds_the_same_map(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/packages.py", "") == {}
    # near miss: the try also runs work that does not use the listing's answer
    found = findings_by_rule(review, "pkg/packages.py", "scan")["broad-except"]
    assert found.message_id == "broad-except.swallows"


def test_a_placeholder_in_display_only_code(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/display.py", "_short") == {}
    # near miss: the same helper also feeds an export, where "{...}" would be taken for data
    found = findings_by_rule(review, "pkg/display.py", "_short_shared")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"
