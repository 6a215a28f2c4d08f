"""A tiny compiler-like project with its own cache key, for the upgrade-warning tests.

`toyc.cache_key.cache_key_factors(config)` builds the key from named factor hashes, like
`magi_compiler.cache_key`; `python -m toyc.cache_key --explain --json` prints
`{"cases": {NAME: {"factors": {...}, "key": "..."}}}` for two reference cases. `.reviewbot.yml`
names the key roots and that probe command.
"""

from __future__ import annotations

CONFIG_PY = '''\
"""Compile options of the toy compiler."""

from dataclasses import dataclass


@dataclass(frozen=True)
class ToyConfig:
    opt_level: int = 2
    backend: str = "inductor"
'''

CACHE_KEY_PY = '''\
"""The toy compiler's artifact-cache key."""

import argparse
import hashlib
import json
from dataclasses import asdict

from toyc.config import ToyConfig

COMPILER_VERSION = "1.0"


def _hash(value):
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def cache_key_factors(config):
    """The key is made of the compile config and the compiler version."""
    return {
        "compile_config": _hash(sorted(asdict(config).items())),
        "compiler_version": _hash(COMPILER_VERSION),
    }


def key_of(factors):
    return _hash(sorted(factors.items()))


REFERENCE_CASES = {"default": ToyConfig(), "fast": ToyConfig(opt_level=3)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--explain", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.parse_args()
    cases = {}
    for name, config in REFERENCE_CASES.items():
        factors = cache_key_factors(config)
        cases[name] = {"factors": factors, "key": key_of(factors)}
    print(json.dumps({"cases": cases}))


if __name__ == "__main__":
    main()
'''

UTIL_PY = """\
def describe(config):
    return f"toy compiler at -O{config.opt_level}"
"""

REVIEWBOT_YML = """\
cache_key:
  roots: [toyc.cache_key.cache_key_factors, toyc.config.ToyConfig]
  probe:
    command: python -m toyc.cache_key --explain --json
    timeout_s: 60
"""

FILES = {
    "toyc/__init__.py": "",
    "toyc/config.py": CONFIG_PY,
    "toyc/cache_key.py": CACHE_KEY_PY,
    "toyc/util.py": UTIL_PY,
    ".reviewbot.yml": REVIEWBOT_YML,
}


def add_placement_factor(source: str) -> str:
    """`cache_key.py` with a new `input_placements` factor in the key."""
    old = '        "compiler_version": _hash(COMPILER_VERSION),\n'
    assert old in source
    return source.replace(old, old + '        "input_placements": _hash(PLACEMENTS),\n').replace(
        'COMPILER_VERSION = "1.0"\n', 'COMPILER_VERSION = "1.0"\nPLACEMENTS = ("replicate",)\n'
    )


def cosmetic_key_edit(source: str) -> str:
    """`cache_key.py` with a new docstring, comments and reformatting: the same key."""
    old = '    """The key is made of the compile config and the compiler version."""\n'
    assert old in source
    new = (
        '    """Named factor hashes; the key directory is the hash of this dict.\n\n'
        "    Only the compile config and the compiler version matter.\n"
        '    """\n'
        "    # Keep the factor order stable: the key hashes the sorted items anyway.\n"
    )
    return source.replace(old, new).replace("def _hash(value):", "def _hash(value):  # short sha256")
