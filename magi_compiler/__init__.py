"""magi_compiler: a ``torch.compile`` backend with a persistent compiled-artifact cache.

The public names load on first access, so ``python -m magi_compiler.<module>`` runs its
module once (no "found in sys.modules" warning) and importing the package stays cheap.
"""

import importlib
from typing import Any

_EXPORTS = {
    "CompileConfig": "magi_compiler.config",
    "CompileMode": "magi_compiler.config",
    "CudaGraphMode": "magi_compiler.config",
    "FSDPConfig": "magi_compiler.config",
    "compilation_counter": "magi_compiler.counters",
    "get_entry_state": "magi_compiler.decorator",
    "magi_compile": "magi_compiler.decorator",
}

__all__ = [
    "CompileConfig",
    "CompileMode",
    "CudaGraphMode",
    "FSDPConfig",
    "compilation_counter",
    "get_entry_state",
    "magi_compile",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'magi_compiler' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
