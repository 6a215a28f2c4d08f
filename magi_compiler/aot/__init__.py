"""AOT mode: compile each entry ahead of time, save beside the Magi cache, load in later processes.

See ``docs/aot.md``. Modules: ``serializable`` (the backend output Dynamo can save),
``artifact`` (file format, atomic save, validated load), ``compile`` (the protected AOT compile
call), ``fallback`` (what falls back to JIT), ``entry`` (one entry's AOT dispatch).
"""

from magi_compiler.aot.entry import AOTEntry
from magi_compiler.aot.fallback import AOTUnsupportedError
from magi_compiler.aot.serializable import SerializableCompiledGraph, SerializingBackend

__all__ = ["AOTEntry", "AOTUnsupportedError", "SerializableCompiledGraph", "SerializingBackend"]
