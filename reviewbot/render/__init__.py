"""Rendering a `Review` as markdown with Jinja2 (`templates/review.md.j2`).

`render_markdown(review, language)` with language `en` or `zh`. The review opens with the verdict
(blocking or not, counts per severity), then four sections: 1. summary of the change, 2. code
quality and correctness (findings grouped P0..P4, each anchored to file:line), 3. goal
completeness (test-plan table, suite results with each suite's failing tests that fail at the
merge base too, timing table), 4. signals of unreviewed generated code. Under the verdict: how
many suites could not run and how many failing tests fail at the merge base too (no findings). Identifiers, paths and severity labels stay in English in both languages; with no findings
the text says what was checked instead of a bare approval. `reviewbot.render.terminal` makes the
markdown plain for a terminal.
"""

from __future__ import annotations

import jinja2

from reviewbot.findings import Severity
from reviewbot.render.labels import LABELS
from reviewbot.review import Review

_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("reviewbot.render", "templates"),
    autoescape=False,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


_ENV.filters["cell"] = _cell


def render_markdown(review: Review, language: str = "en") -> str:
    if language not in LABELS:
        raise ValueError(f"unknown language {language!r}; expected one of {sorted(LABELS)}")
    groups = [(sev, [f for f in review.findings if f.severity is sev]) for sev in Severity]
    template = _ENV.get_template("review.md.j2")
    return template.render(
        r=review,
        t=LABELS[language],
        lang=language,
        verdict=review.verdict,
        groups=[(sev.value, items) for sev, items in groups if items],
        checked=_checked(review, language),
    )


def _checked(review: Review, language: str) -> list[str]:
    """What the review looked at, stated when there are no findings."""
    t = LABELS[language]
    items = [t["checked_rules"].format(n=sum(1 for f in review.summary.files if f.path.endswith(".py")))]
    if review.key_change is not None:
        items.append(t["checked_key"].format(status=review.key_change.status, n=len(review.key_change.head_items)))
    if review.suite_results:
        items.append(t["checked_suites"].format(n=sum(1 for r in review.suite_results if r.ran)))
    if review.test_plan:
        items.append(t["checked_plan"].format(n=len(review.test_plan)))
    return items
