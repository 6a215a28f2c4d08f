"""magi_compiler: a ``torch.compile`` backend with a persistent compiled-artifact cache."""

from magi_compiler.config import CompileConfig, CompileMode, FSDPConfig
from magi_compiler.counters import compilation_counter
from magi_compiler.decorator import get_entry_state, magi_compile

__all__ = ["CompileConfig", "CompileMode", "FSDPConfig", "compilation_counter", "get_entry_state", "magi_compile"]
