"""SimpleFSDP-style data parallelism over DTensor parameters: see `data_parallel`."""

from magi_compiler.distributed.data_parallel import DataParallelMode, data_parallel, gather_for_compute

__all__ = ["DataParallelMode", "data_parallel", "gather_for_compute"]
