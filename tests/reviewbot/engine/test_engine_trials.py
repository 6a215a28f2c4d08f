"""Classes found by trying the bot on the history of public repositories outside the precision
corpus, each next to its near miss, on a real git repo reviewed statically (`--suites none`):

- pytorch-labs/gpt-fast eb1789b (`eval.py`): an optional import recorded in a flag whose other
  imports of the same package run only under `if <flag>:`; the package is still optional there.
"""

from __future__ import annotations

import pytest
from engine_gitrepos import findings_by_rule, review_shapes

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


@pytest.fixture(scope="module")
def review(tmp_path_factory: pytest.TempPathFactory) -> list[Finding]:
    return review_shapes(
        tmp_path_factory.mktemp("trials") / "r",
        {"pkg/__init__.py": ""},
        {"pkg/flag_guarded.py": FLAG_GUARDED, "pkg/imported_anyway.py": IMPORTED_ANYWAY},
    )


def test_an_optional_import_whose_other_imports_run_under_its_flag(review: list[Finding]) -> None:
    assert findings_by_rule(review, "pkg/flag_guarded.py", "") == {}
    # near miss: the file imports the package unconditionally as well, so it is not optional
    found = findings_by_rule(review, "pkg/imported_anyway.py", "")["broad-except"]
    assert found.message_id == "broad-except.swallows"
