"""Parsing the Python sources of a reviewed revision: anything its author wrote, so a file CPython
cannot turn into an AST is skipped (and reported by the caller), never the end of a review."""

from __future__ import annotations

import ast


def parse(source: str, filename: str = "<unknown>") -> ast.Module | None:
    """The module's AST, or None when CPython cannot build one: a syntax error, a NUL byte (a
    ValueError on Python 3.11), or nesting deeper than its parser takes (MemoryError for a parser
    stack overflow, RecursionError for deep expressions)."""
    try:
        return ast.parse(source, filename=filename)
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
