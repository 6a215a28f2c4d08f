"""A corrupt index, a deleted artifact directory and a corrupt artifact are cache misses
with a warning; the model recompiles and still computes the right thing."""

import logging

import pytest
import torch

from magi_compiler import compilation_counter
from magi_compiler.backend import MagiBackend
from magi_compiler.config import CompileConfig


def softsign_plus(x):
    return torch.nn.functional.softsign(x) + x * 0.5


@pytest.fixture
def magi_warnings(caplog):
    """Captured WARNING records of the magi_compiler logger (it does not propagate to the root)."""
    logger = logging.getLogger("magi_compiler")
    logger.addHandler(caplog.handler)
    with caplog.at_level(logging.WARNING, logger="magi_compiler"):
        yield caplog
    logger.removeHandler(caplog.handler)


def compile_fresh(root):
    """A fresh MagiBackend for model index 0 (what a new process would build) and a fresh Dynamo cache."""
    torch._dynamo.reset()
    backend = MagiBackend(CompileConfig(cache_root_dir=str(root)), model_index=0, model_tag="recovery")
    return backend, torch.compile(softsign_plus, fullgraph=True, backend=backend)


@pytest.fixture(scope="module")
def baked(tmp_path_factory):
    root = tmp_path_factory.mktemp("recovery")
    backend, compiled = compile_fresh(root)
    x = torch.randn(4, 3)
    with compilation_counter.expect(num_cache_misses=1, num_cache_saves=1):
        torch.testing.assert_close(compiled(x), softsign_plus(x))
    return root, backend.cache_dir, x


def _run_expecting(root, x, **deltas):
    backend, compiled = compile_fresh(root)
    with compilation_counter.expect(**deltas):
        torch.testing.assert_close(compiled(x), softsign_plus(x))
    return backend


def test_warm_backend_hits(baked):
    root, cache_dir, x = baked
    backend = _run_expecting(root, x, num_cache_hits=1, num_inductor_compiles=0)
    assert backend.cache_dir == cache_dir


def test_corrupt_index_is_a_miss(baked, magi_warnings):
    root, cache_dir, x = baked
    with open(f"{cache_dir}/index.json", "w") as handle:
        handle.write('{"version": 1, "graphs": {"0": ')
    _run_expecting(root, x, num_cache_misses=1, num_inductor_compiles=1, num_cache_saves=1)
    assert "is corrupt" in magi_warnings.text
    _run_expecting(root, x, num_cache_hits=1, num_inductor_compiles=0)


def test_deleted_artifact_directory_is_a_miss(baked, magi_warnings):
    import shutil

    root, cache_dir, x = baked
    shutil.rmtree(f"{cache_dir}/artifacts")
    _run_expecting(root, x, num_cache_misses=1, num_inductor_compiles=1)
    assert "is missing" in magi_warnings.text
    _run_expecting(root, x, num_cache_hits=1, num_inductor_compiles=0)


def test_corrupt_artifact_is_a_miss(baked, magi_warnings):
    root, cache_dir, x = baked
    with open(f"{cache_dir}/artifacts/graph0_piece0_inductor.bin", "wb") as handle:
        handle.write(b"not an artifact")
    _run_expecting(root, x, num_cache_misses=1, num_inductor_compiles=1)
    assert "could not be loaded" in magi_warnings.text
