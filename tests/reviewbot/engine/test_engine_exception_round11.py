"""The precision benchmark's round-11 classes, next to their near misses, on a real git repo reviewed
statically (`--suites none`):

- cleanup and re-raise: a bare `except:` whose handler cleans up and ends with `raise` passes every
  exception on, `KeyboardInterrupt` included (nothing; until round 11 a P3 "catches Ctrl+C"); the near
  miss converts into `ValueError` and stays the P3 (Ctrl+C becomes a `ValueError`);
- a reported fallback whose handler first prepares its report (`arch = arch_name(arch)` read by the
  warning that names the error, then `return False`): nothing, as without the preparation; the near
  miss falls through, so the rebound name reaches the code after the try (still reported);
- a failure that can only cost a warning: a function that hands back nothing, whose try only
  computes (imports, local names) and whose code after the try only warns on those values: P3
  `broad-except.skips-diagnostics` instead of the P2 swallow; the near misses set a module global
  after the try (state the program goes on with) or return the computed value (a substitute);
- a helper whose answer only words an error raised anyway: `wheel_tag()` returns `None` on any
  error and is called only where every way on raises (`check_gui` ends in `raise` with no `return`
  after the call): nothing, as for a display placeholder; the near misses call the same kind of
  helper also from code that goes on (`install_hint`), or from a function that returns after the
  call (`gui_status`);
- a confined try over a file object's values: `line = f.readline()` then `line.split()` is the
  standard library's code too (the values of a library value's methods, to a fixed point): nothing
  under `except Exception`, P3 `broad-except.confined-catches-exit` under a bare `except:`; the near
  miss hands the line to a function of the file (the repository's code runs: still reported).

The first is the class of iree-turbine's invoke cleanup, the second of taichi's architecture probe,
the third of iree-turbine's version-mismatch warning, the fourth of taichi's GGUI diagnosis, the
fifth of NVIDIA/Fuser's `/proc/meminfo` reader: round 11's held-out set, now tuning material of `reviewbot/bench_precision_corpus`."""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

INVOKE = """
def invoke(context, function, args, fence, is_async):
    try:
        context.invoke(function, args)
    except:
        if is_async:
            fence.signal()
        raise


def invoke_converting(context, function, args, fence, is_async):
    try:
        context.invoke(function, args)
    except:
        if is_async:
            fence.signal()
        raise ValueError("invocation failed")
"""

ARCH = """
def arch_name(arch):
    return str(arch).upper()


def warn(message):
    print(message)


def is_supported(table, arch):
    probe = table.get(arch, lambda: False)
    try:
        return probe()
    except Exception as e:
        arch = arch_name(arch)
        warn(f"{e.__class__.__name__}: '{e}' occurred when detecting {arch}")
        return False


def is_supported_falls_through(table, arch):
    probe = table.get(arch, lambda: False)
    supported = False
    try:
        supported = probe()
    except Exception as e:
        arch = arch_name(arch)
        warn(f"{e.__class__.__name__}: '{e}' occurred when detecting {arch}")
    table[arch] = supported
    return supported
"""

VERSIONS = """
import warnings

_warned = False
COMPATIBLE = True


def warn_if_too_old():
    global _warned
    if _warned:
        return
    _warned = True
    try:
        from importlib.metadata import version

        compiler = version("compiler-pkg")
        runtime = version("runtime-pkg")
    except:
        return
    if compiler != runtime:
        warnings.warn(f"compiler and runtime versions mismatch: {compiler} and {runtime}")


def check_versions():
    global COMPATIBLE
    try:
        from importlib.metadata import version

        compiler = version("compiler-pkg")
        runtime = version("runtime-pkg")
    except:
        return
    COMPATIBLE = compiler == runtime
    if not COMPATIBLE:
        warnings.warn(f"compiler and runtime versions mismatch: {compiler} and {runtime}")


def compiler_version():
    try:
        from importlib.metadata import version

        compiler = version("compiler-pkg")
    except:
        return
    if not compiler:
        warnings.warn("no compiler version")
    return compiler
"""

GUI = """
class GuiUnavailable(Exception):
    pass


def wheel_tag(module):
    try:
        return read_tag(module.__path__[0])
    except Exception:
        return None


def wheel_tag_too(module):
    try:
        return read_tag(module.__path__[0])
    except Exception:
        return None


def read_tag(path):
    with open(path + "/WHEEL") as f:
        return f.read()


def check_gui(module, available):
    if available:
        return
    tag = wheel_tag(module)
    if tag and "manylinux2014" in tag:
        raise GuiUnavailable("a restricted build: upgrade the OS")
    raise GuiUnavailable("the GUI is not available")


def install_hint(module):
    tag = wheel_tag_too(module)
    return tag or "unknown"


def check_gui_too(module):
    tag = wheel_tag_too(module)
    raise GuiUnavailable(f"the GUI is not available ({tag})")


def gui_status(module, available):
    tag = slow_tag(module)
    if available:
        return "ok"
    raise GuiUnavailable(f"the GUI is not available ({tag})")


def slow_tag(module):
    try:
        return read_tag(module.__path__[0])
    except Exception:
        return None
"""

MEMINFO = """
def available_gb():
    try:
        with open("/proc/meminfo") as f:
            while True:
                line = f.readline()
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) / 1024 / 1024
                if not line:
                    break
    except:
        pass
    return 0


def available_gb_exception():
    try:
        with open("/proc/meminfo") as f:
            line = f.readline()
            return int(line.split()[1]) / 1024 / 1024
    except Exception:
        return 0


def parse(line):
    return int(line.split()[1]) / 1024 / 1024


def available_gb_parsed():
    try:
        with open("/proc/meminfo") as f:
            line = f.readline()
            return parse(line)
    except Exception:
        return 0
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("round11") / "r",
        {"pkg/__init__.py": ""},
        {
            "pkg/invoke.py": INVOKE,
            "pkg/arch.py": ARCH,
            "pkg/versions.py": VERSIONS,
            "pkg/meminfo.py": MEMINFO,
            "pkg/gui.py": GUI,
        },
    )


def test_a_bare_except_that_cleans_up_and_re_raises_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/invoke.py", "invoke") == {}


def test_near_miss_a_bare_except_converting_still_takes_ctrl_c(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/invoke.py", "invoke_converting")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.bare-reraises", Severity.P3)


def test_a_reported_fallback_that_prepares_its_report_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/arch.py", "is_supported") == {}


def test_near_miss_a_prepared_name_that_reaches_the_code_after_the_try(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/arch.py", "is_supported_falls_through")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation" and found.severity == Severity.P3


def test_a_failure_that_can_only_cost_a_warning_is_a_p3(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/versions.py", "warn_if_too_old")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.skips-diagnostics", Severity.P3)
    assert found.params["where"] == "warn_if_too_old"
    assert "can only skip the warnings of `warn_if_too_old`" in found.message


def test_near_misses_state_set_after_the_try_or_a_value_handed_back(review: list[Finding]) -> None:
    for qualname in ("check_versions", "compiler_version"):
        found = findings_by_rule(review, "pkg/versions.py", qualname)["broad-except"]
        assert (found.message_id, found.severity) == ("broad-except.swallows", Severity.P2), qualname


def test_a_helper_whose_answer_only_words_an_error_raised_anyway_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/gui.py", "wheel_tag") == {}


def test_near_misses_a_helper_also_used_where_the_code_goes_on(review: list[Finding]) -> None:
    for qualname in ("wheel_tag_too", "slow_tag"):
        found = findings_by_rule(review, "pkg/gui.py", qualname)["broad-except"]
        assert found.message_id == "broad-except.swallows-one-operation" and found.severity == Severity.P3, qualname


def test_a_confined_read_of_a_file_objects_lines(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/meminfo.py", "available_gb")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.confined-catches-exit", Severity.P3)
    assert findings_by_rule(review, "pkg/meminfo.py", "available_gb_exception") == {}


def test_near_miss_a_line_handed_to_the_repositorys_code(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/meminfo.py", "available_gb_parsed")["broad-except"]
    assert found.severity == Severity.P2
