"""Magi's developer benchmarks and reports, kept out of the ``magi_compiler`` library.

The timing bench: ``python -m magi_bench`` (also ``magi-bench``). Its modules: ``models`` (the
benchmarked models and the dims presets), ``contenders`` (eager, plain ``torch.compile`` and the
three ``@magi_compile`` entry points, built on identical weights), ``timers`` (CUDA events /
``perf_counter``), ``harness`` (interleaved timing runs), ``startup`` / ``first_output`` (cold vs
warm time to first output in fresh processes), ``stats``, ``report`` (JSON document, its schema
check, the text table), ``check`` (the contract and stability checks of a JSON document),
``plot`` (optional matplotlib box plot), ``progress`` (stderr progress line), ``__main__`` (the CLI).

Besides it: ``aot_startup`` (JIT vs AOT time to first output, ``python -m magi_bench.aot_startup``),
``overlap_report`` and ``overlap`` (the FSDP overlap pass's all-gathers before and after it, and
its training-step timing, ``python -m magi_bench.overlap_report`` / ``.overlap``), with their
``toy_model`` (``TinyTransformer``) and ``process_group`` (torchrun or one-rank gloo setup).
"""
