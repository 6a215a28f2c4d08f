"""`reviewbot review` as a real process: exit codes, saving, JSON, HEAD == base; zh rendering;
.reviewbot.yml validation; fingerprints stable across line moves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import run_review
from reviewbot.findings import Finding, Severity
from reviewbot.render import render_markdown
from reviewbot.repo_config import ConfigError, parse_config
from tests.reviewbot.toy_pytest import NO_PLUGINS

ROOT = Path(__file__).resolve().parents[3]

BASE = """
def run(fn):
    return fn()
"""


UNIT_SUITE = f"""
suites:
  unit:
    command: python -m pytest -q {NO_PLUGINS} tests/test_mod.py
    timeout_s: 120
    failure_means: The fallback hides errors.
"""


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = Repo(tmp_path_factory.mktemp("cli") / "r")
    repo.commit({"pkg/mod.py": BASE}, "base")
    repo.commit({"pkg/mod.py": BASE + "\n\ndef second(fn):\n    return fn()\n"}, "second commit on main")
    repo.branch("feature/p0")
    repo.commit(
        {
            "pkg/mod.py": BASE
            + "\n\ndef fallback(fn):\n    try:\n        return fn()\n    except Exception:\n        return None\n",
            # the blocker's evidence: a failing test (a broad handler alone is an unconfirmed P2)
            "tests/test_mod.py": "def test_fallback_propagates():\n    assert False, 'fallback hid the error'\n",
            ".reviewbot.yml": UNIT_SUITE,
        },
        "add fallback",
    )
    repo.branch("clean", "main")
    repo.commit({"pkg/mod.py": BASE + "\n\ndef twice(fn):\n    return fn(), fn()\n"}, "add twice")
    repo.checkout("main")
    return repo


def _cli(repo: Repo, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "reviewbot", "review", "--repo", str(repo.path), *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


def test_cli_exit_codes_saving_and_progress(repo: Repo) -> None:
    blocking = _cli(repo, "--head", "feature/p0", "--suites", "unit")
    assert blocking.returncode == 1, blocking.stderr
    assert blocking.stdout.splitlines()[3].startswith("**Verdict: BLOCKING**")
    assert "reviewbot: diff " in blocking.stderr and "reviewbot: saved " in blocking.stderr
    saved = [p.name for p in (repo.path / ".reviewbot" / "reviews").iterdir()]
    sha = repo.sha("feature/p0")[:12]
    assert any(name.startswith(f"branch-feature-p0-{sha}-") and name.endswith(".md") for name in saved)
    assert (repo.path / ".reviewbot" / ".gitignore").read_text() == "*\n"
    assert "?? " not in repo.git("status", "--porcelain")

    again = _cli(repo, "--head", "feature/p0", "--suites", "unit")
    assert again.returncode == 1
    assert len(list((repo.path / ".reviewbot" / "reviews").iterdir())) == len(saved) + 1  # collision-free names

    clean = _cli(repo, "--head", "clean", "--format", "json")
    assert clean.returncode == 0, clean.stderr
    data = json.loads(clean.stdout)
    assert data["verdict"] == {
        "blocking": False,
        "counts": {s.value: 0 for s in Severity},
        "suites_not_run": 0,
        "failing_at_base": 0,
    }
    assert data["summary"]["files"][0]["path"] == "pkg/mod.py"


def test_cli_on_the_base_itself_reviews_the_last_commit(repo: Repo) -> None:
    proc = _cli(repo)  # HEAD is main
    assert proc.returncode == 0, proc.stderr
    assert "nothing is proposed to merge" in proc.stderr
    assert "second commit on main" in proc.stdout
    assert "Reviewing the last commit" in proc.stdout


def test_cli_on_a_single_commit_repository_has_nothing_to_review(tmp_path: Path) -> None:
    single = Repo(tmp_path / "single")
    single.commit({"a.py": "x = 1\n"}, "only commit")
    proc = _cli(single)
    assert proc.returncode == 0
    assert "has no parent; nothing to review" in proc.stderr and proc.stdout == ""


def test_cli_rejects_bad_config_naming_the_key(repo: Repo, tmp_path: Path) -> None:
    repo.branch("bad-config")
    repo.commit({".reviewbot.yml": "suites:\n  unit:\n    command: pytest\n    gpus: two\n"}, "bad config")
    repo.checkout("main")
    proc = _cli(repo, "--head", "bad-config")
    assert proc.returncode == 2
    assert "suites.unit.gpus: expected int, got str" in proc.stderr


def test_zh_rendering_keeps_identifiers_paths_and_severities_in_english(repo: Repo) -> None:
    review = run_review(repo.path, "main", "feature/p0", suites="unit")
    text = render_markdown(review, "zh")
    assert "结论：阻塞合并" in text and "1. 改动概述" in text and "4. 未经审阅的生成代码迹象" in text
    assert "`P0-BLOCKER`" in text and "`pkg/mod.py:8-9`" in text and "`broad-except`" in text
    assert "`except Exception` 只保护一个操作：请写明回退所针对的异常类型" in text
    assert "| 过宽的异常处理 | 1 | `pkg/mod.py:8-9` |" in text
    en = render_markdown(review, "en")
    assert (
        en.index("Verdict") < en.index("1. Summary of the change") < en.index("2. Code quality") < en.index("3. Goal")
    )


def test_no_findings_says_what_was_checked(repo: Repo) -> None:
    text = render_markdown(run_review(repo.path, "main", "clean", suites="none"))
    assert "No findings. This is not a blanket approval; what was checked:" in text
    assert "LGTM" not in text
    assert "unused key parameters\n\n### 3. Goal completeness" in text  # the list ends before the heading
    # no .reviewbot.yml: the review opens with what it does not check and why
    assert "cache-key checks off: the head has no .reviewbot.yml" in text and "`reviewbot init` proposes" in text
    assert text.index("cache-key checks off") < text.index("1. Summary of the change")
    # tried on chengzeyi/stable-fast: the note pointed at docs/reviewbot.md, a path of this project,
    # not of the reviewed repository; the command's help is there wherever the bot runs
    assert "build the key (`reviewbot init --help`)" in text and "docs/reviewbot.md" not in text


def test_config_validation_names_the_key() -> None:
    with pytest.raises(ConfigError, match=r"^cache_key\.probe\.timout_s: unknown key"):
        parse_config("cache_key:\n  probe:\n    command: x\n    timout_s: 3\n")
    with pytest.raises(ConfigError, match=r"^language: expected one of"):
        parse_config("language: fr\n")
    with pytest.raises(ConfigError, match=r"^severity_overrides\.broad-except: unknown severity"):
        parse_config("severity_overrides:\n  broad-except: P9\n")
    with pytest.raises(ConfigError, match=r"^colour: unknown key"):
        parse_config("colour: red\n")
    config = parse_config("language: zh\nseverity_overrides:\n  broad-except: P3\n")
    assert config.language == "zh" and config.severity_overrides == {"broad-except": Severity.P3}


def test_this_repositorys_own_config_is_valid() -> None:
    config = parse_config((ROOT / ".reviewbot.yml").read_text())
    assert "magi_compiler.cache_key.cache_key_factors" in config.key_roots
    assert config.probe is not None and config.probe.command == "python -m magi_compiler.cache_key --explain --json"
    assert set(config.suites) == {
        "placement_cache_key",
        "aot_fallback",
        "fsdp_skip_split",
        "graph_hash",
        "timing_bench",
        "cudagraph",
    }


def test_fingerprint_survives_line_moves_and_ignores_language() -> None:
    def swallows(path: str, line: int, calls: int) -> Finding:
        return Finding(
            "broad-except",
            Severity.P2,
            path,
            line,
            line + 2,
            "broad-except.swallows",
            {"label": "except Exception"},
            extra={"wide_calls": calls},
            qualname="f",
        )

    a, b, c = swallows("a.py", 10, 2), swallows("a.py", 40, 3), swallows("b.py", 10, 2)
    assert a.fingerprint == b.fingerprint != c.fingerprint
    # the text comes from the catalogs; the fingerprint hashes the id and params, not the wording
    assert a.text("en").message == (
        "`except Exception` turns every error into a fallback or silence; its try covers 2 statements with "
        "calls, any of which can take this path"
    )
    assert a.text("zh").message != a.text("en").message
    assert a.to_json()["fingerprint"] == a.fingerprint


GUARDS = """
def deep(a, b):
    if a:
        if b:
            return getattr(a, "x", None)


def shallow(a):
    return hasattr(a, "module") and hasattr(a.module, "training")
"""


def test_boilerplate_guard_locations_are_in_line_order_each_once(tmp_path: Path) -> None:
    # found on chengzeyi/stable-fast: two hasattr calls on one line were listed as the same
    # location twice, and locations followed the syntax tree's breadth-first order, not the lines
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/mod.py": BASE}, "initial")
    repo.branch("guards")
    repo.commit({"pkg/mod.py": BASE + GUARDS}, "guards")
    review = run_review(repo.path, "main", "guards", suites="none")
    (signal,) = [s for s in review.signals if s.kind == "boilerplate-guards"]
    lines = repo.git("show", "guards:pkg/mod.py").splitlines()
    deep = next(i for i, line in enumerate(lines, 1) if "getattr(" in line)
    shallow = next(i for i, line in enumerate(lines, 1) if "hasattr(" in line)
    assert deep < shallow
    assert signal.locations == (f"pkg/mod.py:{deep}", f"pkg/mod.py:{shallow}") and signal.count == 2, signal
