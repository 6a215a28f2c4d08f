"""`broad-except.filter-falls-through` on an `if`/`elif` chain (round 28's blind part A showed the
one-`if` reading of round 27 missing lighteval's endpoint start-up), next to its near misses, on a
real git repo reviewed statically (`--suites none`).

- A narrow handler whose one `if`/`elif` chain tests the caught exception in every branch, handles
  one match, re-raises others and has no final `else:` is `P2` `broad-except.filter-falls-through`,
  its message naming every test.
- Near misses: the same chain ending in `else: raise`; a chain all of whose branches raise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_gitrepos import TORCH_PROJECT, findings_by_rule, review_shapes

from reviewbot.findings import Finding
from reviewbot.severity import Severity

ENDPOINT = """
from huggingface_hub.utils import HfHubHTTPError


def start(create, config, name):
    for _ in range(3):
        try:
            return create(name)
        except HfHubHTTPError as e:
            if "409 Conflict" in str(e):
                config.reuse = True
            elif "Quota exceeded" in str(e):
                raise e
            elif "not available" in str(e):
                raise e


def start_else_raise(create, config, name):
    for _ in range(3):
        try:
            return create(name)
        except HfHubHTTPError as e:
            if "409 Conflict" in str(e):
                config.reuse = True
            elif "Quota exceeded" in str(e):
                raise e
            else:
                raise


def start_all_raise(create, config, name):
    for _ in range(3):
        try:
            return create(name)
        except HfHubHTTPError as e:
            if "Quota exceeded" in str(e):
                raise e
            elif "not available" in str(e):
                raise RuntimeError("no hardware") from e
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    path: Path = tmp_path_factory.mktemp("round28") / "repo"
    return review_shapes(path, {"pkg/__init__.py": "", "pkg/project.py": TORCH_PROJECT}, {"pkg/endpoint.py": ENDPOINT})


def test_a_chain_without_else_that_handles_one_match_is_reported(review: list[Finding]) -> None:
    found = findings_by_rule(review, "pkg/endpoint.py", "start")["broad-except"]
    assert (found.message_id, found.severity) == ("broad-except.filter-falls-through", Severity.P2)
    assert "409 Conflict" in found.message and "not available" in found.message


def test_a_chain_ending_in_else_raise_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/endpoint.py", "start_else_raise") == {}


def test_a_chain_whose_branches_all_raise_gives_nothing(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/endpoint.py", "start_all_raise") == {}
