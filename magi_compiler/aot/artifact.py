"""The on-disk AOT artifact of one entry: format, atomic save, validated load.

File layout: ``MAGIC``, an 8-byte big-endian header length, a JSON header
(``format``, ``torch_version``, ``python_version``, ``entry``, ``payload_sha256``), then the
payload: a pickled list of Dynamo-serialised ``AOTCompiledFunction`` blobs (one per guard set).

A missing file is a plain miss. A file whose magic, header, checksum or versions do not match,
whose functions Dynamo refuses to load (``SystemInfo`` mismatch, ...), or whose traced sources
changed since it was written is a miss *with a warning*; the caller decides whether a miss is an
error (``assert_cache_hit``). The payload is unpickled only after its checksum matched.
"""

from __future__ import annotations

import hashlib
import inspect
import io
import json
import logging
import os
import pickle
import platform
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from magi_compiler.log import EntryLevelLogger

logger = EntryLevelLogger(logging.getLogger(__name__))

MAGIC = b"MAGI-AOT\n"
FORMAT_VERSION = 1
_HEADER_LEN_BYTES = 8


class ArtifactRejected(Exception):
    """An artifact file exists but cannot be used; the message says why."""


def _current_versions() -> dict[str, Any]:
    return {
        "format": FORMAT_VERSION,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
    }


def serialize_compiled_function(fn: Any) -> bytes:
    """Dynamo's serialisation of an ``AOTCompiledFunction`` as bytes.

    torch 2.13 returns ``AOTCompileSaveResult(serialized_data=...)``; older releases (2.11)
    return the bytes directly.
    """
    result = type(fn).serialize(fn)
    if isinstance(result, bytes):
        return result
    return result.serialized_data


def _atomic_write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.name}.", delete=False) as tmp:
        tmp.write(data)
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, path)


def save_artifact(path: Path, entry: str, compiled_functions: list[Any]) -> None:
    """Write the artifact of ``entry`` atomically. Call only after every compile succeeded."""
    assert compiled_functions, "an AOT artifact holds at least one compiled function"
    payload = pickle.dumps([serialize_compiled_function(fn) for fn in compiled_functions])
    header = dict(_current_versions(), entry=entry, payload_sha256=hashlib.sha256(payload).hexdigest())
    header_bytes = json.dumps(header, sort_keys=True).encode()
    _atomic_write(path, MAGIC + len(header_bytes).to_bytes(_HEADER_LEN_BYTES, "big") + header_bytes + payload)


def _read_payload(path: Path, entry: str) -> bytes:
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ArtifactRejected("not a Magi AOT artifact (bad magic)")
    start = len(MAGIC) + _HEADER_LEN_BYTES
    header_len = int.from_bytes(data[len(MAGIC) : start], "big")
    try:
        header = json.loads(data[start : start + header_len])
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ArtifactRejected(f"unreadable header ({error})") from error
    if not isinstance(header, dict):
        raise ArtifactRejected("unreadable header (not an object)")
    payload = data[start + header_len :]
    if header.get("payload_sha256") != hashlib.sha256(payload).hexdigest():
        raise ArtifactRejected("payload checksum mismatch (truncated or corrupt file)")
    for field, expected in _current_versions().items():
        if header.get(field) != expected:
            raise ArtifactRejected(f"incompatible {field}: artifact has {header.get(field)!r}, running {expected!r}")
    if header.get("entry") != entry:
        raise ArtifactRejected(f"artifact belongs to entry {header.get('entry')!r}")
    return payload


def _stale_source(fn: Any) -> str | None:
    """The first traced source region that changed since compile time, or None."""
    for source in fn.source_info().inlined_sources:
        module = sys.modules.get(source.module)
        if module is None:
            return f"module {source.module} is not imported"
        lines = inspect.getsourcelines(module)[0][source.firstlineno - 1 : source.lastlineno - 1]
        if hashlib.sha256("".join(lines).encode()).hexdigest() != source.checksum:
            return f"{source.module} lines {source.firstlineno}-{source.lastlineno}"
    return None


def load_artifact(path: Path, entry: str, f_globals: dict[str, Any]) -> list[Any] | None:
    """The compiled functions saved for ``entry``, or None on a miss (a warning says why, unless absent)."""
    if not path.exists():
        logger.info("AOT artifact miss for %s: %s does not exist", entry, path)
        return None
    try:
        blobs = pickle.loads(_read_payload(path, entry))
    except ArtifactRejected as reason:
        logger.warning("AOT artifact %s for %s rejected, treating as a cache miss: %s", path, entry, reason)
        return None
    functions = []
    for blob in blobs:
        try:
            fn = torch.compiler.load_compiled_function(io.BytesIO(blob), f_globals=f_globals)
        # RuntimeError: Dynamo's SystemInfo check (other GPU / toolkit); ImportError, AttributeError
        # and UnpicklingError: a module, class or function the artifact names no longer exists.
        except (RuntimeError, ImportError, AttributeError, pickle.UnpicklingError) as error:
            if isinstance(error, torch.OutOfMemoryError):
                raise
            logger.warning("AOT artifact %s for %s cannot be loaded, treating as a cache miss: %s", path, entry, error)
            return None
        stale = _stale_source(fn)
        if stale is not None:
            logger.warning(
                "AOT artifact %s for %s is stale (traced source changed: %s), treating as a cache miss",
                path,
                entry,
                stale,
            )
            return None
        functions.append(fn)
    return functions
