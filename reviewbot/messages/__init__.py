"""Message catalogs: the text of every finding, per language, kept out of the rule code.

A rule names a message by id (`broad-except.swallows`) and gives its parameters; the text lives in
`catalog/<language>/<group>.yml` as `ID: {message: T, why: T, fix: T}` where each `T` is a Jinja2
template over the parameters (undefined names are errors). Evidence texts use the same format with
`message` only. Every id exists in every language of `LANGUAGES` with the same parameter names
(a test checks both); an id defined twice in one language is an error at load time.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from importlib import resources
from typing import Any, NamedTuple

import jinja2
import jinja2.meta
import yaml

LANGUAGES = ("en", "zh")
PARTS = ("message", "why", "fix")

_ENV = jinja2.Environment(autoescape=False, undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


class Text(NamedTuple):
    message: str
    why: str
    fix: str


class CatalogError(ValueError):
    """A catalog file is malformed; the message names the file and the id."""


@functools.cache
def _sources(language: str) -> dict[str, dict[str, str]]:
    """id -> {part: template source} for `language`, merged from all its files."""
    if language not in LANGUAGES:
        raise ValueError(f"unknown language {language!r}; expected one of {LANGUAGES}")
    out: dict[str, dict[str, str]] = {}
    folder = resources.files(__package__).joinpath("catalog", language)
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".yml"):
            continue
        try:
            data = yaml.safe_load(entry.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise CatalogError(f"{language}/{entry.name}: not valid YAML: {exc}") from exc
        if not isinstance(data, dict):
            raise CatalogError(f"{language}/{entry.name}: expected a mapping of message ids")
        for message_id, parts in data.items():
            where = f"{language}/{entry.name}: {message_id}"
            if message_id in out:
                raise CatalogError(f"{where}: defined twice")
            if not isinstance(parts, dict) or "message" not in parts or set(parts) - set(PARTS):
                raise CatalogError(f"{where}: expected keys {PARTS} (message required)")
            if not all(isinstance(v, str) for v in parts.values()):
                raise CatalogError(f"{where}: every part must be a string")
            out[str(message_id)] = {k: " ".join(v.split()) if k == "message" else v.strip() for k, v in parts.items()}
    return out


@functools.cache
def _template(language: str, message_id: str, part: str) -> jinja2.Template | None:
    parts = _sources(language).get(message_id)
    if parts is None:
        raise KeyError(f"no message {message_id!r} in the {language} catalog")
    source = parts.get(part)
    return _ENV.from_string(source) if source is not None else None


def message_ids(language: str) -> list[str]:
    return sorted(_sources(language))


def parameters(language: str, message_id: str) -> set[str]:
    """Names the templates of `message_id` use in `language`."""
    names: set[str] = set()
    for source in _sources(language)[message_id].values():
        names |= jinja2.meta.find_undeclared_variables(_ENV.parse(source))
    return names


def render(message_id: str, params: Mapping[str, Any], language: str = "en") -> Text:
    """The message, why and fix of `message_id` in `language` (empty strings for parts it lacks)."""
    texts = []
    for part in PARTS:
        template = _template(language, message_id, part)
        texts.append(template.render(**params).strip() if template is not None else "")
    return Text(*texts)
