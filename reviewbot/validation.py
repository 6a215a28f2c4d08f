"""One line per pydantic validation problem, for the bot's configuration loaders.

The loaders (`reviewbot.repo_config`, `reviewbot.release_notes.settings`, `reviewbot.service.settings`)
validate with pydantic models and turn a `ValidationError`'s first problem into one line naming the
key the way the file spells it (`suites.unit.gpus: expected int, got str`,
`cache_key.roots[1]: expected str, got int`): pydantic's own multi-line text never reaches a user.
`yaml_problem` does the same for a YAML syntax error, `decode_utf8` for a file that is not UTF-8.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any

import yaml
from pydantic import BaseModel
from pydantic_core import ErrorDetails

# pydantic error type -> the expected kind, as the messages name it
TYPE_ERRORS: dict[str, str] = {
    "string_type": "str",
    "int_type": "int",
    "float_type": "int or float",
    "bool_type": "bool",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "dataclass_type": "a mapping",
    "list_type": "list",
    "tuple_type": "list",
}
# text that does not parse as the expected kind -> that kind
PARSING_ERRORS: dict[str, str] = {"int_parsing": "int", "int_from_float": "int", "float_parsing": "int or float"}
UNKNOWN_KEY_ERRORS = ("extra_forbidden", "unexpected_keyword_argument")
_NUMBER_ERRORS = ("int_type", "float_type")


def key_path(loc: tuple[int | str, ...], prefix: str = "") -> str:
    """`("cache_key", "roots", 1)` -> `cache_key.roots[1]` (under `prefix`, a dotted key, if given);
    a mapping's key that is itself wrong is `<mapping> key <key>`."""
    text = prefix
    for i, part in enumerate(loc):
        if part == "[key]":
            continue
        if i + 1 < len(loc) and loc[i + 1] == "[key]":
            text += f" key {part!r}"
        elif isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def is_type_error(error: ErrorDetails) -> bool:
    """The value has the wrong type (as opposed to a wrong value of the right type)."""
    return error["type"] in TYPE_ERRORS


def problem(error: ErrorDetails) -> str:
    """What is wrong with the value, without the key: `expected int, got str`, `must be > 0`,
    `required`, `unknown key`, or the text of a validator's `ValueError`."""
    kind = error["type"]
    value = error["input"]
    ctx = error.get("ctx", {})
    if kind in TYPE_ERRORS:
        if isinstance(value, bool) and kind in _NUMBER_ERRORS:
            return "expected a number, got a boolean"
        return f"expected {TYPE_ERRORS[kind]}, got {type(value).__name__}"
    if kind in PARSING_ERRORS:
        return f"expected {PARSING_ERRORS[kind]}, got {value!r}"
    if kind in UNKNOWN_KEY_ERRORS:
        return "unknown key"
    if kind in ("missing", "missing_argument"):
        return "required"
    if kind == "literal_error":
        return f"expected one of {ctx['expected']}, got {value!r}"
    if kind == "greater_than":
        return f"must be > {ctx['gt']:g}"
    if kind == "greater_than_equal":
        return f"must be >= {ctx['ge']:g}"
    if kind == "string_too_short":
        return "must not be empty"
    if kind in ("value_error", "assertion_error"):
        return str(ctx["error"])
    return error["msg"]


def allowed_keys(root: type, loc: tuple[int | str, ...]) -> tuple[str, ...]:
    """The keys the model or dataclass at `loc` under `root` accepts (() when `loc` leads elsewhere)."""
    kind: Any = root
    for part in loc:
        kind = _step(kind, part)
        if kind is None:
            return ()
    return _keys(_unwrap(kind))


def _unwrap(kind: Any) -> Any:
    """`Annotated[X, ...]` -> X; `X | None` -> X."""
    while True:
        origin = typing.get_origin(kind)
        if origin is typing.Annotated:
            kind = typing.get_args(kind)[0]
        elif origin in (typing.Union, types.UnionType):
            members = [a for a in typing.get_args(kind) if a is not type(None)]
            if len(members) != 1:
                return kind
            kind = members[0]
        else:
            return kind


def _keys(kind: Any) -> tuple[str, ...]:
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        return tuple(sorted(field.alias or name for name, field in kind.model_fields.items()))
    if dataclasses.is_dataclass(kind):
        return tuple(sorted(f.name for f in dataclasses.fields(kind)))
    return ()


def _step(kind: Any, part: int | str) -> Any:
    kind = _unwrap(kind)
    if isinstance(kind, type) and issubclass(kind, BaseModel):
        field = kind.model_fields.get(str(part))
        return None if field is None else field.annotation
    if dataclasses.is_dataclass(kind):
        field = getattr(kind, "__pydantic_fields__", {}).get(str(part))
        return None if field is None else field.annotation
    args = typing.get_args(kind)
    if typing.get_origin(kind) in (dict, list, tuple) and args:
        return args[-1] if args[-1] is not Ellipsis else args[0]
    return None


def yaml_problem(exc: yaml.YAMLError) -> str:
    """One line for a YAML syntax error: what the parser found and where (1-based)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        return f"{exc.problem} (line {mark.line + 1}, column {mark.column + 1})"
    return " ".join(str(exc).split())


def decode_utf8(data: bytes) -> str:
    """`data` as UTF-8 text; ValueError `not UTF-8 text (byte N)` otherwise."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start})") from None
