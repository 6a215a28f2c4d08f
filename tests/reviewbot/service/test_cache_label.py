"""The `cache: invalidates` label follows the key probe, against a real `reviewbot serve` and the
fake GitHub: set when a review confirms a key change, removed when a later head no longer changes
the key. The reviewed repository's key function, config class and probe are the engine tests'
(`engine_gitrepos.keyed_repo`: magi_compiler's shape). Also set when a pull request edits a file
the key hashes by its bytes (`engine/hashed_toy.py`: the probe at base lists it)."""

from __future__ import annotations

import json

from tests.reviewbot.engine.engine_gitrepos import KEYED_CACHE_KEY, KEYED_CONFIG, KEYED_REVIEWBOT_YML, sub
from tests.reviewbot.engine.hashed_toy import LOGGED_CODEGEN_PY, toy_files
from tests.reviewbot.service.harness import wait_until
from tests.reviewbot.service.scenario import Project, good_core

LABEL = "cache: invalidates"
ADDED_FACTOR = sub(
    KEYED_CACHE_KEY,
    '        "input_placements": _h(placements),\n',
    '        "input_placements": _h(placements),\n        "graph_signature": _h(config.mode),\n',
)


def _final(github, project, sha):
    states = [s["state"] for s in github.state.statuses_for(project.full_name, sha, "reviewbot/static")]
    return states[-1] if states and states[-1] != "pending" else None


def test_label_set_on_a_confirmed_key_change_and_removed_when_it_is_gone(service, github, tmp_path):
    project = Project(
        tmp_path,
        github,
        "octo/keyed",
        {"pkg/config.py": KEYED_CONFIG, "pkg/cache_key.py": KEYED_CACHE_KEY, ".reviewbot.yml": KEYED_REVIEWBOT_YML},
    )
    _, changed = project.open_pull(1, {"pkg/cache_key.py": ADDED_FACTOR})
    service.pull_event("opened", project.full_name, 1)
    assert [j.state for j in service.wait_jobs_settled(project.full_name, 1, timeout=180)] == ["done"], service.log()
    assert github.state.labels_on(project.full_name, 1) == [LABEL]
    [summary] = [c for c in github.state.comments_on(project.full_name, 1) if "reviewbot:summary" in c["body"]]
    assert "graph_signature" in summary["body"]

    reverted = project.new_head(1, {"pkg/cache_key.py": KEYED_CACHE_KEY, **good_core()})
    service.pull_event("synchronize", project.full_name, 1)
    wait_until(lambda: _final(github, project, reverted), timeout=180, what="the review of the reverting head")
    assert github.state.labels_on(project.full_name, 1) == []
    assert github.state.count_requests("POST", rf"/repos/{project.full_name}/issues/1/labels$") == 1
    assert github.state.count_requests("DELETE", rf"/repos/{project.full_name}/issues/1/labels/") == 1
    assert _final(github, project, changed) is not None


def test_label_set_when_a_pull_edits_a_file_the_key_hashes_by_its_bytes(service, github, tmp_path):
    """A logging line in the toy compiler's code generator: nothing in the key's code closure
    changes, but the probe at base lists the file as hashed by its bytes, so every key changes."""
    project = Project(tmp_path, github, "octo/hashed", toy_files())
    project.open_pull(1, {"toyc/codegen.py": LOGGED_CODEGEN_PY})
    service.pull_event("opened", project.full_name, 1)
    assert [j.state for j in service.wait_jobs_settled(project.full_name, 1, timeout=180)] == ["done"], service.log()
    assert github.state.labels_on(project.full_name, 1) == [LABEL]
    [summary] = [c for c in github.state.comments_on(project.full_name, 1) if "reviewbot:summary" in c["body"]]
    assert "`codegen_source`: `toyc/codegen.py`" in summary["body"]
    posted = json.dumps(github.state.review_comments_on(project.full_name, 1))
    assert "the key hashes the bytes of `toyc/codegen.py`" in posted
