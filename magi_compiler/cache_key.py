"""The artifact-cache key: the single place that decides what feeds it.

``cache_key_factors`` returns, in this order, the factors ``compile_config``,
``inductor_config``, ``compiler_version``, ``compiler_source``, ``traced_sources`` and
``input_placements``;
``cache_key`` hashes that dict into the key directory name. Nothing else feeds the key:
the graph's code and plain-tensor dtypes are deliberately left out (Dynamo's restart
analysis traces one graph twice with different code, and both traces must share one
directory), and so is machine-location data (paths, home directory, hostname), so a cache
built on one machine can be used on another.

``python -m magi_compiler.cache_key --explain [--json]`` prints the factors and the key of
the built-in reference cases, and the files whose bytes ``compiler_source`` hashes; the review
bot compares that output between two revisions, and its release notes count any commit that
changes one of those files as a key change.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from magi_compiler.config import CompileConfig, apply_config_patch
from magi_compiler.log import configure_cli
from magi_compiler.placement_hash import compute_input_placement_hash

FACTOR_NAMES = (
    "compile_config",
    "inductor_config",
    "compiler_version",
    "compiler_source",
    "traced_sources",
    "input_placements",
)

# magi_compiler's modules that shape the generated code or the artifacts (paths relative to the
# package): an edit to one must select a new cache directory. Every module of ``passes/`` counts.
# Add a module here when it starts to change what is compiled or saved.
GENERATED_CODE_MODULES = (
    "backend.py",
    "splitting.py",
    "compiler_interface.py",
    "dynamic_dims.py",
    "placement_hash.py",
    "aot/serializable.py",
    "aot/artifact.py",
    "distributed/data_parallel.py",
)
_PACKAGE_DIR = Path(__file__).resolve().parent

# Inductor options naming places on this machine: they do not change generated code and
# would keep a cache from being reused elsewhere.
_LOCATION_OPTION = re.compile(r"(^|[._])(dir|path|paths)$")

MAGI_COMPILER_VERSION = "0.1.0"


def _digest(payload: str) -> str:
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def _portable_value(value: Any) -> Any:
    """JSON-able stand-in for an Inductor option value; never an object address."""
    if hasattr(value, "uuid") and callable(value.uuid):
        return f"uuid:{value.uuid()}"
    if callable(value):
        return f"callable:{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', type(value).__name__)}"
    return f"type:{type(value).__module__}.{type(value).__qualname__}"


def inductor_config_hash() -> str:
    """Hash of Inductor's portable config, machine-location options excluded."""
    import torch._inductor.config as inductor_config

    options = {
        name: value
        for name, value in inductor_config.save_config_portable().items()
        if not _LOCATION_OPTION.search(name)
    }
    return _digest(json.dumps(options, sort_keys=True, default=_portable_value))


def compiler_version_hash() -> str:
    """Hash of the torch build (version, git revision, CUDA/HIP), this package's version and Python's."""
    parts = {
        "torch": torch.__version__,
        "torch_git": getattr(torch.version, "git_version", ""),
        "cuda": str(torch.version.cuda),
        "hip": str(getattr(torch.version, "hip", None)),
        "magi_compiler": MAGI_COMPILER_VERSION,
        "python": ".".join(platform.python_version_tuple()[:2]),
    }
    return _digest(json.dumps(parts, sort_keys=True))


def compiler_source_modules(package_dir: Path = _PACKAGE_DIR) -> list[str]:
    """``GENERATED_CODE_MODULES`` and every module of ``passes/`` under ``package_dir``, sorted,
    as paths relative to ``package_dir``: what ``compiler_source_hash`` hashes."""
    return sorted({*GENERATED_CODE_MODULES, *(f"passes/{p.name}" for p in (package_dir / "passes").glob("*.py"))})


def compiler_source_hash(package_dir: Path = _PACKAGE_DIR) -> str:
    """Hash of the source of ``compiler_source_modules(package_dir)``, by relative path (a
    relocated install keeps its key)."""
    modules = compiler_source_modules(package_dir)
    digests = {name: hashlib.sha256((package_dir / name).read_bytes()).hexdigest() for name in modules}
    return _digest(json.dumps(digests, sort_keys=True))


def traced_sources_hash(traced_files: Sequence[str]) -> str:
    """Hash of the contents of the source files Dynamo traced.

    Only contents count, not paths (a relocated checkout keeps its key). Names that are not
    readable files (``<string>``, ``<eval ...>``) are skipped.
    """
    digests = set()
    for path in set(traced_files):
        if not os.path.isfile(path):
            continue
        with open(path, "rb") as handle:
            digests.add(hashlib.sha256(handle.read()).hexdigest())
    return _digest(json.dumps(sorted(digests)))


def cache_key_factors(
    config: CompileConfig, traced_files: Sequence[str], example_inputs: Sequence[object]
) -> dict[str, str]:
    """The named factors of the artifact-cache key, in the documented order."""
    return {
        "compile_config": config.hash,
        "inductor_config": inductor_config_hash(),
        "compiler_version": compiler_version_hash(),
        "compiler_source": compiler_source_hash(),
        "traced_sources": traced_sources_hash(traced_files),
        "input_placements": compute_input_placement_hash(example_inputs),
    }


def cache_key(factors: dict[str, str]) -> str:
    """The key directory name for ``factors`` (order-sensitive by design)."""
    assert tuple(factors) == FACTOR_NAMES, f"unexpected cache-key factors {tuple(factors)}"
    return _digest(json.dumps(list(factors.items())))


def _reference_source() -> str:
    from magi_compiler import reference_model

    return reference_model.__file__


REFERENCE_CASES: dict[str, Callable[[CompileConfig], CompileConfig | None] | dict[str, Any]] = {
    "default": {},
    "backend_eager": {"backend": "eager"},
    "fsdp_bucket_16mib": {"fsdp": {"bucket_size_mib": 16}},
    "fsdp_enabled": {"fsdp": {"enable_fsdp": True}},
    "split_at_attention": {"splitting_ops": ["magi::attention"]},
}


def explain(include_environment: bool = False) -> dict[str, dict[str, Any]]:
    """Factors and key of every reference case, computed from default configs (the
    environment is ignored so the output depends on the code only); with
    ``include_environment``, also the case ``environment``: the config that
    ``MAGI_COMPILE_*`` variables give, on the reference model.

    ``sources`` maps each factor that hashes source files by their bytes to those files, as
    paths relative to the directory holding the package (the repository root of a checkout)."""
    configs = {name: apply_config_patch(CompileConfig(), patch) for name, patch in REFERENCE_CASES.items()}
    if include_environment:
        configs["environment"] = CompileConfig.from_env()
    cases: dict[str, dict[str, Any]] = {}
    for name, config in configs.items():
        factors = cache_key_factors(config, [_reference_source()], [])
        cases[name] = {"factors": factors, "key": cache_key(factors)}
    package = _PACKAGE_DIR.name
    return {"cases": cases, "sources": {"compiler_source": [f"{package}/{m}" for m in compiler_source_modules()]}}


def main(argv: Sequence[str] | None = None) -> int:
    configure_cli()
    parser = argparse.ArgumentParser(prog="python -m magi_compiler.cache_key", description=__doc__.split("\n\n")[0])
    parser.add_argument("--explain", action="store_true", help="print the factors and key of each reference case")
    parser.add_argument(
        "--json", action="store_true", help="print JSON: {cases: {NAME: {factors, key}}, sources: {FACTOR: [PATH]}}"
    )
    parser.add_argument(
        "--from-env", action="store_true", help="add the case 'environment': the config MAGI_COMPILE_* variables give"
    )
    args = parser.parse_args(argv)
    if not args.explain:
        parser.error("nothing to do: pass --explain")
    if args.from_env:
        try:
            CompileConfig.from_env()
        except ValueError as exc:  # a malformed MAGI_COMPILE_* value, named in the message
            print(f"{parser.prog}: {exc}", file=sys.stderr)
            return 2
    report = explain(include_environment=args.from_env)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    for name, case in report["cases"].items():
        print(f"{name}: key={case['key']}")
        for factor, value in case["factors"].items():
            print(f"  {factor:<17} {value}")
    for factor, paths in report["sources"].items():
        print(f"{factor} hashes the bytes of: {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
