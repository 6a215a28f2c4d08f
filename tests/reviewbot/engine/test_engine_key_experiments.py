"""The cache-key experiments on tiny fake projects whose probe prints JSON (no torch): key
reproducibility (two runs per revision, other worktree path, other PYTHONHASHSEED), removed and
renamed factors, collisions, and where key findings are anchored."""

from __future__ import annotations

import pytest
from engine_gitrepos import Repo, sub

from reviewbot.engine import run_review
from reviewbot.experiments.key_stability import SECOND_SEED
from reviewbot.findings import EvidenceKind, Severity

KEY = '''
"""The cache key hashes the mode and the version."""

import hashlib
import json
import os


def _h(value):
    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]


def cache_key_factors(mode):
    return {
        "mode": _h(mode),
        "version": _h("1"),
    }


CASES = {"eager": "eager", "jit": "jit"}

if __name__ == "__main__":
    cases = {}
    for name, mode in CASES.items():
        factors = cache_key_factors(mode)
        cases[name] = {"factors": factors, "key": _h(sorted(factors.items()))}
    print(json.dumps({"cases": cases}))
'''

REVIEWBOT_YML = """
cache_key:
  roots:
    - pkg.key.cache_key_factors
  probe:
    command: python -m pkg.key
    timeout_s: 60
"""

VERSION_LINE = '        "version": _h("1"),\n'
H_BODY = "    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]"
H_REFACTORED = "    text = repr(value)\n    return hashlib.sha256(text.encode()).hexdigest()[:12]"


def _project(path, key: str = KEY) -> Repo:
    repo = Repo(path)
    repo.commit({"pkg/__init__.py": "", "pkg/key.py": key, ".reviewbot.yml": REVIEWBOT_YML}, "initial")
    return repo


def _add_factor(line: str) -> str:
    return sub(KEY, VERSION_LINE, VERSION_LINE + line)


def _collide_with_artifact(artifact: str) -> str:
    """The collision of branch ``collide``, with a probe that reports each case's artifact."""
    key = sub(KEY, '"mode": _h(mode)', '"mode": _h(mode[:0])')
    return sub(
        key, '"key": _h(sorted(factors.items()))}', f'"key": _h(sorted(factors.items())), "artifact": {artifact}}}'
    )


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = _project(tmp_path_factory.mktemp("keyexp") / "r")
    branches = {
        "stable-add": {"pkg/key.py": _add_factor('        "device_capability": _h((8, 0)),\n')},
        "unstable-path": {"pkg/key.py": _add_factor('        "build_dir": _h(os.getcwd()),\n')},
        "unstable-seed": {"pkg/key.py": _add_factor('        "mode_salt": _h(hash(mode)),\n')},
        "remove": {"pkg/key.py": sub(KEY, '        "mode": _h(mode),\n', "")},
        "rename": {"pkg/key.py": sub(KEY, '"version": _h("1")', '"compiler_version": _h("1")')},
        "collide": {"pkg/key.py": sub(KEY, '"mode": _h(mode)', '"mode": _h(mode[:0])')},
        "collide-same-artifact": {"pkg/key.py": _collide_with_artifact('_h("one program")')},
        "collide-other-artifact": {"pkg/key.py": _collide_with_artifact("_h(mode)")},
        "new-module": {
            "pkg/device.py": "def capability():\n    return (8, 0)\n",
            "pkg/key.py": _add_factor('        "device_capability": _h(capability()),\n').replace(
                "import os\n", "import os\n\nfrom pkg.device import capability\n"
            ),
        },
    }
    for name, files in branches.items():
        repo.branch(name, "main")
        repo.commit(files, name)
    repo.checkout("main")
    return repo


def _rules(review, rule: str) -> list:
    return [f for f in review.findings if f.rule == rule]


def test_a_reproducible_key_change_is_confirmed_and_anchored_on_the_added_factor(repo: Repo) -> None:
    review = run_review(repo.path, "main", "stable-add")
    change = review.key_change
    assert change is not None and change.confirmed
    head, base = change.reproducibility_head, change.reproducibility_base
    assert head is not None and base is not None
    assert head.reproducible and base.reproducible
    assert head.seeds == base.seeds == (0, SECOND_SEED)
    assert head.worktrees[0] != head.worktrees[1] and all(head.worktrees)
    assert not _rules(review, "key-not-reproducible")
    (finding,) = _rules(review, "cache-key-change")
    line = repo.git("show", "stable-add:pkg/key.py").splitlines().index('        "device_capability": _h((8, 0)),') + 1
    assert (finding.path, finding.line_start, finding.line_end, finding.in_diff) == ("pkg/key.py", line, line, True)
    assert "key_reproducibility" in review.timings


@pytest.mark.parametrize(
    ("branch", "factor", "cause"),
    [
        ("unstable-path", "build_dir", "differed again, so it depends on the process or checkout"),
        ("unstable-seed", "mode_salt", "matched the first run, so it depends on the hash seed"),
    ],
)
def test_a_key_that_differs_between_processes_is_a_p0(repo: Repo, branch: str, factor: str, cause: str) -> None:
    review = run_review(repo.path, "main", branch)
    (finding,) = _rules(review, "key-not-reproducible")
    assert finding.severity is Severity.P0 and review.blocking
    assert finding.params == {"factors": factor, "cases": "eager, jit"}
    assert finding.evidence.kind is EvidenceKind.EXPERIMENT and finding.evidence.confirmed
    text = finding.evidence.text("en")
    assert f"PYTHONHASHSEED 0 and {SECOND_SEED}" in text and factor in text
    # the third run (seed 0, a third worktree path) tells a path leak from a seed dependence
    head = review.key_change.reproducibility_head
    assert head.third_worktree and head.third_worktree not in head.worktrees
    assert (head.by_process, head.by_seed) == (((factor,), ()) if branch == "unstable-path" else ((), (factor,)))
    assert f"a third run with seed 0 in {head.third_worktree}: {factor} {cause}" in text
    assert ("依赖于进程或检出位置" if branch == "unstable-path" else "依赖于哈希种子") in finding.evidence.text("zh")
    assert finding.in_diff and finding.path == "pkg/key.py"
    assert f'"{factor}"' in repo.git("show", f"{branch}:pkg/key.py").splitlines()[finding.line_start - 1]
    assert "not reproducible" in finding.message


def test_removed_factor_is_a_p0_with_probe_evidence_and_unconfirmed_without_the_probe(repo: Repo) -> None:
    review = run_review(repo.path, "main", "remove")
    (finding,) = _rules(review, "key-shares-artifacts")
    assert finding.severity is Severity.P0 and finding.evidence.kind is EvidenceKind.PROBE
    assert finding.params["removed"] == "mode" and finding.params["collisions"] == "eager / jit"
    assert finding.in_diff and finding.path == "pkg/key.py"
    assert "mode" in finding.evidence.text("en")
    static = run_review(repo.path, "main", "remove", suites="none")
    (finding,) = _rules(static, "key-shares-artifacts")
    assert finding.severity is Severity.P2 and finding.params == {"removed": "mode"}
    assert finding.evidence.text("en").startswith("unconfirmed (would be P0-BLOCKER with proof): the key probe")
    assert not static.blocking


def test_renamed_factor_keeps_configurations_apart(repo: Repo) -> None:
    review = run_review(repo.path, "main", "rename")
    assert review.key_change is not None
    assert review.key_change.factors_renamed == {"version": "compiler_version"}
    assert not _rules(review, "key-shares-artifacts")
    assert _rules(review, "cache-key-change")  # the key itself changed: caches miss, nothing shared


def test_collision_between_reference_cases_is_a_p0(repo: Repo) -> None:
    review = run_review(repo.path, "main", "collide")
    (finding,) = _rules(review, "key-shares-artifacts")
    assert finding.severity is Severity.P0
    assert (finding.params["removed"], finding.params["stopped"], finding.params["collisions"]) == (
        "none",
        "mode",
        "eager / jit",
    )
    line = repo.git("show", "collide:pkg/key.py").splitlines()[finding.line_start - 1]
    assert '"mode": _h(mode[:0])' in line and finding.in_diff


def test_a_collision_of_cases_with_one_artifact_is_a_p4_note_and_with_two_a_p0(repo: Repo) -> None:
    review = run_review(repo.path, "main", "collide-same-artifact")
    (finding,) = _rules(review, "key-shares-artifacts")
    assert finding.severity is Severity.P4 and finding.message_id == "key-shares-artifacts.same-artifact"
    assert finding.params["collisions"] == "eager / jit" and finding.evidence.kind is EvidenceKind.PROBE
    assert not review.blocking
    (near_miss,) = _rules(run_review(repo.path, "main", "collide-other-artifact"), "key-shares-artifacts")
    assert near_miss.severity is Severity.P0 and near_miss.params["collisions"] == "eager / jit"


def test_key_change_made_of_added_lines_is_anchored_on_them(repo: Repo) -> None:
    review = run_review(repo.path, "main", "new-module")
    (finding,) = _rules(review, "cache-key-change")
    assert finding.in_diff and finding.path == "pkg/key.py"
    assert '"device_capability"' in repo.git("show", "new-module:pkg/key.py").splitlines()[finding.line_start - 1]
    assert finding.qualname == "pkg.key.cache_key_factors"


UNSTABLE_KEY = sub(KEY, VERSION_LINE, VERSION_LINE + '        "location": _h(os.getcwd()),\n')


@pytest.fixture(scope="module")
def unstable_repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = _project(tmp_path_factory.mktemp("keyexp") / "u", UNSTABLE_KEY)
    repo.branch("refactor")
    repo.commit({"pkg/key.py": sub(UNSTABLE_KEY, H_BODY, H_REFACTORED)}, "refactor _h")
    repo.branch("fix-location", "main")
    repo.commit({"pkg/key.py": sub(UNSTABLE_KEY, "_h(os.getcwd())", '_h("pkg")')}, "portable location")
    repo.checkout("main")
    return repo


def test_unstable_base_is_said_and_no_key_change_is_reported_from_it(unstable_repo: Repo) -> None:
    review = run_review(unstable_repo.path, "main", "refactor")
    change = review.key_change
    assert change is not None and change.unstable_base == ("location",)
    # one run per revision sees `location` differ (two worktree paths): not a change of the key
    assert any(c.old_factors["location"] != c.new_factors["location"] for c in change.cases)
    assert not change.confirmed and change.factors_changed == []
    assert not _rules(review, "cache-key-change") and not _rules(review, "key-shares-artifacts")
    (finding,) = _rules(review, "key-not-reproducible")
    assert finding.severity is Severity.P2 and finding.message_id == "key-not-reproducible.preexisting"
    assert finding.params["factors"] == "location" and not review.blocking


def test_a_change_that_makes_the_key_reproducible_reports_the_unstable_base(unstable_repo: Repo) -> None:
    review = run_review(unstable_repo.path, "main", "fix-location")
    change = review.key_change
    assert change is not None and change.reproducibility_head is not None
    assert change.reproducibility_head.reproducible and change.unstable_base == ("location",)
    assert not change.confirmed and not review.invalidates_cache
    (finding,) = _rules(review, "key-not-reproducible")
    assert (finding.severity, finding.message_id, finding.in_diff) == (Severity.P4, "key-not-reproducible.base", False)
    assert "base's cache key is not reproducible" in finding.message
    assert not _rules(review, "key-shares-artifacts") and not review.blocking


def test_the_experiment_does_not_run_without_the_probe(repo: Repo) -> None:
    review = run_review(repo.path, "main", "unstable-path", suites="none")
    assert review.key_change is not None and review.key_change.reproducibility_head is None
    assert not _rules(review, "key-not-reproducible")
    assert "key_reproducibility" not in review.timings
    assert review.key_change.probe_status == "not-run" and review.key_change.cases == []
