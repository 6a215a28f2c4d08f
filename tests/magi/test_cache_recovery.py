"""A corrupt index, a deleted artifact directory and a corrupt artifact are cache misses
with a warning; the model recompiles and still computes the right thing."""

import glob
import logging
import os

import pytest
import torch

from magi_compiler import compilation_counter
from magi_compiler.backend import MagiBackend
from magi_compiler.cache import ArtifactIndex, ArtifactKey
from magi_compiler.config import CompileConfig


def softsign_plus(x):
    return torch.nn.functional.softsign(x) + x * 0.5


@pytest.fixture
def magi_warnings(caplog):
    """Captured WARNING records of the magi_compiler loggers."""
    with caplog.at_level(logging.WARNING, logger="magi_compiler"):
        yield caplog


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
    (artifact,) = glob.glob(f"{cache_dir}/artifacts/graph0_*_piece0_inductor.bin")
    with open(artifact, "wb") as handle:
        handle.write(b"not an artifact")
    _run_expecting(root, x, num_cache_misses=1, num_inductor_compiles=1)
    assert "could not be loaded" in magi_warnings.text


def softsign_minus(x):
    return torch.nn.functional.softsign(x) - x * 0.5


def _run_minus(root, x, **deltas) -> MagiBackend:
    torch._dynamo.reset()
    backend = MagiBackend(CompileConfig(cache_root_dir=str(root)), model_index=0, model_tag="recovery")
    compiled = torch.compile(softsign_minus, fullgraph=True, backend=backend)
    with compilation_counter.expect(**deltas):
        torch.testing.assert_close(compiled(x), softsign_minus(x))
    return backend


def test_a_different_graph_under_the_same_number_is_cached_beside_it(baked, caplog):
    """Same model directory and graph number, other code (the traced file is the same, so the
    key is too), as when a process calls the model in another order: the cached artifact is not
    used for it, it is stored under a new number, and each graph then hits under its own."""
    root, cache_dir, x = baked
    with caplog.at_level(logging.INFO, logger="magi_compiler"):
        backend = _run_minus(root, x, num_cache_hits=0, num_cache_misses=1, num_inductor_compiles=1)
    assert backend.cache_dir == cache_dir
    assert "graph 0 is cached as graph 1 (number 0 holds another graph" in caplog.text
    index = ArtifactIndex(cache_dir)
    plus, minus = index.graph_code_hash(0), index.graph_code_hash(1)
    assert None not in (plus, minus) and plus != minus
    assert (index.graph_with_code(plus), index.graph_with_code(minus), index.free_graph()) == (0, 1, 2)
    _run_minus(root, x, num_cache_hits=1, num_inductor_compiles=0)
    _run_expecting(root, x, num_cache_hits=1, num_inductor_compiles=0)


def test_unsaveable_dtensor_graph_is_a_logged_miss(single_rank_mesh, tmp_path, magi_warnings):
    """Inductor cannot serialize a graph with DTensor inputs on some torch versions: the
    compile must still succeed, the failure is logged, and the index holds no artifact."""
    from torch.distributed.tensor import DTensor, Replicate, Shard

    weight = DTensor.from_local(torch.randn(4, 4), single_rank_mesh, [Shard(0)])

    def project(x, w):
        return torch.relu(x @ w.redistribute(single_rank_mesh, [Replicate()]).to_local())

    torch._dynamo.reset()
    backend = MagiBackend(CompileConfig(cache_root_dir=str(tmp_path)), model_index=0, model_tag="dtensor")
    compiled = torch.compile(project, fullgraph=True, backend=backend)
    x = torch.randn(3, 4)
    saves_before = compilation_counter.num_cache_saves
    failures_before = compilation_counter.num_cache_save_failures
    torch.testing.assert_close(compiled(x, weight), project(x, weight))
    saved = compilation_counter.num_cache_saves - saves_before
    failed = compilation_counter.num_cache_save_failures - failures_before
    assert saved + failed == 1
    index = ArtifactIndex(backend.cache_dir)
    stored = index.lookup(0, ArtifactKey("general", 0, "inductor"))
    if failed:
        assert "could not save compiled artifact" in magi_warnings.text
        assert stored is None
    else:  # this torch serializes DTensor graphs: the artifact must then be usable
        assert stored is not None and os.path.isfile(stored)
