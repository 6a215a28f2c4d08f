"""The precision benchmark's round-5 classes, each next to its near miss that still fires, on a real
git repo reviewed statically (`--suites none`):

- an expected failure named in words of inability ("can not be serialized", "could not be
  determined", "is not permitted") next to a one-operation guarded probe;
- a one-operation try whose answer is normalised by an `if` falling back to a constant is still one
  operation;
- "we never want to break user code" justifies a swallow (documented, not silent);
- a try that only reads an imported library's version, with a constant fallback;
- a narrow `except RuntimeError` around one call whose comment names the failure it expects is the
  author's other route for that case;
- a handler that hands the caught error on to its caller inside a tuple result.

These are the classes of the false findings of the round-4 held-out set (peft, hidet, flashinfer,
lightning-thunder), now in the tuning set of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding

WORDS = """
import warnings


def save_debug_copy(save, task, path):
    try:
        save(task, path)
    except Exception:
        # Some objects can not be serialized with pickle. Just ignore them.
        pass


def save_debug_copy_unexplained(save, task, path):
    try:
        save(task, path)
    except Exception:
        # Just ignore them.
        pass


def version_with_hash(version, commit_hash):
    try:
        git_hash = commit_hash("pkg")
        if git_hash is None:
            git_hash = "UNKNOWN"
    except Exception:
        # the hash could not be determined: the version still names the release
        warnings.warn("could not determine the commit hash")
        git_hash = "UNKNOWN"
    return version + "@" + git_hash


def version_with_computed_hash(version, commit_hash, describe):
    try:
        git_hash = commit_hash("pkg")
        if git_hash is None:
            git_hash = describe()
    except Exception:
        # the hash could not be determined: the version still names the release
        warnings.warn("could not determine the commit hash")
        git_hash = "UNKNOWN"
    return version + "@" + git_hash


def register_all(hooks, model):
    try:
        hooks.prepare(model)
        hooks.register(model)
    except Exception:
        # Broad exception: we never want to break user code because a hook failed
        pass


def register_all_unexplained(hooks, model):
    try:
        hooks.prepare(model)
        hooks.register(model)
    except Exception:
        # we want to see it
        pass
"""

VERSIONS = """
import cudnn
import pynvml


def supports_ragged_offsets():
    try:
        if cudnn.backend_version() < 92400:
            return False
        major, minor = map(int, cudnn.__version__.split(".")[:2])
        return (major, minor) >= (1, 25)
    except Exception:
        return False


def confidential_compute():
    try:
        pynvml.nvmlInit()
        major = int(pynvml.__version__.split(".")[0])
        return major >= 12
    except Exception:
        return False


class Builder:
    def __init__(self, installed_version):
        self.installed_version = installed_version
        try:
            self.version = self.installed_version("cann")
        except BaseException:
            self.version = None
"""

ALTERNATIVES = """
import torch


def grow(old, new):
    try:
        torch.utils.swap_tensors(old, new)
    except RuntimeError:
        # swap_tensors is not permitted when the tensor has weakrefs: rebind the storage instead
        old.data = new.data


def grow_anyway(old, new):
    try:
        torch.utils.swap_tensors(old, new)
    except RuntimeError:
        # fall back to rebinding
        old.data = new.data
"""

CANDIDATES = """
def measure(run, compiler):
    try:
        compiled, seconds = run(compiler)
    except Exception as e:
        return str(e), float("inf")
    return compiled, seconds


def measure_without_error(run, compiler):
    try:
        compiled, seconds = run(compiler)
    except Exception:
        return None, float("inf")
    return compiled, seconds


def describe(run, compiler):
    try:
        return run(compiler)
    except Exception as e:
        return str(e)
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    base = {"pkg/__init__.py": "", "pkg/base.py": "X = 1\n"}
    return review_shapes(
        tmp_path_factory.mktemp("round5") / "r",
        base,
        {
            "pkg/words.py": WORDS,
            "pkg/versions.py": VERSIONS,
            "pkg/alternatives.py": ALTERNATIVES,
            "pkg/candidates.py": CANDIDATES,
        },
    )


def test_an_expected_failure_named_in_words_of_inability(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/words.py", "save_debug_copy") == {}
    # near miss: a comment that names no failure
    found = findings_by_rule(review, "pkg/words.py", "save_debug_copy_unexplained")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_an_answer_normalised_to_a_constant_is_one_operation(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/words.py", "version_with_hash") == {}
    # near miss: a normalisation that calls something is a second operation
    found = findings_by_rule(review, "pkg/words.py", "version_with_computed_hash")["broad-except"]
    assert found.message_id == "broad-except.swallows"
    assert found.extra["wide_calls"] == 2


def test_never_wanting_to_break_user_code_is_a_reason(review: list[Finding]) -> None:
    documented = findings_by_rule(review, "pkg/words.py", "register_all")["broad-except"]
    assert documented.message_id == "broad-except.documented"
    assert "never want to break user code" in str(documented.extra["reason"])
    # near miss: a comment that gives no reason
    found = findings_by_rule(review, "pkg/words.py", "register_all_unexplained")["broad-except"]
    assert found.message_id == "broad-except.swallows"


def test_a_library_version_check_answering_no(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/versions.py", "supports_ragged_offsets") == {}
    # near misses: an initialisation besides the version read, and the repository's own version
    # lookup under a catch-all that takes Ctrl+C too
    found = findings_by_rule(review, "pkg/versions.py", "confidential_compute")["broad-except"]
    assert found.message_id == "broad-except.swallows"
    builder = findings_by_rule(review, "pkg/versions.py", "Builder.__init__")["broad-except"]
    assert builder.message_id == "broad-except.swallows-one-operation"


def test_a_runtime_error_alternative_for_a_named_failure(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/alternatives.py", "grow") == {}
    # near miss: "fall back" says what the handler does, not which failure it expects
    found = findings_by_rule(review, "pkg/alternatives.py", "grow_anyway")["runtime-error-fallback"]
    assert found.message_id == "runtime-error-fallback.no-oom-reraise"


def test_an_error_handed_on_in_a_tuple_result(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/candidates.py", "measure") == {}
    # near misses: the error dropped from the result, and an error text that looks like a result
    for name in ("measure_without_error", "describe"):
        found = findings_by_rule(review, "pkg/candidates.py", name)["broad-except"]
        assert found.message_id == "broad-except.swallows-one-operation", name
