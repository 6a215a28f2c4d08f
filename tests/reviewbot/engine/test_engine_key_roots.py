"""Cache-key roots on a compiler-shaped repository (compiler_project.py): a `Class.method` root
follows that method and what it calls, not the rest of its class; a root that names nothing is a
configuration error (exit 2 from the CLI); roots that exist at one revision only are review notes.
Also where `reviewbot review` reads its configuration: `--config FILE`, and the warning for a
working-tree `.reviewbot.yml` that differs from the committed one."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from compiler_project import BACKEND, CONFIG, compiler_repo, run_reviewbot
from engine_gitrepos import Repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind
from reviewbot.keychange import detect_key_change
from reviewbot.render import render_markdown
from reviewbot.repo_config import ConfigError, differing_keys, parse_config

METHOD_ROOT = "mycc.backend.MyBackend.cache_dir"
YML = f"""
cache_key:
  roots:
    - {METHOD_ROOT}
  probe:
    command: python probe.py
    timeout_s: 60
"""
OTHER_METHOD = sub(BACKEND, "        return pretty(graph_code)\n", "        return pretty(graph_code.strip())\n")
HELPER_CHANGE = sub(BACKEND, "        return BACKEND_VERSION\n", '        return BACKEND_VERSION + "-patched"\n')
RENAMED = sub(BACKEND, "    def log_stats(self) -> str:", "    def stats_fingerprint(self) -> str:")


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = compiler_repo(tmp_path_factory.mktemp("roots") / "mycc", YML)
    for branch, text in (("other-method", OTHER_METHOD), ("helper-change", HELPER_CHANGE), ("rename", RENAMED)):
        repo.branch(branch, "main")
        repo.commit({"mycc/backend.py": text}, branch)
    repo.checkout("main")
    return repo


def test_a_change_to_another_method_of_the_class_is_not_a_key_change(repo: Repo) -> None:
    review = run_review(repo.path, "main", "other-method", suites="static")
    assert review.key_change is not None and review.key_change.status == "unchanged"
    assert review.key_change.closure_changes == [] and review.key_change.probe_status == "not-run"
    assert "mycc.backend.MyBackend.compile" not in review.key_change.head_items
    assert not [f for f in review.findings if f.rule.startswith("key-") or f.rule == "cache-key-change"]
    # the class as a root still means the whole class: the same change is in its closure
    whole = detect_key_change(
        repo.path, "main", "other-method", parse_config("cache_key: {roots: [mycc.backend.MyBackend]}")
    )
    assert [c.name for c in whole.closure_changes] == ["mycc.backend.MyBackend"]


def test_a_change_to_what_the_method_calls_is_a_confirmed_key_change(repo: Repo) -> None:
    review = run_review(repo.path, "main", "helper-change", suites="static")
    change = review.key_change
    assert change is not None and change.confirmed, (change.probe_status, change.probe_error)
    assert [c.name for c in change.closure_changes] == ["mycc.backend.MyBackend._version"]
    assert {"mycc.backend.MyBackend.artifact_key", "mycc.utils.stable_hash"} <= set(change.head_items)
    assert change.head_items["mycc.backend.MyBackend._version"].kind == "method"
    findings = [f for f in review.findings if f.rule == "cache-key-change"]
    assert len(findings) == 1 and findings[0].evidence.kind is EvidenceKind.PROBE
    assert findings[0].params["factors"] and "version" in str(findings[0].params["factors"])


def test_a_method_root_that_walks_a_typed_config_sees_a_new_field(tmp_path: Path) -> None:
    # the class's own `hash` names its fields; the key method hashes the whole object instead
    named = CONFIG + "\n    def hash(self) -> str:\n        return repr((self.opt_level, self.cache_root))\n"
    repo = compiler_repo(tmp_path / "mycc", None, {"mycc/config.py": named})
    repo.branch("new-field")
    repo.commit(
        {
            "mycc/config.py": sub(
                named, "    opt_level: int = 2\n", "    opt_level: int = 2\n    fast_math: bool = False\n"
            )
        }
    )
    config = parse_config(f"cache_key:\n  roots: [{METHOD_ROOT}, mycc.config.CompileConfig]\n")
    change = detect_key_change(repo.path, "main", "new-field", config, probe=False)
    [field] = change.new_fields
    assert (field.class_name, field.field) == ("mycc.config.CompileConfig", "fast_math")
    assert not field.ignored and "config_factors" in field.evidence, field


def test_roots_present_at_one_revision_are_notes(repo: Repo) -> None:
    config = parse_config(
        "cache_key:\n  roots: [mycc.backend.MyBackend.cache_dir, mycc.backend.MyBackend.log_stats, "
        "mycc.backend.MyBackend.stats_fingerprint]\n"
    )
    review = run_review(repo.path, "main", "rename", suites="none", config=config)
    assert review.key_change is not None
    assert review.key_change.roots_added == ("mycc.backend.MyBackend.stats_fingerprint",)
    assert review.key_change.roots_removed == ("mycc.backend.MyBackend.log_stats",)
    texts = [note.text("en") for note in review.notes]
    added = [n for n in texts if "`mycc.backend.MyBackend.stats_fingerprint` is added" in n]
    removed = [n for n in texts if "`mycc.backend.MyBackend.log_stats` is removed" in n]
    assert len(added) == 1 and len(removed) == 1, texts
    zh = render_markdown(review, "zh")  # the notes are in the review's language like the rest
    assert "> 说明: 缓存键根 `mycc.backend.MyBackend.stats_fingerprint` 由本次改动新增" in zh, zh[:600]


def test_a_misspelled_root_is_an_error_naming_it(repo: Repo) -> None:
    config = parse_config(f"cache_key:\n  roots: [{METHOD_ROOT}, mycc.backend.MyBackend.cache_dri]\n")
    with pytest.raises(ConfigError, match=r"'mycc\.backend\.MyBackend\.cache_dri' names nothing"):
        run_review(repo.path, "main", "other-method", suites="none", config=config)


def _review(repo: Repo, *args: str) -> subprocess.CompletedProcess:
    return run_reviewbot(repo, "review", "--suites", "none", *args)


@pytest.fixture
def feature(tmp_path: Path) -> Repo:
    """A fresh repository checked out on a branch that changes `MyBackend.compile`."""
    repo = compiler_repo(tmp_path / "mycc", YML)
    repo.branch("feature")
    repo.commit({"mycc/backend.py": OTHER_METHOD}, "compile: strip")
    return repo


def test_cli_misspelled_root_exits_2_with_one_line(feature: Repo, tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("cache_key:\n  roots: [mycc.backend.MyBackend.cache_dri]\n")
    proc = _review(feature, "--config", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("reviewbot review:")]
    assert len(errors) == 1 and "'mycc.backend.MyBackend.cache_dri' names nothing" in errors[0], proc.stderr


def test_cli_config_overrides_and_working_tree_warning(feature: Repo, tmp_path: Path) -> None:
    committed = _review(feature, "--format", "json")
    assert committed.returncode == 0, committed.stderr
    assert "warning" not in committed.stderr
    assert json.loads(committed.stdout)["language"] == "en"

    trial = tmp_path / "trial.yml"
    trial.write_text(YML + "language: zh\n")
    tried = _review(feature, "--format", "json", "--config", str(trial))
    assert tried.returncode == 0, tried.stderr
    assert json.loads(tried.stdout)["language"] == "zh"
    assert json.loads(tried.stdout)["key_change"]["roots"] == [METHOD_ROOT]

    (feature.path / ".reviewbot.yml").write_text(YML.replace("timeout_s: 60", "timeout_s: 90") + "language: zh\n")
    warned = _review(feature, "--format", "json")
    assert warned.returncode == 0, warned.stderr
    warnings = [line for line in warned.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1, warned.stderr
    assert "top-level keys cache_key, language" in warnings[0] and "--config .reviewbot.yml" in warnings[0]
    assert json.loads(warned.stdout)["language"] == "en"  # the committed file is the one used

    with_config = _review(feature, "--format", "json", "--config", str(feature.path / ".reviewbot.yml"))
    assert "warning" not in with_config.stderr and json.loads(with_config.stdout)["language"] == "zh"

    missing = _review(feature, "--config", str(tmp_path / "nope.yml"))
    assert missing.returncode == 2 and f"--config {tmp_path / 'nope.yml'}: no such file" in missing.stderr


def test_only_the_reviewed_configuration_roots_must_resolve(repo: Repo) -> None:
    head = parse_config(f"cache_key:\n  roots: [{METHOD_ROOT}]\n")
    stale_base = parse_config("cache_key:\n  roots: [mycc.backend.gone]\n")
    change = detect_key_change(repo.path, "main", "other-method", head, base_config=stale_base, require_roots=True)
    assert change.roots == (METHOD_ROOT,)
    with pytest.raises(ConfigError, match="'mycc.backend.gone' names nothing"):
        detect_key_change(repo.path, "main", "other-method", stale_base, require_roots=True)


def test_differing_keys_compares_values_not_text() -> None:
    assert differing_keys("a: 1\nb: [x]\n", "# a comment\nb: [x]\na: 1\n") == []
    assert differing_keys("a: 1\nb: 2\n", "a: 2\nb: 2\nc: 3\n") == ["a", "c"]
    assert differing_keys(None, "a: 1\n") == ["a"] and differing_keys("a: 1\n", None) == ["a"]
    assert differing_keys("a: 1\n", "a: [\n") is None and differing_keys("a: 1\n", "- a\n") is None


CODEGEN = """

class Codegen:
    def fingerprint(self) -> str:
        return "codegen-1"

    def emit(self, graph_code: str) -> str:
        return graph_code
"""


def test_a_method_root_follows_attributes_of_known_classes(tmp_path: Path) -> None:
    backend = sub(
        BACKEND, "        self.compiled = 0\n", "        self.compiled = 0\n        self.codegen = Codegen()\n"
    )
    backend = sub(backend, "self._version()])", "self._version(), self.codegen.fingerprint()])") + CODEGEN
    repo = compiler_repo(tmp_path / "mycc", None, {"mycc/backend.py": backend})
    changes = {
        "emit": {"mycc/backend.py": sub(backend, "        return graph_code\n", "        return graph_code.strip()\n")},
        "fingerprint": {"mycc/backend.py": sub(backend, '"codegen-1"', '"codegen-2"')},
        "config-field": {
            "mycc/config.py": sub(
                CONFIG, "    opt_level: int = 2\n", "    opt_level: int = 2\n    fast: bool = False\n"
            )
        },
    }
    for branch, files in changes.items():
        repo.branch(branch, "main")
        repo.commit(files, branch)
    config = parse_config(f"cache_key:\n  roots: [{METHOD_ROOT}]\n")

    def changed(branch: str) -> list[str]:
        return [c.name for c in detect_key_change(repo.path, "main", branch, config, probe=False).closure_changes]

    assert changed("emit") == []  # another method of the held object
    assert changed("fingerprint") == ["mycc.backend.Codegen.fingerprint"]  # `self.codegen.fingerprint()`
    assert changed("config-field") == ["mycc.config.CompileConfig"]  # `self.config` hashed whole


def test_imports_under_type_checking_are_followed(tmp_path: Path) -> None:
    backend = sub(
        BACKEND,
        "from mycc.config import CompileConfig\n",
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from mycc.config import CompileConfig\n",
    )
    backend = sub(
        backend, "    def __init__(self, config: CompileConfig)", '    def __init__(self, config: "CompileConfig")'
    )
    repo = compiler_repo(tmp_path / "mycc", None, {"mycc/backend.py": backend})
    repo.branch("config-field")
    repo.commit(
        {"mycc/config.py": sub(CONFIG, "    opt_level: int = 2\n", "    opt_level: int = 2\n    fast: bool = False\n")}
    )
    config = parse_config(f"cache_key:\n  roots: [{METHOD_ROOT}]\n")
    change = detect_key_change(repo.path, "main", "config-field", config, probe=False)
    assert [c.name for c in change.closure_changes] == ["mycc.config.CompileConfig"]


def test_cli_config_replaces_the_committed_file_at_the_merge_base_too(tmp_path: Path) -> None:
    # the committed file names the roots but a probe that cannot run; the trial file fixes the
    # probe: the review must use it at base and head alike (trying it needs no commit on the base)
    repo = compiler_repo(tmp_path / "mycc", YML.replace("python probe.py", "python no_such_probe.py"))
    repo.branch("feature")
    repo.commit({"mycc/backend.py": HELPER_CHANGE}, "version patched")
    committed = _review(repo, "--suites", "static", "--format", "json")
    assert committed.returncode == 0, committed.stderr
    assert json.loads(committed.stdout)["key_change"]["probe_status"] == "failed"
    trial = tmp_path / "trial.yml"
    trial.write_text(YML)
    tried = _review(repo, "--suites", "static", "--format", "json", "--config", str(trial))
    assert tried.returncode == 0, tried.stderr
    change = json.loads(tried.stdout)["key_change"]
    assert (change["probe_status"], change["status"]) == ("ok", "confirmed"), change["probe_error"]
    assert change["factors_changed"] == ["version"]


def test_zero_configuration_says_which_checks_are_off_and_where_the_file_is(tmp_path: Path) -> None:
    repo = compiler_repo(tmp_path / "mycc")
    repo.branch("feature")
    repo.commit({"mycc/backend.py": HELPER_CHANGE}, "version patched")
    plain = run_reviewbot(repo, "review", "--format", "text")  # --suites static, the default
    assert plain.returncode == 0 and "warning" not in plain.stderr, plain.stderr
    note = next(line for line in plain.stdout.splitlines() if "cache-key checks off" in line)
    assert "the head has no .reviewbot.yml" in note and "reviewbot init proposes" in note, note
    assert "No suites were run: none is configured" in plain.stdout

    # an uncommitted file: the warning says the head has none, and the defaults are what is used
    (repo.path / ".reviewbot.yml").write_text(YML)
    warned = _review(repo, "--format", "json")
    warnings = [line for line in warned.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "the reviewed head has none committed" in warnings[0], warned.stderr
    assert "top-level keys cache_key" in warnings[0] and "--config .reviewbot.yml" in warnings[0]
    assert json.loads(warned.stdout)["key_change"] is None

    # a --config file without roots is named as the reason
    rootless = tmp_path / "rootless.yml"
    rootless.write_text("language: en\n")
    named = _review(repo, "--format", "json", "--config", str(rootless))
    [note] = [n for n in json.loads(named.stdout)["notes"] if "cache-key checks off" in n]
    assert f"no `cache_key.roots` in --config {rootless}" in note


def test_cli_probe_with_a_setup_environment_says_it_builds_one(tmp_path: Path) -> None:
    repo = compiler_repo(tmp_path / "mycc", YML)
    repo.branch("feature")
    repo.commit({"mycc/backend.py": HELPER_CHANGE}, "version patched")
    trial = tmp_path / "setup.yml"
    trial.write_text(YML.replace("    timeout_s: 60\n", "    timeout_s: 60\n    setup: python -c pass\n"))
    proc = _review(repo, "--suites", "static", "--format", "json", "--config", str(trial))
    assert proc.returncode == 0, proc.stderr
    change = json.loads(proc.stdout)["key_change"]
    assert change["status"] == "confirmed", change["probe_error"]
    announced = [line for line in proc.stderr.splitlines() if "first building its environment" in line]
    assert len(announced) == 2 and "running the probe at base" in announced[0], proc.stderr
    assert len(list((repo.path / ".reviewbot" / "probe-envs").glob("*/bin/python"))) == 1  # one for both


def test_no_warning_for_another_head_whose_file_differs_from_an_unedited_checkout(tmp_path: Path) -> None:
    repo = compiler_repo(tmp_path / "mycc")  # main: no .reviewbot.yml
    repo.branch("feature")
    repo.commit({".reviewbot.yml": YML, "mycc/backend.py": HELPER_CHANGE}, "configure and patch")
    repo.checkout("main")
    other = _review(repo, "--head", "feature", "--format", "json")
    assert other.returncode == 0 and "reviewbot review: warning" not in other.stderr, other.stderr
    assert json.loads(other.stdout)["key_change"]["roots"] == [METHOD_ROOT]  # feature's own file
    repo.checkout("feature")
    (repo.path / ".reviewbot.yml").unlink()
    deleted = _review(repo, "--format", "json")
    warnings = [line for line in deleted.stderr.splitlines() if line.startswith("reviewbot review: warning")]
    assert warnings == [
        (
            "reviewbot review: warning: .reviewbot.yml is deleted in the working tree; the one committed at the "
            "reviewed head is used"
        )
    ], deleted.stderr
