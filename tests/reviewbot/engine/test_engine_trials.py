"""Classes found by trying the bot on the history of public repositories outside the precision
corpus, each next to its near miss, on a real git repo reviewed statically (`--suites none`):

- pytorch-labs/gpt-fast eb1789b (`eval.py`): an optional import recorded in a flag whose other
  imports of the same package run only under `if <flag>:`; the package is still optional there;
- unslothai/unsloth 746ad086d8 (`tests/studio/probe_dismiss_guard.py`): a loop over cases whose
  handler keeps the caught exception in the loop's results (`out.append({"case": c, "error":
  repr(exc)})`): a unit boundary that reports the error in its output, not in a log.

And what a user saw: on unslothai/unsloth (1,813 Python files) the exception index took most of a
review with no word of it; its progress line now says how many files it scanned and how long it took.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from engine_gitrepos import Repo, findings_by_rule, review_shapes

from reviewbot.engine import run_review
from reviewbot.findings import Finding

FLAG_GUARDED = """
try:
    import lm_eval
    lm_eval_available = True
except Exception:
    lm_eval_available = False

if lm_eval_available:
    from lm_eval.evaluator import evaluate
"""

IMPORTED_ANYWAY = """
try:
    import lm_eval
    lm_eval_available = True
except Exception:
    lm_eval_available = False

from lm_eval.evaluator import evaluate
"""


RESULTS = """
def run_cases(cases, one_case):
    out = []
    for case in cases:
        try:
            out.append(one_case(case))
        except Exception as exc:
            out.append({"case": case, "error": repr(exc)})
    return out


def run_cases_flagged(cases, one_case):
    out = []
    for case in cases:
        try:
            out.append(one_case(case))
        except Exception:
            out.append({"case": case, "error": True})
    return out


def run_cases_queued(cases, one_case, queue):
    for case in cases:
        try:
            queue.put(one_case(case))
        except Exception as exc:
            queue.put(repr(exc))


def run_once(case, one_case):
    out = {}
    try:
        out["result"] = one_case(case)
    except Exception as exc:
        out["error"] = repr(exc)
    return out
"""


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("trials") / "r",
        {"pkg/__init__.py": ""},
        {"pkg/flag_guarded.py": FLAG_GUARDED, "pkg/imported_anyway.py": IMPORTED_ANYWAY, "pkg/results.py": RESULTS},
    )


def test_an_optional_import_whose_other_imports_run_under_its_flag(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/flag_guarded.py", "") == {}
    # near miss: the file imports the package unconditionally as well, so it is not optional
    found = findings_by_rule(review, "pkg/imported_anyway.py", "")["broad-except"]
    assert found.message_id == "broad-except.swallows-one-operation"


def test_a_loop_that_keeps_each_turns_error_in_its_results(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/results.py", "run_cases") == {}
    # near misses: the record says a case failed but not why; one call, not a turn of a loop; the
    # error's text in a queue, whose reader cannot tell it from a result (`_queues_error`'s rule)
    for name in ("run_cases_flagged", "run_once", "run_cases_queued"):
        found = findings_by_rule(review, "pkg/results.py", name)["broad-except"]
        assert found.message_id == "broad-except.swallows-one-operation", name


def test_the_exception_index_says_how_many_files_it_scanned_and_how_long_it_took(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "r")
    repo.commit({"pkg/__init__.py": "", "pkg/errors.py": "class CacheMiss(RuntimeError):\n    pass\n"}, "base")
    repo.branch("shapes", "main")
    converting = "from pkg.errors import CacheMiss\n\n\ndef load(read):\n    try:\n        return read()\n    except Exception as error:\n        raise CacheMiss(str(error)) from error\n"
    repo.commit({"pkg/load.py": converting}, "convert")
    lines: list[str] = []
    run_review(repo.path, "main", "shapes", suites="none", progress=lines.append)
    index_lines = [line for line in lines if line.startswith("exception index:")]
    assert len(index_lines) == 1, lines
    assert re.fullmatch(
        r"exception index: 1 exception class\(es\) in 3 Python file\(s\) of the repository \(\d+\.\ds\)", index_lines[0]
    ), index_lines
