"""silent-gate on a real git repo: a new condition skipping work a config flag asked for."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import Severity

BASE = """
import logging

logger = logging.getLogger(__name__)


def overlap_pass(graph, config):
    if not config.fsdp.overlap:
        return graph
    return reorder(graph)


def old_gate(nodes, config):
    if not config.enable_split:
        return nodes
    if len(nodes) < 2:
        return nodes
    return split(nodes)


def reorder(graph):
    return graph


def split(nodes):
    return nodes
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("gate") / "r")
    repo.commit({"pkg/passes.py": BASE}, "base")
    repo.branch("silent")
    repo.commit(
        {
            "pkg/passes.py": sub(
                BASE,
                "        return graph\n    return reorder(graph)",
                "        return graph\n    if len(graph) < 3:\n        return graph\n    return reorder(graph)",
            )
        },
        "skip small graphs",
    )
    repo.branch("or-gate", "main")
    repo.commit(
        {
            "pkg/passes.py": sub(
                BASE, "    if not config.fsdp.overlap:\n", "    if not config.fsdp.overlap or graph is None:\n"
            )
        },
        "skip none graphs",
    )
    repo.branch("logged", "main")
    repo.commit(
        {
            "pkg/passes.py": sub(
                BASE,
                "        return graph\n    return reorder(graph)",
                "        return graph\n    if len(graph) < 3:\n        logger.info('overlap skipped: graph too small')\n        return graph\n"
                "    return reorder(graph)",
            )
        },
        "skip small graphs, logged",
    )
    repo.branch("flag-only", "main")
    repo.commit(
        {
            "pkg/passes.py": BASE
            + """

def gated(graph, config):
    if not config.enable_gate:
        return graph
    return reorder(graph)
"""
        },
        "flag check alone",
    )
    repo.branch("near-misses", "main")
    repo.commit(
        {
            "pkg/passes.py": BASE
            + """

def applies(tag):
    if tag is None:
        logger.warning("overlap skipped: no model tag")
        return False
    return True


def helper_logs(graph, config, tag):
    if not config.enable_overlap or not applies(tag):
        return []
    return reorder(graph)


def own_comment(login, settings):
    if settings.bot_login and login == settings.bot_login:
        return "ignored-own"
    return "handled"


def capped(finding, policy):
    # `UNCONFIRMED_CAP` holds "conf" but is no configuration object
    if finding.kind != "pattern" or finding.rank >= policy.UNCONFIRMED_CAP.rank:
        return finding
    return policy.cap(finding)


def computed_result(items, settings):
    if not settings.enabled:
        return None
    for item in items:
        if item in settings.prefixes:
            return item.lower(), len(item)
    return None
"""
        },
        "near misses",
    )
    repo.branch("configured-choice", "main")
    repo.commit(
        {
            "pkg/passes.py": BASE
            + """

def compile_mode(config, platform):
    # graphs do not mix with the step cache; the flag picks the mode
    if config.use_step_cache or platform.on_rdna4():
        return "default"
    return "reduce-overhead"


def quantize_plan(config, settings, component, attrs):
    if not (config.use_fp4 or config.use_fp8):
        return None
    fp4_modules = set(settings.fp4_module_list or [])
    paths = [f"{component}.{attr}" for attr in attrs]
    use_fp4_here = config.use_fp4 and any(path in fp4_modules for path in paths)
    if not use_fp4_here:
        return None
    return reorder(paths)


def quantize_ready(config, device):
    if not config.use_fp4:
        return None
    ready = config.use_fp4 and device_supports_fp4(device)
    if not ready:
        return None
    return reorder(device)


def device_supports_fp4(device):
    return device.capability >= 100
"""
        },
        "quantization plans and a compile mode",
    )
    repo.branch("rename", "main")
    repo.mv("pkg/passes.py", "pkg/overlap.py")
    repo.commit({}, "rename only")
    repo.commit(
        {
            "pkg/overlap.py": sub(
                BASE,
                "        return nodes\n    return split(nodes)",
                "        return nodes\n    if nodes[0] is None:\n        return nodes\n    return split(nodes)",
            )
        },
        "new gate after rename",
    )
    old_gate = BASE[BASE.index("def old_gate") : BASE.index("def reorder")]
    repo.branch("moved-file", "main")
    repo.commit(
        {
            "pkg/passes.py": BASE.replace(old_gate, ""),
            "pkg/split_gate.py": "from pkg.passes import split\n\n\n" + old_gate.rstrip() + "\n",
        },
        "move old_gate to its own module",
    )
    repo.branch("moved-function", "main")
    repo.commit(
        {"pkg/passes.py": BASE.replace("def old_gate(nodes, config):", "def split_when_enabled(nodes, config):")},
        "rename old_gate",
    )
    repo.branch("copied", "main")
    repo.commit(
        {
            "pkg/passes.py": BASE
            + "\n\n"
            + old_gate.replace("old_gate", "merge_gate").replace("enable_split", "enable_merge")
        },
        "a second gate with the same condition",
    )
    repo.branch("untouched", "main")
    repo.commit(
        {"pkg/passes.py": sub(BASE, "    return split(nodes)", "    result = split(nodes)\n    return result")},
        "touch old_gate body",
    )
    or_gate = sub(BASE, "    if not config.fsdp.overlap:\n", "    if not config.fsdp.overlap or graph is None:\n")
    overlap = or_gate[or_gate.index("def overlap_pass") : or_gate.index("def old_gate")]
    moved = overlap.replace("not config.fsdp.overlap or graph is None", "graph is None or not config.fsdp.overlap")
    repo.branch("reordered", "or-gate")
    repo.commit(
        {
            "pkg/passes.py": or_gate.replace(overlap, ""),
            "pkg/overlap.py": "from pkg.passes import reorder\n\n\n" + moved.rstrip() + "\n",
        },
        "move overlap_pass to its own module, the operands of its gate swapped",
    )
    repo.branch("reordered-widened", "or-gate")
    repo.commit(
        {
            "pkg/passes.py": or_gate.replace(overlap, ""),
            "pkg/overlap.py": "from pkg.passes import reorder\n\n\n"
            + moved.replace("not config.fsdp.overlap", "not config.fsdp.overlap or len(graph) < 3").rstrip()
            + "\n",
        },
        "move overlap_pass, its gate swapped and widened",
    )
    repo.checkout("main")
    return repo


def test_new_silent_condition_after_flag_check_is_p2(repo: Repo) -> None:
    review = run_review(repo.path, "main", "silent", suites="none")
    (finding,) = review.findings
    assert (finding.rule, finding.severity, finding.qualname, finding.line_start) == (
        "silent-gate",
        Severity.P2,
        "overlap_pass",
        9,
    )
    assert "len(graph) < 3" in finding.message


def test_condition_ored_with_the_flag_is_p2(repo: Repo) -> None:
    review = run_review(repo.path, "main", "or-gate", suites="none")
    assert [(f.rule, f.line_start) for f in review.findings] == [("silent-gate", 7)]


def test_configured_choices_do_not_fire_and_a_device_check_does(repo: Repo) -> None:
    """A mode chosen by the flag (a non-empty string returned) and a local computed from the
    configuration alone (the configured module list) are the configuration choosing; a local that
    also asks the device is a new condition."""
    review = run_review(repo.path, "main", "configured-choice", suites="none")
    assert [(f.rule, f.qualname) for f in review.findings] == [("silent-gate", "quantize_ready")]
    assert "not ready" in review.findings[0].message


def test_logged_skip_and_the_flag_itself_do_not_fire(repo: Repo) -> None:
    assert run_review(repo.path, "main", "logged", suites="none").findings == []
    assert run_review(repo.path, "main", "flag-only", suites="none").findings == []


def test_helper_that_logs_and_config_values_that_are_not_flags_do_not_fire(repo: Repo) -> None:
    # the helper logs why it skips; `and` with a config value is the config asking for the skip;
    # returning a computed value is the work, not a skip
    assert run_review(repo.path, "main", "near-misses", suites="none").findings == []


def test_existing_gate_in_touched_function_is_not_new(repo: Repo) -> None:
    review = run_review(repo.path, "main", "untouched", suites="none")
    assert review.findings == []


def test_rename_keeps_old_gates_out_and_reports_new_ones_at_new_path(repo: Repo) -> None:
    assert run_review(repo.path, "main", "rename~1", suites="none").findings == []
    review = run_review(repo.path, "main", "rename", suites="none")
    assert [(f.rule, f.path, f.qualname) for f in review.findings] == [("silent-gate", "pkg/overlap.py", "old_gate")]


def test_gate_moved_to_another_file_or_function_is_not_new(repo: Repo) -> None:
    # the fingerprint changes with the path or the function; the condition skipped silently at base
    assert run_review(repo.path, "main", "moved-file", suites="none").findings == []
    assert run_review(repo.path, "main", "moved-function", suites="none").findings == []


def test_gate_moved_with_its_or_operands_swapped_is_not_new(repo: Repo) -> None:
    # found on SandAI-org/MagiCompiler 8403142: `if A or B` in _api.py became `if B or A` in api.py
    assert run_review(repo.path, "or-gate", "reordered", suites="none").findings == []
    review = run_review(repo.path, "or-gate", "reordered-widened", suites="none")
    assert [(f.rule, f.path, f.qualname) for f in review.findings] == [
        ("silent-gate", "pkg/overlap.py", "overlap_pass")
    ]
    assert "len(graph) < 3" in review.findings[0].message


def test_gate_copied_next_to_its_original_is_new(repo: Repo) -> None:
    review = run_review(repo.path, "main", "copied", suites="none")
    assert [(f.rule, f.qualname) for f in review.findings] == [("silent-gate", "merge_gate")]
    assert "len(nodes) < 2" in review.findings[0].message
