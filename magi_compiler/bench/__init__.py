"""The timing bench of ``magi_compiler``: ``python -m magi_compiler.bench`` (also ``magi-bench``).

Modules: ``models`` (the benchmarked models and the dims presets), ``contenders`` (eager,
plain ``torch.compile`` and the three ``@magi_compile`` entry points, built on identical
weights), ``timers`` (CUDA events / ``perf_counter``), ``harness`` (interleaved timing runs),
``startup`` / ``first_output`` (cold vs warm time to first output in fresh processes),
``stats``, ``report`` (JSON document, its schema check, the text table), ``plot``
(optional matplotlib box plot), ``progress`` (stderr progress line), ``__main__`` (the CLI).
"""
