"""The on-disk artifact cache: directory layout (``layout``), the locked index and atomic
writes (``index``). Saving and loading the artifacts themselves is ``compiler_interface``'s job."""

from magi_compiler.cache.index import ArtifactIndex, ArtifactKey, atomic_write_bytes
from magi_compiler.cache.layout import distributed_rank_and_world, model_cache_dir

__all__ = ["ArtifactIndex", "ArtifactKey", "atomic_write_bytes", "distributed_rank_and_world", "model_cache_dir"]
