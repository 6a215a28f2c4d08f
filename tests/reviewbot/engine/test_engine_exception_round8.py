"""The precision benchmark's round-8 classes, each next to its near miss that still fires, on a real
git repo reviewed statically (`--suites none`):

- a confined try: a body of builtins and standard-library calls on values at hand (a file probe
  through `open(...).read`, `asyncio.get_running_loop()`), where no code of the repository runs;
- a conversion through a helper whose call the handler returns, and a conversion written after the
  try (the handler prepares a message, the code after the try raises);
- an optional extension whose handler warns with the error unless it is an `ImportError` and binds
  stand-ins;
- alternatives tried in turn, the loop's exhaustion raising;
- a handler that rebuilds the caught exception from its class (`type(e)(msg)`), reported `P3`;
- a swallow the function's docstring states.

These are classes of the false findings and misses of the tuning set of
`reviewbot/bench_precision_corpus` (dateutil, depyf, pluggy, Click, fsspec, einops, Jinja,
pytorch_geometric, attrs, TensorRT)."""

from __future__ import annotations

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding

PROBES = """
import asyncio

from pkg.header import parse_header


def is_zone_file(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"TZif"
    except Exception:
        return False


def zone_header(path):
    try:
        with open(path, "rb") as f:
            return parse_header(f.read(4))
    except Exception:
        return None


def hashable_shape(shape):
    try:
        hash(shape)
        return shape
    except:
        return tuple(shape)


def run_callback(result):
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(result)
    return result


def run_coroutine(coro):
    try:
        return asyncio.run(coro)
    except RuntimeError:
        return None
"""

HEADER = """
def parse_header(data):
    assert len(data) == 4
    return data
"""

RENDER = """
class Environment:
    def handle_exception(self):
        raise RuntimeError("the template failed; traceback rewritten")

    def render(self, render_func):
        try:
            return render_func()
        except Exception:
            return self.handle_exception()

    def plain_render(self, render_func):
        return str(render_func)

    def render_or_plain(self, render_func):
        try:
            return render_func()
        except Exception:
            return self.plain_render(render_func)


def lookup(table, name, is_missing):
    func = table.get(name)
    if func is None:
        msg = f"no callable named {name!r}"
        if is_missing(name):
            try:
                name.fail()
            except Exception as e:
                msg = f"{msg} ({e}; did you forget to quote it?)"
        raise LookupError(msg)
    return func


def describe(table, name):
    func = table.get(name)
    if func is None:
        msg = f"no callable named {name!r}"
        try:
            name.fail()
        except Exception as e:
            msg = f"{msg} ({e})"
        return msg
    return func
"""

EXTENSION = """
import warnings

try:
    import fastext
    WITH_FASTEXT = True
    WITH_KERNEL = hasattr(fastext, "kernel")
except Exception as e:
    if not isinstance(e, ImportError):
        warnings.warn(f"An issue occurred while importing 'fastext'; disabling it: {e}")
    WITH_FASTEXT = False
    WITH_KERNEL = False

    class FastextStub:
        def __getattr__(self, key):
            raise ImportError(f"'{key}' requires 'fastext'")

    fastext = FastextStub()
"""

EXTENSION_SILENT = """
import warnings

try:
    import slowext
    WITH_SLOWEXT = True
except Exception as e:
    if isinstance(e, ImportError):
        warnings.warn(f"'slowext' is not installed: {e}")
    WITH_SLOWEXT = False
"""

VALIDATORS = """
def one_of(validators, value):
    for validator in validators:
        try:
            validator(value)
        except Exception:
            continue
        else:
            return
    msg = f"none of {validators!r} accepted {value!r}"
    raise ValueError(msg)


def any_accepts(validators, value):
    for validator in validators:
        try:
            validator(value)
        except Exception:
            continue
        else:
            return True
    return False


def check_members(check, items):
    for index, item in enumerate(items):
        try:
            check(item)
        except Exception as e:
            raise type(e)(f"item {index}: {e}").with_traceback(None) from None


def check_members_wrapped(check, items):
    for index, item in enumerate(items):
        try:
            check(item)
        except Exception as e:
            raise ValueError(f"item {index}: {e}") from e
"""

AUTOSAVE = """
def autosave(cache):
    \"\"\"Save the cache once at exit; swallows any exception so that a shutdown-time error
    never leaks out of the interpreter's exit.\"\"\"
    try:
        cache.save()
    except Exception:
        pass


def save_quietly(cache):
    \"\"\"Save the cache.\"\"\"
    try:
        cache.save()
    except Exception:
        pass


def save_strictly(cache):
    \"\"\"Save the cache; never swallows an error of the save.\"\"\"
    try:
        cache.save()
    except Exception:
        pass
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round8") / "r",
        {"pkg/__init__.py": "", "pkg/header.py": HEADER, "pkg/nn.py": TORCH_PROJECT},
        {
            "pkg/probes.py": PROBES,
            "pkg/render.py": RENDER,
            "pkg/extension.py": EXTENSION,
            "pkg/extension_silent.py": EXTENSION_SILENT,
            "pkg/validators.py": VALIDATORS,
            "pkg/autosave.py": AUTOSAVE,
        },
    )


def test_a_confined_try_runs_no_code_of_the_repository(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/probes.py", "is_zone_file") == {}
    assert findings_by_rule(review, "pkg/probes.py", "run_callback") == {}
    # a bare handler there still takes Ctrl+C: a note, not a blocker
    bare = findings_by_rule(review, "pkg/probes.py", "hashable_shape")["broad-except"]
    assert (bare.message_id, bare.severity.name) == ("broad-except.confined-catches-exit", "P3")
    # near misses: the try calls the repository's parser; asyncio.run is handed the caller's coroutine
    parsed = findings_by_rule(review, "pkg/probes.py", "zone_header")["broad-except"]
    assert parsed.message_id == "broad-except.swallows"
    assert "runtime-error-fallback" in findings_by_rule(review, "pkg/probes.py", "run_coroutine")


def test_a_conversion_through_a_returned_helper_or_after_the_try(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/render.py", "Environment.render") == {}
    assert findings_by_rule(review, "pkg/render.py", "lookup") == {}
    # near misses: the helper returns a substitute; the code after the try returns the message
    substitute = findings_by_rule(review, "pkg/render.py", "Environment.render_or_plain")["broad-except"]
    assert substitute.message_id == "broad-except.swallows-one-operation"
    returned = findings_by_rule(review, "pkg/render.py", "describe")["broad-except"]
    assert returned.message_id == "broad-except.swallows-one-operation"


def test_an_optional_extension_that_warns_with_every_error_but_its_absence(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/extension.py", "") == {}
    # near miss: only the absence is warned about, any other failure of the import is silent
    found = findings_by_rule(review, "pkg/extension_silent.py", "")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_alternatives_tried_in_turn_until_the_loop_raises(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/validators.py", "one_of") == {}
    # near miss: the exhausted loop answers False, every error of a validator reads as "invalid"
    found = findings_by_rule(review, "pkg/validators.py", "any_accepts")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_a_rebuilt_exception_is_a_note(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/validators.py", "check_members")["broad-except"]
    assert (found.message_id, found.severity.name) == ("broad-except.rebuilds", "P3")
    # near miss: a fixed wrapper type chained to the original reaches the caller whole
    assert findings_by_rule(review, "pkg/validators.py", "check_members_wrapped") == {}


def test_a_swallow_the_docstring_states(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/autosave.py", "autosave") == {}
    # near misses: the same handler under a docstring that says nothing of it, or that denies it
    for name in ("save_quietly", "save_strictly"):
        found = findings_by_rule(review, "pkg/autosave.py", name)["broad-except"]
        assert found.message_id == "broad-except.swallows-one-operation", name
