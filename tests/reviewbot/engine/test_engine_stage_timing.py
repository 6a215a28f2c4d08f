"""Stage timing of a review: one clock (`engine.StageClock`) times every stage; a nested stage is
left out of its outer stage's time; a real review lists its stages in the order they ran."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from engine_gitrepos import Repo

from reviewbot.engine import StageClock, run_review


def test_a_nested_stage_is_left_out_of_the_outer_one_and_total_covers_all() -> None:
    clock = StageClock()
    with clock.stage("outer"):
        time.sleep(0.02)
        with clock.stage("inner"):
            time.sleep(0.2)
    with clock.stage("after"):
        time.sleep(0.02)
    timings = clock.finish()
    assert list(timings) == ["inner", "outer", "after", "total"]
    assert timings["inner"] >= 0.2
    assert 0.02 <= timings["outer"] < 0.2, timings  # the inner 0.2 s is not counted twice
    assert timings["total"] >= timings["inner"] + timings["outer"] + timings["after"]


def test_a_stage_is_timed_once_and_a_failed_stage_records_nothing() -> None:
    clock = StageClock()
    with clock.stage("diff"):
        pass
    with pytest.raises(AssertionError, match="timed twice"), clock.stage("diff"):
        pass
    with pytest.raises(KeyError), clock.stage("broken"):
        {}["missing"]
    with clock.stage("later"), clock.stage("nested"):
        pass
    assert list(clock.timings) == ["diff", "nested", "later"]


def test_a_review_times_its_stages_in_order(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/mod.py": "def run(fn):\n    return fn()\n"}, "base")
    repo.branch("feature")
    repo.commit({"pkg/mod.py": "def run(fn):\n    return fn(), fn()\n"}, "twice")
    review = run_review(repo.path, "main", "feature", suites="none")
    assert list(review.timings) == ["diff", "cache_key", "static_rules", "total"]
    assert all(seconds >= 0 for seconds in review.timings.values())
    assert review.timings["total"] >= sum(v for k, v in review.timings.items() if k != "total")
