"""The precision benchmark's round-22 detections (recall on the tuning set's misses), next to their
near misses, on a real git repo reviewed statically (`--suites none`).

- A silent message filter (`error_text.silent_filter`): a handler that re-raises every error but
  the one whose text it matches, and passes over that one without a word (no print, warning or log
  above debug), skipping or replacing what the try was to do: `P2` `*.silent-filter`, saying it is
  unconfirmed (axolotl's ReLoRA reset over tensors too large for `torch.quantile`; nunchaku's LoRA
  merge, truncated with debug logs only). Near misses: a warned kept branch, a kept branch that
  only binds a constant (lm-evaluation-harness's `batch_size = 1`), a matched text saying the
  effect is already in place ("already registered"), a kept branch that raises a clearer error
  (auto-round's dataset loader), a filter on a predicate call.
- A handler whose test looks for `CUDA` in the error's text (`error_text.names_device_error`) meets
  `runtime-error-fallback`'s torch gate in a revision none of whose files imports torch
  (TorchServe's model loader). Near miss: the same handler testing another text stays quiet there.
- An unchanged handler over a try that now binds a name the code after it reads
  (`guarded_code.new_name_fed`, the engine's `_kept`): `P2` `*.guards-new-binding`, off the changed
  lines (`in_diff` False), saying it is unconfirmed (depyf's `smallest_jump_in` under the catch-all
  around `get_jump_target`). Near misses: a new binding read nowhere after the try, a handler that
  leaves with `continue`, a try that only gained a call.
- A key function's loop that never reads its element and reads what its collection was computed
  from on every turn (`loop_element`): `P2` `key-shares-artifacts.loop-ignores-element`, saying it
  is unconfirmed (iree-turbine's `get_hash`, which hashes `kernel_fn` once per nested function).
  Near misses: a loop reading its element, a `range` count, a `_`-named variable, a function whose
  name says nothing of a key.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

FILTERS = """
import logging

LOG = logging.getLogger(__name__)


def reset_states(states, prune):
    n_total = 0
    for value in states:
        try:
            prune(value)
            n_total += value.numel()
        except RuntimeError as exc:
            if "input tensor is too large" in str(exc):
                pass
            else:
                raise exc
    return n_total


def merge(orig, extra, cat):
    try:
        merged = cat(orig, extra)
    except RuntimeError as e:
        if "Sizes of tensors must match" in str(e):
            LOG.debug("size mismatch: %s %s", orig.shape, extra.shape)
            merged = extra[:, : orig.shape[1]].clone()
        else:
            raise
    return merged


def merge_any(orig, extra, cat):
    try:
        merged = cat(orig, extra)
    except Exception as e:
        if not str(e).startswith("size mismatch"):
            raise
        merged = extra[:, : orig.shape[1]].clone()
    return merged


def reset_warned(states, prune):
    for value in states:
        try:
            prune(value)
        except RuntimeError as exc:
            if "input tensor is too large" in str(exc):
                LOG.warning("not reset: %s", exc)
            else:
                raise


def probe_batch(forward):
    try:
        batch_size = forward()
    except RuntimeError as e:
        if "No executable batch size found" in str(e):
            batch_size = 1
        else:
            raise
    return batch_size


def register(patterns, pattern):
    try:
        patterns.register(pattern)
    except RuntimeError as e:
        if "already registered" in str(e):
            pass
        else:
            raise


def load_scripts(load, name):
    try:
        data = load(name)
    except RuntimeError as error:
        if "Dataset scripts are no longer supported" in str(error):
            raise RuntimeError(f"{name} needs an older datasets release")
        else:
            raise error
    return data


def shrink(run, is_oom):
    try:
        run()
    except RuntimeError as e:
        if is_oom(e):
            pass
        else:
            raise
"""

LOADER_BASE = """
class Worker:
    def load_model(self, loader, name):
        try:
            service = loader.load(name)
            return service, "loaded", 200
        except MemoryError:
            return None, "System out of memory", 507

    def load_other(self, loader, name):
        try:
            service = loader.load(name)
            return service, "loaded", 200
        except MemoryError:
            return None, "System out of memory", 507
"""

LOADER = """
class Worker:
    def load_model(self, loader, name):
        try:
            service = loader.load(name)
            return service, "loaded", 200
        except MemoryError:
            return None, "System out of memory", 507
        except RuntimeError as ex:
            if "CUDA" in str(ex):
                return None, "System out of memory", 507
            else:
                return None, "Unknown exception", 500

    def load_other(self, loader, name):
        try:
            service = loader.load(name)
            return service, "loaded", 200
        except MemoryError:
            return None, "System out of memory", 507
        except RuntimeError as ex:
            if "no such model" in str(ex):
                return None, "Not found", 404
            else:
                return None, "Unknown exception", 500
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round22")
    base = {"pkg/__init__.py": TORCH_PROJECT, "pkg/filters.py": ""}
    return review_shapes(path, base, {"pkg/filters.py": FILTERS})


@pytest.fixture(scope="module")
def review_without_torch(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round22_no_torch")
    base = {"ts/__init__.py": "", "ts/worker.py": LOADER_BASE}
    return review_shapes(path, base, {"ts/worker.py": LOADER})


def _shown(findings: dict[str, Finding], rule: str) -> tuple[str, Severity] | None:
    finding = findings.get(rule)
    return None if finding is None else (finding.message_id, finding.severity)


@pytest.mark.parametrize(
    ("qualname", "rule", "text"),
    [
        ("reset_states", "runtime-error-fallback", "input tensor is too large"),
        ("merge", "runtime-error-fallback", "Sizes of tensors must match"),
        ("merge_any", "broad-except", "size mismatch"),
    ],
)
def test_a_silent_message_filter_is_an_unconfirmed_p2(
    review: list[Finding], qualname: str, rule: str, text: str
) -> None:
    found = findings_by_rule(review, "pkg/filters.py", qualname)
    assert _shown(found, rule) == (f"{rule}.silent-filter", Severity.P2)
    message = found[rule].message
    assert text in message and "unconfirmed" in message


@pytest.mark.parametrize("qualname", ["reset_warned", "probe_batch", "register", "load_scripts", "shrink"])
def test_near_misses_a_report_a_constant_an_idempotent_step_a_conversion_or_a_predicate_stay_quiet(
    review: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review, "pkg/filters.py", qualname) == {}


def test_a_handler_looking_for_cuda_in_the_text_meets_the_torch_gate(review_without_torch: list[Finding]) -> None:
    found = findings_by_rule(review_without_torch, "ts/worker.py", "Worker.load_model")
    assert _shown(found, "runtime-error-fallback") == ("runtime-error-fallback.no-oom-reraise", Severity.P2)


def test_near_miss_another_text_in_a_revision_without_torch_stays_quiet(review_without_torch: list[Finding]) -> None:
    assert findings_by_rule(review_without_torch, "ts/worker.py", "Worker.load_other") == {}


JUMPS_BASE = """
def dead_ranges(instructions, start, end, target_of):
    has_jump_in = False
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
        except Exception:
            pass
    return has_jump_in


def dead_ranges_unread(instructions, start, end, target_of):
    has_jump_in = False
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
        except Exception:
            pass
    return has_jump_in


def dead_ranges_leaving(instructions, start, end, target_of):
    has_jump_in = False
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
        except Exception:
            continue
    return has_jump_in


def dead_ranges_called(instructions, start, end, target_of, seen):
    has_jump_in = False
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
        except Exception:
            pass
    return has_jump_in


def scaled(values, scale):
    total = 0.0
    try:
        factor = scale(values)
    except RuntimeError:
        factor = 1.0
    return [v * factor for v in values], total
"""


JUMPS = """
def dead_ranges(instructions, start, end, target_of):
    has_jump_in = False
    smallest = end
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
                smallest = min(smallest, ii)
        except Exception:
            pass
    return has_jump_in, smallest


def dead_ranges_unread(instructions, start, end, target_of):
    has_jump_in = False
    smallest = end
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
                smallest = min(smallest, ii)
        except Exception:
            pass
    return has_jump_in


def dead_ranges_leaving(instructions, start, end, target_of):
    has_jump_in = False
    smallest = end
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
                smallest = min(smallest, ii)
        except Exception:
            continue
    return has_jump_in, smallest


def dead_ranges_called(instructions, start, end, target_of, seen):
    has_jump_in = False
    for ii, inst in enumerate(instructions):
        try:
            location = target_of(inst)
            if location >= start and location < end:
                has_jump_in = True
                seen.add(ii)
        except Exception:
            pass
    return has_jump_in


def scaled(values, scale):
    total = 0.0
    try:
        factor = scale(values)
        total = sum(values) * factor
    except RuntimeError:
        factor = 1.0
    return [v * factor for v in values], total
"""


@pytest.fixture(scope="module")
def review_jumps(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round22_jumps")
    base = {"pkg/__init__.py": TORCH_PROJECT, "pkg/jumps.py": JUMPS_BASE}
    return review_shapes(path, base, {"pkg/jumps.py": JUMPS})


@pytest.mark.parametrize(
    ("qualname", "rule", "name"),
    [("dead_ranges", "broad-except", "smallest"), ("scaled", "runtime-error-fallback", "total")],
)
def test_an_unchanged_handler_whose_try_now_binds_a_name_read_after_it_is_an_unconfirmed_p2(
    review_jumps: list[Finding], qualname: str, rule: str, name: str
) -> None:
    found = findings_by_rule(review_jumps, "pkg/jumps.py", qualname)
    assert _shown(found, rule) == (f"{rule}.guards-new-binding", Severity.P2)
    finding = found[rule]
    assert not finding.in_diff
    assert f"`{name}`" in finding.message and "unconfirmed" in finding.message


@pytest.mark.parametrize("qualname", ["dead_ranges_unread", "dead_ranges_leaving", "dead_ranges_called"])
def test_near_misses_unread_a_leaving_handler_or_only_a_new_call_stay_quiet(
    review_jumps: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review_jumps, "pkg/jumps.py", qualname) == {}


KEYS = """
import hashlib
import inspect

from .walk import nested_functions, parts


def get_hash(kernel_fn, options):
    fns = nested_functions(kernel_fn)
    key = []
    for fn in fns:
        key += [inspect.getsource(kernel_fn), options]
    return hashlib.sha256(repr(key).encode()).hexdigest()


def cache_key(config):
    digest = hashlib.sha256()
    for part in parts(config):
        digest.update(repr(config).encode())
    return digest.hexdigest()


def get_hash_each(kernel_fn, options):
    fns = nested_functions(kernel_fn)
    key = []
    for fn in fns:
        key += [inspect.getsource(fn), options]
    return hashlib.sha256(repr(key).encode()).hexdigest()


def get_hash_rounds(kernel_fn, rounds):
    digest = hashlib.sha256()
    for i in range(rounds):
        digest.update(inspect.getsource(kernel_fn).encode())
    return digest.hexdigest()


def get_hash_counted(kernel_fn):
    fns = nested_functions(kernel_fn)
    digest = hashlib.sha256()
    for _fn in fns:
        digest.update(inspect.getsource(kernel_fn).encode())
    return digest.hexdigest()


def collect_sources(kernel_fn):
    fns = nested_functions(kernel_fn)
    sources = []
    for fn in fns:
        sources.append(inspect.getsource(kernel_fn))
    return sources
"""


@pytest.fixture(scope="module")
def review_keys(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round22_keys")
    base = {
        "pkg/__init__.py": "",
        "pkg/walk.py": "def nested_functions(fn):\n    return [fn]\n\n\ndef parts(c):\n    return [c]\n",
    }
    return review_shapes(path, base, {"pkg/keys.py": KEYS})


@pytest.mark.parametrize(
    ("qualname", "element", "instead"), [("get_hash", "fn", "kernel_fn"), ("cache_key", "part", "config")]
)
def test_a_key_loop_that_never_reads_its_element_is_an_unconfirmed_p2(
    review_keys: list[Finding], qualname: str, element: str, instead: str
) -> None:
    found = findings_by_rule(review_keys, "pkg/keys.py", qualname)
    assert _shown(found, "key-shares-artifacts") == ("key-shares-artifacts.loop-ignores-element", Severity.P2)
    message = found["key-shares-artifacts"].message
    assert f"`{element}`" in message and f"`{instead}`" in message and "unconfirmed" in message


@pytest.mark.parametrize("qualname", ["get_hash_each", "get_hash_rounds", "get_hash_counted", "collect_sources"])
def test_near_misses_the_element_read_a_count_an_underscore_or_no_key_stay_quiet(
    review_keys: list[Finding], qualname: str
) -> None:
    assert findings_by_rule(review_keys, "pkg/keys.py", qualname) == {}
