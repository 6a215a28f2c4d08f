"""A toy compiler whose cache key hashes the bytes of its code generator, `toyc/codegen.py`, and
whose probe (`python -m toyc.key`) lists that file under `"sources"` (not with `--no-sources`).
Shared by the engine and service tests of the hashed-source key change."""

from __future__ import annotations

KEY_PY = '''
"""Cache key of the toy compiler: the optimisation level and the bytes of the code generator."""

import hashlib
import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
HASHED = ["toyc/codegen.py"]


def digest(data):
    return hashlib.sha256(data).hexdigest()[:12]


def source_hash():
    return digest(b"".join((ROOT / path).read_bytes() for path in HASHED))


def key_factors(level):
    return {"level": digest(str(level).encode()), "codegen_source": source_hash()}


if __name__ == "__main__":
    cases = {}
    for name, level in (("o1", 1), ("o2", 2)):
        factors = key_factors(level)
        cases[name] = {"factors": factors, "key": digest(json.dumps(factors).encode())}
    out = {"cases": cases}
    if "--no-sources" not in sys.argv:
        out["sources"] = {"codegen_source": HASHED}
    print(json.dumps(out))
'''

CODEGEN_PY = """
def emit(ops):
    return "\\n".join(op.lower() for op in ops)
"""
LOGGED_CODEGEN_PY = """
import logging

logger = logging.getLogger(__name__)


def emit(ops):
    logger.debug("emitting %d ops", len(ops))
    return "\\n".join(op.lower() for op in ops)
"""

YML = """
cache_key:
  roots: [toyc.key.key_factors]
  probe:
    command: python -m toyc.key{args}
    timeout_s: 60
"""


def toy_files(probe_args: str = "") -> dict[str, str]:
    """The toy project's files at its first commit; `probe_args` is appended to the probe command."""
    return {
        "toyc/__init__.py": "",
        "toyc/key.py": KEY_PY,
        "toyc/codegen.py": CODEGEN_PY,
        "toyc/util.py": "def describe():\n    return 'toy'\n",
        ".reviewbot.yml": YML.format(args=probe_args),
    }
