"""Compile configuration: ``CompileConfig`` with a nested ``FSDPConfig``.

Values come from, in priority order: a ``config_patch`` (applied by the caller with
:func:`apply_config_patch`), the environment, the field defaults. Every top-level field
``name`` is read from ``MAGI_COMPILE_<NAME>``; every FSDP field from
``MAGI_COMPILE_FSDP__<NAME>``. A malformed value raises ``ValueError`` naming the variable.

Fields whose metadata says ``hash=False`` do not change generated code and stay out of
``config.hash`` (and hence out of the artifact-cache key); every other field is hashed.
Only torch-free standard library code lives here so the config can be read anywhere.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from magi_compiler.log import parse_level

ENV_PREFIX = "MAGI_COMPILE_"
FSDP_ENV_PREFIX = "MAGI_COMPILE_FSDP__"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


class CompileMode(enum.Enum):
    """``NONE`` runs eagerly, ``TORCH_COMPILE`` uses plain ``torch.compile``, ``MAGI_COMPILE`` uses MagiBackend."""

    NONE = "NONE"
    TORCH_COMPILE = "TORCH_COMPILE"
    MAGI_COMPILE = "MAGI_COMPILE"


class CudaGraphMode(enum.Enum):
    """``NONE`` captures nothing, ``PIECEWISE`` captures each compiled piece (splitting ops run
    eagerly between the graphs), ``FULL`` captures the whole compiled graph as one graph."""

    NONE = "NONE"
    PIECEWISE = "PIECEWISE"
    FULL = "FULL"


DEFAULT_MAX_CAPTURE_SIZE = 512


def default_capture_sizes(max_size: int = DEFAULT_MAX_CAPTURE_SIZE) -> list[int]:
    """``[1, 2, 4]``, then every 8 below 256, then every 16 up to ``max_size`` (inclusive)."""
    if max_size < 1:
        raise ValueError(f"the largest capture size must be >= 1, got {max_size}")
    sizes = [1, 2, 4, *range(8, 256, 8), *range(256, max_size + 1, 16)]
    return [size for size in sizes if size <= max_size]


BUCKET_MODES = ("none", "coalesced")
BACKENDS = ("inductor", "eager")


_NO_HASH = types.MappingProxyType({"hash": False})


def _no_hash(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    return dataclasses.field(default=default, metadata=_NO_HASH, **kwargs)


@dataclasses.dataclass
class FSDPConfig:
    """SimpleFSDP settings; all of them change generated code, so all are hashed."""

    enable_fsdp: bool = False
    bucket_mode: str = "coalesced"
    bucket_size_mib: int = 64
    prefetch_depth: int = 1

    def __post_init__(self) -> None:
        if self.bucket_mode not in BUCKET_MODES:
            raise ValueError(f"fsdp.bucket_mode must be one of {BUCKET_MODES}, got {self.bucket_mode!r}")
        if self.bucket_size_mib <= 0:
            raise ValueError(f"fsdp.bucket_size_mib must be positive, got {self.bucket_size_mib}")
        if self.prefetch_depth < 0:
            raise ValueError(f"fsdp.prefetch_depth must be >= 0, got {self.prefetch_depth}")


@dataclasses.dataclass
class CompileConfig:
    """The configuration of one decorated entry.

    ``splitting_ops`` names custom ops (``"ns::op"`` or ``"ns.op"``, optionally with an
    overload) at which the graph is split into separately compiled pieces; a name of another
    shape is a ``ValueError`` (it could match no op), and an entry logs at its first compile the
    names that no registered op has.
    ``bytecode_swap`` lets later calls run Dynamo's captured bytecode directly, skipping
    guard evaluation (see ``entry_state.EntryState`` for the contract).
    ``log_level`` (a level name such as ``"DEBUG"``, or empty) is the entry's own level: the
    package's records made during its calls are judged against it, and nothing else's level
    changes (:mod:`magi_compiler.log`); a name that is not a level raises ``ValueError`` at the
    entry's first call.

    ``cudagraph_mode`` and ``cudagraph_capture_sizes`` (see :mod:`magi_compiler.cudagraph` and
    docs/cudagraphs.md) apply only on CUDA; elsewhere a mode other than ``NONE`` is logged once
    and ignored. ``FULL`` needs every splitting op compiled into the graph: with
    ``splitting_ops`` set it requires ``disable_graph_split`` (else ``ValueError``). Capture sizes
    are the sizes of the one dynamic dim that get a graph (positive integers; stored sorted and
    without duplicates). The first call captures the largest size and its own, later sizes are
    captured on first use; ``cudagraph_capture_all`` makes the first call capture every size (no
    capture after it). These fields stay out of the artifact-cache key: CUDA graphs are never
    saved (a warm process loads the same Inductor artifacts and captures again), and capturing
    does not change the code Inductor generates.
    """

    compile_mode: CompileMode = CompileMode.MAGI_COMPILE
    backend: str = "inductor"
    cache_root_dir: str = _no_hash("~/.cache/magi_compiler")
    disable_cache: bool = _no_hash(False)
    assert_cache_hit: bool = _no_hash(False)
    aot: bool = False
    splitting_ops: list[str] = dataclasses.field(default_factory=list)
    disable_graph_split: bool = False
    bytecode_swap: bool = _no_hash(True)
    log_level: str = _no_hash("")
    cudagraph_mode: CudaGraphMode = dataclasses.field(default=CudaGraphMode.NONE, metadata=_NO_HASH)
    cudagraph_capture_sizes: list[int] = dataclasses.field(default_factory=default_capture_sizes, metadata=_NO_HASH)
    cudagraph_capture_all: bool = _no_hash(False)
    fsdp: FSDPConfig = dataclasses.field(default_factory=FSDPConfig)

    def __post_init__(self) -> None:
        if not isinstance(self.compile_mode, CompileMode):
            raise TypeError(f"compile_mode must be a CompileMode, got {self.compile_mode!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {self.backend!r}")
        if not isinstance(self.splitting_ops, list) or not all(isinstance(op, str) for op in self.splitting_ops):
            raise TypeError(f"splitting_ops must be a list of op names, got {self.splitting_ops!r}")
        for op in self.splitting_ops:
            op_name_parts(op)
        if not isinstance(self.fsdp, FSDPConfig):
            raise TypeError(f"fsdp must be an FSDPConfig, got {type(self.fsdp).__name__}")
        if not isinstance(self.cudagraph_mode, CudaGraphMode):
            raise TypeError(f"cudagraph_mode must be a CudaGraphMode, got {self.cudagraph_mode!r}")
        if self.log_level.strip():  # checked here, not only when an entry is built, so a typo fails at once
            parse_level(self.log_level, "log_level")
        sizes = self.cudagraph_capture_sizes
        if (
            not isinstance(sizes, list)
            or not sizes
            or not all(isinstance(size, int) and not isinstance(size, bool) and size >= 1 for size in sizes)
        ):
            raise ValueError(f"cudagraph_capture_sizes must be a non-empty list of positive integers, got {sizes!r}")
        self.cudagraph_capture_sizes = sorted(set(sizes))
        if self.cudagraph_mode is CudaGraphMode.FULL and self.splitting_ops and not self.disable_graph_split:
            raise ValueError(
                f"cudagraph_mode=FULL captures the whole graph, but splitting_ops {self.splitting_ops} would run "
                "eagerly between pieces; use cudagraph_mode=PIECEWISE, or set disable_graph_split=True "
                "(the splitting ops are then compiled into the graph and must be capturable)"
            )

    @property
    def hash(self) -> str:
        """A stable hash (hex) of every field that affects generated code."""
        payload = json.dumps(_hashed_fields(self), sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def resolved_cache_root_dir(self) -> str:
        return os.path.abspath(os.path.expanduser(self.cache_root_dir))

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> CompileConfig:
        """Defaults overridden by ``MAGI_COMPILE_*`` variables of ``environ`` (default: ``os.environ``)."""
        env = os.environ if environ is None else environ
        fsdp_values = _read_env_fields(FSDPConfig, FSDP_ENV_PREFIX, env)
        values = _read_env_fields(cls, ENV_PREFIX, env, skip=("fsdp",))
        try:
            return cls(fsdp=FSDPConfig(**fsdp_values), **values)
        except ValueError as err:
            names = sorted(ENV_PREFIX + k.upper() for k in values) + sorted(
                FSDP_ENV_PREFIX + k.upper() for k in fsdp_values
            )
            raise ValueError(f"{err} (set through the environment variables {', '.join(names)})") from None


def op_name_parts(name: str) -> tuple[str, str, str | None]:
    """``(namespace, op, overload or None)`` of a splitting op's name (``"ns::op"``, ``"ns.op"``,
    either with ``".overload"``); a name of another shape can match no op: ``ValueError``."""
    namespace, _, rest = name.partition("::") if "::" in name else name.partition(".")
    parts = rest.split(".")
    if not namespace or not rest or len(parts) > 2 or not all(parts):
        raise ValueError(
            f"splitting_ops: {name!r} is not an op name (use 'namespace::op' or 'namespace.op', "
            "optionally followed by '.overload')"
        )
    return namespace, parts[0], parts[1] if len(parts) == 2 else None


ConfigPatch = Callable[[CompileConfig], "CompileConfig | None"] | Mapping[str, Any] | None


def apply_config_patch(config: CompileConfig, patch: ConfigPatch) -> CompileConfig:
    """Return ``config`` with ``patch`` applied; the result is validated again.

    A callable patch receives a copy and may mutate it or return a new config; a mapping
    patch sets fields by name, with ``"fsdp"`` given as a mapping of FSDP fields.
    """
    config = _copy(config)
    if patch is None:
        return config
    if callable(patch):
        result = patch(config)
        config = config if result is None else result
        if not isinstance(config, CompileConfig):
            raise TypeError(f"config_patch must return a CompileConfig or None, got {type(config).__name__}")
        return _copy(config)
    if not isinstance(patch, Mapping):
        raise TypeError(f"config_patch must be a callable, a mapping or None, got {type(patch).__name__}")
    updates = dict(patch)
    fsdp_updates = updates.pop("fsdp", None)
    _check_names(CompileConfig, updates)
    for name, enum_cls in (("compile_mode", CompileMode), ("cudagraph_mode", CudaGraphMode)):
        if name in updates:
            updates[name] = _parse_enum(enum_cls, updates[name], name)
    if fsdp_updates is not None:
        if isinstance(fsdp_updates, FSDPConfig):
            updates["fsdp"] = fsdp_updates
        else:
            _check_names(FSDPConfig, fsdp_updates)
            updates["fsdp"] = dataclasses.replace(config.fsdp, **fsdp_updates)
    return dataclasses.replace(config, **updates)


def _copy(config: CompileConfig) -> CompileConfig:
    return dataclasses.replace(
        config,
        splitting_ops=list(config.splitting_ops),
        cudagraph_capture_sizes=list(config.cudagraph_capture_sizes),
        fsdp=dataclasses.replace(config.fsdp),
    )


def _check_names(cls: type, updates: Mapping[str, Any]) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(updates) - known)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} field(s) in config_patch: {unknown}; known: {sorted(known)}")


def _hashed_fields(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        if not f.metadata.get("hash", True):
            continue
        value = getattr(obj, f.name)
        if dataclasses.is_dataclass(value):
            out[f.name] = _hashed_fields(value)
        elif isinstance(value, enum.Enum):
            out[f.name] = value.name
        else:
            out[f.name] = value
    return out


def _read_env_fields(cls: type, prefix: str, env: Mapping[str, str], skip: tuple[str, ...] = ()) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        var = prefix + f.name.upper()
        raw = env.get(var)
        if raw is not None:
            values[f.name] = _parse_env_value(hints[f.name], raw, var)
    return values


def _parse_env_value(hint: Any, raw: str, var: str) -> Any:
    text = raw.strip()
    if hint is bool:
        lowered = text.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise ValueError(f"{var}={raw!r} is not a boolean (use one of {sorted(_TRUE | _FALSE)})")
    if hint is int:
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{var}={raw!r} is not an integer") from None
    if hint is str:
        return text
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _parse_enum(hint, text, var)
    if hint == list[int]:
        return _parse_int_list(text, raw, var)
    if typing.get_origin(hint) is list or (isinstance(hint, types.GenericAlias) and hint.__origin__ is list):
        if text.startswith("["):
            try:
                parsed = json.loads(text)
            except json.JSONDecodeError as err:
                raise ValueError(f"{var}={raw!r} is not a JSON list of strings: {err}") from None
            if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
                raise ValueError(f"{var}={raw!r} is not a JSON list of strings")
            return parsed
        return [item.strip() for item in text.split(",") if item.strip()]
    raise AssertionError(f"no environment parser for the type {hint!r} of {var}")


def _parse_int_list(text: str, raw: str, var: str) -> list[int]:
    """``"1,2,4"`` or a JSON list ``"[1, 2, 4]"``."""
    items = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    try:
        return [int(item) for item in items.split(",") if item.strip()]
    except ValueError:
        raise ValueError(f"{var}={raw!r} is not a list of integers (use e.g. 1,2,4,8)") from None


def _parse_enum(enum_cls: type[enum.Enum], value: Any, name: str) -> enum.Enum:
    if isinstance(value, enum_cls):
        return value
    if isinstance(value, str):
        for member in enum_cls:
            if member.name == value.strip().upper():
                return member
    choices = [m.name for m in enum_cls]
    raise ValueError(f"{name}={value!r} is not one of {choices}")
