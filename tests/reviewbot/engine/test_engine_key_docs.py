"""stale-key-doc precision on a real git repo: one finding per text listing every wrong claim,
factor names read in words, only sentences that claim what the key contains, negations and
removals understood."""

from __future__ import annotations

import pytest
from engine_gitrepos import KEYED_CACHE_KEY, Repo, keyed_repo, sub

from reviewbot.engine import run_review
from reviewbot.findings import Severity
from reviewbot.rules.key_docs import factor_phrases, find_stale_claims

PLACEMENTS_LINE = '        "input_placements": _h(placements),\n'


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    repo = keyed_repo(tmp_path_factory.mktemp("keydocs") / "r")
    repo.branch("add-device")
    repo.commit(
        {
            "pkg/cache_key.py": sub(
                KEYED_CACHE_KEY, PLACEMENTS_LINE, PLACEMENTS_LINE + '        "device_capability": _h(config.level),\n'
            ),
            "tests/test_device.py": '''
            def test_two_wrong_claims():
                """The cache key hashes graph.code; the dtype is part of the key too.

                The key never includes placements.
                """


            def test_no_claims():
                """Returns the key of the dict that maps the graph code to its dtype."""


            def test_negations_and_removals():
                """The key no longer includes graph.code, and the dtype was removed from the key."""


            def test_words_of_a_factor_name():
                """The key now covers the device capability, next to the compile config and placements."""
            ''',
        },
        "key: device capability",
    )
    repo.checkout("main")
    return repo


def _stale(review) -> list:
    return [f for f in review.findings if f.rule == "stale-key-doc"]


def test_one_finding_per_text_lists_every_wrong_claim(repo: Repo) -> None:
    review = run_review(repo.path, "main", "add-device", suites="none")
    in_tests = [f for f in _stale(review) if f.path == "tests/test_device.py"]
    (finding,) = in_tests  # the other three docstrings claim nothing wrong
    assert finding.qualname == "test_two_wrong_claims" and finding.severity is Severity.P4
    assert [(c["problem"], c["factor"]) for c in finding.params["claims"]] == [
        ("absent", "graph_code"),
        ("absent", "input_dtypes"),
        ("included", "input_placements"),
    ]
    assert finding.message.startswith("test docstring makes 3 wrong claims about the cache key: (1) claims")
    assert '"graph.code" (graph_code)' in finding.message and "(3) says" in finding.message
    assert "The key never includes placements." in finding.why


def test_pr_body_naming_a_new_factor_in_words_is_not_stale(repo: Repo) -> None:
    body = (
        "Adds the device capability to the cache key, next to the compile config and the placements.\n\n"
        "The key no longer depends on graph.code, and this removes the dtype from the key."
    )
    review = run_review(repo.path, "main", "add-device", pr_body=body, suites="none")
    assert not [f for f in _stale(review) if f.path == "PR description"]


def test_pr_body_with_mixed_claims_gives_one_finding(repo: Repo) -> None:
    body = (
        "The key now includes the device capability and no longer includes the compile config.\n\n"
        "It also removes placements from the key, and hashes graph.code."
    )
    review = run_review(repo.path, "main", "add-device", pr_body=body, suites="none")
    (finding,) = [f for f in _stale(review) if f.path == "PR description"]
    assert [(c["problem"], c["factor"]) for c in finding.params["claims"]] == [
        ("included", "compile_config"),
        ("included", "input_placements"),
        ("absent", "graph_code"),
    ]


def test_factor_names_are_read_in_words_and_the_vocabulary_wins() -> None:
    phrases = factor_phrases({"placements": "input_placements"}, ["device_capability", "input_placements"])
    assert phrases["device capability"] == "device_capability"
    assert phrases["input placements"] == "input_placements" and phrases["placements"] == "input_placements"
    factors = ["device_capability", "input_placements"]
    assert find_stale_claims("The key includes the device capability and placements.", {}, factors, []) == []
    ((_, problem),) = find_stale_claims("The key does not hash the device capability.", {}, factors, [])
    assert (problem["problem"], problem["phrase"]) == ("included", "device capability")


def test_a_factor_spelled_like_the_key_or_inside_a_compound_is_no_claim() -> None:
    # pytorch/helion's docstrings, with factors "type" and "key" read from its cache entry's fields
    factors = ["type", "key", "config"]
    assert "key" not in factor_phrases({}, factors) and "type" in factor_phrases({}, factors)
    text = (
        "Generate the base specialization key from input argument metadata only, using the per-type "
        "extractor functions, without any extras discovered during compilation. Before the first "
        "compilation, these extras are not yet known and the key may be incomplete."
    )
    assert find_stale_claims(text, {}, factors, []) == []
    # the near miss: the factor as a word of its own is still read
    ((_, problem),) = find_stale_claims("The key does not include the type.", {}, factors, [])
    assert (problem["problem"], problem["factor"]) == ("included", "type")
