import pytest

from reviewbot.release_notes.categorize import categorize, group
from reviewbot.release_notes.history import Change
from reviewbot.release_notes.settings import ReleaseNotesSettings, parse_release_notes_settings
from reviewbot.repo_config import ConfigError, parse_config

DEFAULTS = ReleaseNotesSettings()


def change(title: str, labels: tuple[str, ...] = (), number: int | None = 1) -> Change:
    return Change("0" * 40, ("1" * 40,), number, title, "ada", labels)


@pytest.mark.parametrize(
    ("title", "category", "shown", "scope"),
    [
        ("[Feat] AOT save and load", "Features", "AOT save and load", None),
        ("[Fix] index lock leak", "Fixes", "index lock leak", None),
        ("[Perf] skip re-hashing sources", "Performance", "skip re-hashing sources", None),
        ("[Refactor] split the backend", "Refactoring", "split the backend", None),
        ("[Doc] cache layout", "Documentation", "cache layout", None),
        ("[CI] GPU workflow", "CI", "GPU workflow", None),
        ("[Test] FSDP overlap", "Tests", "FSDP overlap", None),
        ("[Chore] bump ruff", "Chores", "bump ruff", None),
        ("[Dev] pre-commit hook", "Developer tooling", "pre-commit hook", None),
        ("[feat][aot] lower-case bracket with scope", "Features", "lower-case bracket with scope", "aot"),
        ("feat: dynamic dims", "Features", "dynamic dims", None),
        ("fix(cache): atomic writes", "Fixes", "atomic writes", "cache"),
        ("perf(splitting): fewer copies", "Performance", "fewer copies", "splitting"),
        ("docs: README", "Documentation", "README", None),
        ("ci: cache pip", "CI", "cache pip", None),
        ("test: placements", "Tests", "placements", None),
        ("chore: tidy", "Chores", "tidy", None),
        ("refactor(aot)!: new artifact format", "Breaking changes", "new artifact format", "aot"),
        ("feat!: drop torch 2.10", "Breaking changes", "drop torch 2.10", None),
        ("Add a thing", "Other changes", "Add a thing", None),
        # Unknown prefixes and prose with a colon are not prefixes.
        ("[WIP] something", "Other changes", "[WIP] something", None),
        ("Note: this is prose", "Other changes", "Note: this is prose", None),
    ],
)
def test_prefix_styles(title, category, shown, scope):
    entry = categorize(change(title), DEFAULTS)
    assert (entry.category, entry.title, entry.scope) == (category, shown, scope)
    assert entry.breaking == ("!:" in title)


def test_labels_win_over_prefixes_and_earliest_category_wins():
    assert categorize(change("[Feat] x", labels=("bug",)), DEFAULTS).category == "Fixes"
    assert categorize(change("chore: y", labels=("documentation", "enhancement")), DEFAULTS).category == "Features"
    # Labels that map to nothing leave the prefix in charge.
    assert categorize(change("[Perf] z", labels=("cache: invalidates",)), DEFAULTS).category == "Performance"


def test_group_orders_sections_by_configured_categories_and_keeps_history_order():
    changes = [change("fix: a"), change("feat: b"), change("plain c", number=None), change("[Feat] d")]
    sections = group(changes, DEFAULTS)
    assert [(s.category, [e.title for e in s.entries]) for s in sections] == [
        ("Features", ["b", "d"]),
        ("Fixes", ["a"]),
        ("Other changes", ["plain c"]),
    ]


def test_configured_labels_prefixes_and_patterns():
    settings = parse_release_notes_settings(
        {
            "categories": ["Highlights", "Compiler", "Bot", "Misc"],
            "labels": {"area: compiler": "Compiler", "highlight": "Highlights"},
            "prefixes": {"Bot": "Bot", "feat": "Compiler"},
            "prefix_patterns": [r"(?P<prefix>[A-Za-z]+)/\s*"],
            "breaking_category": "Highlights",
            "other_category": "Misc",
        }
    )
    assert categorize(change("bot/ new rule"), settings).category == "Bot"
    assert categorize(change("bot/ new rule"), settings).title == "new rule"
    assert categorize(change("feat/ y"), settings).category == "Compiler"
    # The default patterns were replaced: `[Feat]` is not a prefix any more.
    assert categorize(change("[Feat] y"), settings).category == "Misc"
    assert categorize(change("x", labels=("area: compiler", "highlight")), settings).category == "Highlights"


@pytest.mark.parametrize(
    ("section", "error", "message"),
    [
        ({"colours": {}}, ValueError, "unknown key.*colours"),
        ({"labels": ["bug"]}, TypeError, "release_notes.labels"),
        ({"labels": {"bug": "Bugs"}}, ValueError, "release_notes.labels.bug.*'Bugs'"),
        ({"prefix_patterns": ["(unclosed"]}, ValueError, r"prefix_patterns\[0\]"),
        ({"prefix_patterns": [r"\[(\w+)\]"]}, ValueError, "named group 'prefix'"),
        ({"categories": ["A"]}, ValueError, "breaking_category"),
        ("features", TypeError, "release_notes: expected a mapping"),
    ],
)
def test_invalid_settings_name_the_key(section, error, message):
    with pytest.raises(error, match=message):
        parse_release_notes_settings(section)


def test_reviewbot_yml_release_notes_section_through_repo_config():
    config = parse_config("release_notes:\n  prefixes: {hotfix: Fixes}\n")
    assert categorize(change("hotfix: now"), config.release_notes).category == "Fixes"
    assert parse_config("language: en\n").release_notes == ReleaseNotesSettings()
    with pytest.raises(ConfigError, match="release_notes.labels.bug"):
        parse_config("release_notes:\n  labels: {bug: Bugs}\n")
