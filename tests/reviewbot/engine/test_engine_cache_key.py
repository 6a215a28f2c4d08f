"""Cache-key change detection (static closure diff + probe), key-ignores-field, stale key docs and
unused key parameters, on a synthetic repo whose key function, config class and probe mimic
magi_compiler's shape (see engine_gitrepos.keyed_repo)."""

from __future__ import annotations

import dataclasses

import pytest
from engine_gitrepos import KEYED_CACHE_KEY, KEYED_CONFIG, KEYED_REVIEWBOT_YML, Repo, keyed_repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import EvidenceKind, Severity
from reviewbot.keychange import detect_key_change
from reviewbot.render import render_markdown
from reviewbot.repo_config import ProbeConfig, load_config

EXPLICIT_HASH_CONFIG = sub(
    KEYED_CONFIG,
    "return hashlib.sha256(json.dumps(dataclasses.asdict(self), sort_keys=True).encode()).hexdigest()[:12]",
    "return hashlib.sha256(json.dumps([self.mode, self.level]).encode()).hexdigest()[:12]",
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = keyed_repo(
        tmp_path_factory.mktemp("key") / "r",
        {
            "pkg/other.py": "def helper():\n    return 1\n",
            "tests/test_old.py": 'def test_old():\n    """The cache key includes the dtype."""\n    assert True\n',
        },
    )

    repo.branch("add-factor")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                '        "input_placements": _h(placements),\n',
                '        "input_placements": _h(placements),\n        "graph_signature": _h(config.mode),\n',
            )
        },
        "key: add graph signature factor",
    )

    repo.branch("remove-factor", "main")
    repo.commit(
        {"pkg/cache_key.py": sub(KEYED_CACHE_KEY, '        "input_placements": _h(placements),\n', "")},
        "key: drop placements",
    )

    repo.branch("collide", "main")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                '        "input_placements": _h(placements),\n',
                '        "input_placements": _h(str(placements)[:0]),\n',
            ).replace('"compile_config": config.hash(),', '"compile_config": _h(config.mode),')
        },
        "key: hash the mode only and a constant placement",
    )

    repo.branch("docs-only", "main")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                '"""Factor hashes of one compiled graph."""',
                '"""Factor hashes of one graph.\n\n    Reworded."""',
            )
            .replace("def key(factors):", "# a comment\ndef key(factors):")
            .replace("    return _h(sorted(factors.items()))", "    return _h(sorted(  factors.items()  ))"),
            "pkg/other.py": "def helper():\n    return 2\n",
        },
        "docs and unrelated code",
    )

    repo.branch("equivalent-refactor", "main")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                "def _h(value, legacy=None):\n    return hashlib.sha256(repr(value).encode()).hexdigest()[:12]",
                "def _h(value, legacy=None):\n    text = repr(value)\n    return hashlib.sha256(text.encode()).hexdigest()[:12]",
            )
        },
        "refactor _h",
    )

    repo.branch("explicit-hash", "main")
    repo.commit({"pkg/config.py": EXPLICIT_HASH_CONFIG}, "explicit hash")
    repo.branch("ignored-field", "explicit-hash")
    repo.commit(
        {
            "pkg/config.py": sub(
                EXPLICIT_HASH_CONFIG, "    level: int = 1\n", "    level: int = 1\n    fuse: bool = True\n"
            )
        },
        "add fuse option",
    )

    repo.branch("hashed-field", "main")
    repo.commit(
        {"pkg/config.py": sub(KEYED_CONFIG, "    level: int = 1\n", "    level: int = 1\n    fuse: bool = True\n")},
        "add fuse option (hashed)",
    )

    repo.branch("unused-param", "main")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                "def cache_key_factors(config, placements):",
                "def cache_key_factors(config, placements, device, _rank=0):",
            )
        },
        "key: add device parameter",
    )

    repo.branch("stale-doc", "main")
    repo.commit(
        {
            "tests/test_key.py": '''
        def test_key_ignores_graph():
            """The cache key includes the dtype of every input."""
            assert True


        def test_key_left_out():
            """graph.code is deliberately left out of the key."""
            assert True
        ''',
        },
        "tests with key claims",
    )
    repo.branch("comment-claim", "main")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY,
                "    return {\n",
                "    # the key also covers graph.code, so edits recompile\n    return {\n",
            )
        },
        "comment on the key",
    )

    repo.branch("rename-module", "main")
    repo.mv("pkg/cache_key.py", "pkg/key.py")
    repo.commit({".reviewbot.yml": sub(KEYED_REVIEWBOT_YML, "pkg.cache_key", "pkg.key")}, "rename the key module")
    repo.checkout("main")
    return repo


def test_added_factor_is_confirmed_by_probe(repo: Repo) -> None:
    change = detect_key_change(repo.path, "main", "add-factor", load_config(repo.path, "add-factor"))
    assert change.static_changed
    assert change.confirmed and change.status == "confirmed"
    assert change.factors_changed == ["graph_signature"]
    assert change.factors_added == ["graph_signature"]
    assert {c.case for c in change.cases} == {"default", "sharded"}
    for case in change.cases:
        assert case.old_key and case.new_key and case.old_key != case.new_key
    review = run_review(repo.path, "main", "add-factor")
    assert review.invalidates_cache
    (finding,) = [f for f in review.findings if f.rule == "cache-key-change"]
    assert finding.severity is Severity.P4
    assert "graph_signature" in finding.message
    assert finding.in_diff  # anchored on the lines the PR changed, so it can be posted inline
    assert change.cases[0].old_key in finding.why
    # the module docstring lists the factors but omits the gained one
    stale = [f for f in review.findings if f.rule == "stale-key-doc"]
    assert stale and "graph_signature" in stale[0].message and not stale[0].in_diff
    assert review.to_json()["key_change"]["status"] == "confirmed"


def test_docstrings_comments_formatting_and_unrelated_code_do_not_change_the_key(repo: Repo) -> None:
    change = detect_key_change(repo.path, "main", "docs-only", load_config(repo.path, "main"))
    assert change.closure_changes == []
    assert change.status == "unchanged"
    assert change.probe_status == "not-run"
    review = run_review(repo.path, "main", "docs-only")
    assert not review.invalidates_cache
    assert review.findings == []


def test_static_change_the_probe_does_not_confirm_is_summary_only(repo: Repo) -> None:
    review = run_review(repo.path, "main", "equivalent-refactor")
    assert review.key_change is not None
    assert review.key_change.status == "unconfirmed"
    assert review.key_change.probe_status == "ok"
    assert [c.name for c in review.key_change.closure_changes] == ["pkg.cache_key._h"]
    assert not any(f.rule == "cache-key-change" for f in review.findings)
    assert "did not confirm" in render_markdown(review)


def test_static_review_with_suites_none_never_runs_the_probe(repo: Repo) -> None:
    review = run_review(repo.path, "main", "add-factor", suites="none")
    assert review.key_change is not None
    assert review.key_change.status == "unconfirmed"
    assert review.key_change.probe_status == "not-run"


def test_new_field_the_key_ignores_is_p0(repo: Repo) -> None:
    review = run_review(repo.path, "explicit-hash", "ignored-field")
    (finding,) = [f for f in review.findings if f.rule == "key-ignores-field"]
    assert finding.severity is Severity.P0
    assert "`fuse`" in finding.message and finding.path == "pkg/config.py" and finding.line_start == 12
    assert review.blocking


def test_new_field_the_key_hashes_is_a_key_change_not_p0(repo: Repo) -> None:
    review = run_review(repo.path, "main", "hashed-field")
    assert not any(f.rule == "key-ignores-field" for f in review.findings)
    assert review.invalidates_cache
    assert review.key_change is not None and review.key_change.factors_changed == ["compile_config"]


def test_unused_key_parameter_is_p3(repo: Repo) -> None:
    review = run_review(repo.path, "main", "unused-param", suites="none")
    unused = [f for f in review.findings if f.rule == "unused-key-param"]
    assert [f.message for f in unused] == [
        "parameter `device` of key function `pkg.cache_key.cache_key_factors` is never used"
    ]
    assert unused[0].severity is Severity.P3


def test_unused_parameter_on_untouched_key_function_is_not_reported(repo: Repo) -> None:
    # `key` and `_h` use all their parameters; the docs-only branch touched `key` without adding any
    review = run_review(repo.path, "main", "docs-only", suites="none")
    assert not any(f.rule == "unused-key-param" for f in review.findings)


def test_stale_claims_in_test_docstrings_and_pr_body(repo: Repo) -> None:
    body = "Adds tests.\n\nThe cache key now also hashes graph.code. The key does not include placements."
    review = run_review(repo.path, "main", "stale-doc", pr_body=body, suites="none")
    stale = [f for f in review.findings if f.rule == "stale-key-doc"]
    messages = sorted(f.message for f in stale)
    assert any("tests/test_key.py" == f.path and "input_dtypes" in f.message for f in stale), messages
    assert not any("graph_code" in f.message and f.path == "tests/test_key.py" for f in stale)  # negated, true
    (pr,) = [f for f in stale if f.path == "PR description"]  # one finding per text, every wrong claim in it
    assert [(c["problem"], c["factor"]) for c in pr.params["claims"]] == [
        ("absent", "graph_code"),
        ("included", "input_placements"),
    ]
    assert pr.message.startswith("the PR description makes 2 wrong claims about the cache key: (1) claims")
    assert all(f.severity is Severity.P4 for f in stale)
    assert not any(f.path == "tests/test_old.py" for f in stale)  # stale before the change, untouched line
    assert "compile_config" in pr.why  # quotes the actual factors


def test_probe_failure_and_timeout_leave_the_change_unconfirmed(repo: Repo) -> None:
    base_config = load_config(repo.path, "add-factor")
    failing = dataclasses.replace(base_config, probe=ProbeConfig('python -c "import sys; sys.exit(3)"'))
    change = detect_key_change(repo.path, "main", "add-factor", failing)
    assert change.static_changed and not change.confirmed
    assert (change.status, change.probe_status) == ("unconfirmed", "failed")
    assert "exited with code 3" in change.probe_error
    slow = dataclasses.replace(base_config, probe=ProbeConfig('python -c "import time; time.sleep(20)"', timeout_s=1))
    change = detect_key_change(repo.path, "main", "add-factor", slow)
    assert (change.status, change.probe_status) == ("unconfirmed", "timeout")


def test_removed_factor_makes_an_untouched_docstring_stale(repo: Repo) -> None:
    review = run_review(repo.path, "main", "remove-factor", suites="none")
    stale = [f for f in review.findings if f.rule == "stale-key-doc"]
    assert len(stale) == 1
    assert stale[0].path == "pkg/cache_key.py" and stale[0].line_start == 1 and not stale[0].in_diff
    assert "input_placements" in stale[0].message and "no such factor" in stale[0].message
    assert review.key_change is not None and review.key_change.factors_removed == ["input_placements"]
    # unused-key-param: `placements` is now ignored by the key function it belongs to
    assert [f.message for f in review.findings if f.rule == "unused-key-param"] == [
        "parameter `placements` of key function `pkg.cache_key.cache_key_factors` is never used"
    ]


def test_removed_factor_or_collision_is_a_p0_backed_by_the_probe(repo: Repo) -> None:
    removed = run_review(repo.path, "main", "remove-factor", suites="static")
    (finding,) = [f for f in removed.findings if f.rule == "key-shares-artifacts"]
    assert finding.severity is Severity.P0 and finding.evidence.kind is EvidenceKind.PROBE
    assert finding.params["removed"] == "input_placements" and finding.params["collisions"] == "none"
    assert removed.blocking
    collide = run_review(repo.path, "main", "collide", suites="static")
    (finding,) = [f for f in collide.findings if f.rule == "key-shares-artifacts"]
    assert finding.params["removed"] == "none"
    assert finding.params["stopped"] == "compile_config, input_placements"
    assert finding.params["collisions"] == "default / sharded"
    assert "share compiled artifacts" in finding.message
    # a factor added keeps every configuration apart: no such finding
    added = run_review(repo.path, "main", "add-factor", suites="static")
    assert not any(f.rule == "key-shares-artifacts" for f in added.findings)


def test_key_introduced_by_the_change_is_not_probed(tmp_path) -> None:
    repo = Repo(tmp_path / "fresh")
    repo.commit({"README.md": "empty\n"}, "start")
    repo.branch("add-key")
    repo.commit({"pkg/__init__.py": "", "pkg/config.py": KEYED_CONFIG, "pkg/cache_key.py": KEYED_CACHE_KEY}, "add key")
    config = load_config(repo.path, "main")
    config = dataclasses.replace(
        config, key_roots=("pkg.cache_key.cache_key_factors",), probe=ProbeConfig("python -m pkg.cache_key")
    )
    change = detect_key_change(repo.path, "main", "add-key", config)
    assert change.introduced and change.probe_status == "not-run" and not change.confirmed
    review = run_review(repo.path, "main", "add-key", config=config)
    assert "This change introduces the cache key" in render_markdown(review)


def test_probe_runs_without_network_where_the_machine_allows_it(repo: Repo) -> None:
    import socket

    from reviewbot.gitrepo import GitRepo
    from reviewbot.keychange.probe import run_probe
    from reviewbot.sandbox import network_isolation_prefix

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        command = (
            'python -c "import json, os, socket; s = socket.socket(); s.settimeout(2); '
            f"rc = s.connect_ex(('127.0.0.1', {port})); "
            "print(json.dumps({'cases': {'net': {'factors': {'rc': rc, 'seed': os.environ['PYTHONHASHSEED']}, 'key': 'k'}}}))\""
        )
        with GitRepo(repo.path) as git:
            run = run_probe(git, "main", ProbeConfig(command))
    assert run.status == "ok", run.error
    factors = run.cases["net"]["factors"]
    assert factors["seed"] == "0"
    assert run.isolated == bool(network_isolation_prefix())
    if run.isolated:
        assert factors["rc"] != "0"  # no network, not even loopback
    else:
        assert factors["rc"] == "0"  # only the environment is cleaned on this machine


def test_renamed_key_module_is_a_static_change_the_probe_does_not_confirm(repo: Repo) -> None:
    review = run_review(repo.path, "main", "rename-module")
    change = review.key_change
    assert change is not None
    assert {(c.name, c.change) for c in change.closure_changes} >= {
        ("pkg.key.cache_key_factors", "added"),
        ("pkg.cache_key.cache_key_factors", "removed"),
    }
    assert change.probe_status == "ok" and change.status == "unconfirmed"
    # the unused `legacy` parameter and the docstrings moved with the file: nothing new to report
    assert review.findings == []


def test_unused_parameter_that_predates_the_change_is_not_reported_when_its_function_changes(repo: Repo) -> None:
    review = run_review(repo.path, "main", "equivalent-refactor", suites="none")
    assert not any(f.rule == "unused-key-param" for f in review.findings)


def test_stale_comment_in_the_key_closure_is_reported_on_its_line(repo: Repo) -> None:
    review = run_review(repo.path, "main", "comment-claim", suites="none")
    (finding,) = review.findings
    assert (finding.rule, finding.severity, finding.path, finding.line_start) == (
        "stale-key-doc",
        Severity.P4,
        "pkg/cache_key.py",
        17,
    )
    assert finding.in_diff and "graph_code" in finding.message
    assert finding.qualname == "cache_key_factors"
