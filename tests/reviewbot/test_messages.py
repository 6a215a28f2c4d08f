"""The message catalogs: complete in every language, and every id the code names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import jinja2
import pytest

from reviewbot import messages

ROOT = Path(__file__).resolve().parents[2] / "reviewbot"


ID = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*\.[a-z][a-z0-9]*(-[a-z0-9]+)*$")


def _ids_named_in_code() -> set[str]:
    """String constants in reviewbot/ shaped like a message id whose group (the part before the dot)
    is a group of the catalogs: a misspelt id in the code is caught here, not in a live review."""
    groups = {message_id.split(".")[0] for message_id in messages.message_ids("en")}
    ids: set[str] = set()
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            is_text = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if is_text and ID.match(node.value) and node.value.split(".")[0] in groups:
                ids.add(node.value)
    return ids


def test_every_language_has_every_id_with_the_same_parameters() -> None:
    english = messages.message_ids("en")
    assert len(english) > 10
    for language in messages.LANGUAGES:
        assert messages.message_ids(language) == english, language
        for message_id in english:
            assert messages.parameters(language, message_id) == messages.parameters("en", message_id), (
                language,
                message_id,
            )


def test_ids_named_in_code_exist() -> None:
    named = _ids_named_in_code()
    assert {"broad-except.swallows", "test-plan.not-found", "evidence.failing-test"} <= named
    missing = sorted(named - set(messages.message_ids("en")))
    assert not missing


def test_undefined_parameter_is_an_error_not_an_empty_string() -> None:
    with pytest.raises(jinja2.UndefinedError, match="label"):
        messages.render("broad-except.swallows", {}, "en")
    with pytest.raises(KeyError, match="no-such.id"):
        messages.render("no-such.id", {}, "en")
    with pytest.raises(ValueError, match="unknown language"):
        messages.render("broad-except.swallows", {"label": "except Exception"}, "fr")
