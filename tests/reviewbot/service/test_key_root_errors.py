"""A `.reviewbot.yml` whose cache-key root names nothing at either revision fails that PR's review
job as a configuration error: the static status says so, naming the root; a real `reviewbot serve`
and the fake GitHub."""

from __future__ import annotations

from tests.reviewbot.service.scenario import Project, good_core


def test_a_misspelled_key_root_fails_the_review_naming_it(service, github, tmp_path):
    project = Project(tmp_path, github, "octo/misspelled-root")
    config = "cache_key:\n  roots:\n    - pkg.core.add\n    - pkg.core.scael\n"
    _, head = project.open_pull(1, {".reviewbot.yml": config, **good_core()})
    service.pull_event("opened", project.full_name, 1)
    [job] = service.wait_jobs_settled(project.full_name, 1)
    assert job.state == "failed", (job, service.log())
    assert "'pkg.core.scael' names nothing" in job.error and "pkg.core.add'" not in job.error
    statuses = github.state.statuses_for(project.full_name, head, "reviewbot/static")
    assert statuses[-1]["state"] == "error", statuses
    assert statuses[-1]["description"].startswith(".reviewbot.yml: cache_key.roots: 'pkg.core.scael'")
