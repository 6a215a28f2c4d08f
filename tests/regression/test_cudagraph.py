"""CUDA graphs on a GPU (cudagraph_mode PIECEWISE and FULL): outputs equal the uncaptured
outputs at every capture size and at padded sizes, sizes above the largest run without graphs,
random ops draw fresh numbers on each replay, a reallocated weight is never replayed stale, the
output contract (outputs are overwritten by the entry's next call), and sizes captured after the
largest reuse its memory."""

import itertools
import logging
import os

import pytest
import torch

from magi_compiler import compilation_counter, get_entry_state, magi_compile
from magi_compiler.cudagraph import capture_records, reserved_bytes

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a CUDA device")

OP = "magi_cg_gpu_test::mix"
SIZES = [2, 4, 8]
HIDDEN = 64


@torch.library.custom_op(OP, mutates_args=())
def mix(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(x)


@mix.register_fake
def _(x):
    return torch.empty_like(x)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(3))

    def forward(self, x):
        h = torch.ops.magi_cg_gpu_test.mix(self.layers[0](x))
        h = torch.ops.magi_cg_gpu_test.mix(torch.relu(self.layers[1](h)))
        return self.layers[2](h) + x


CONFIGS = {
    "none": {"splitting_ops": [OP]},
    "piecewise": {"splitting_ops": [OP], "cudagraph_mode": "PIECEWISE"},
    "piecewise_unsplit": {"cudagraph_mode": "PIECEWISE"},
    "full": {"splitting_ops": [OP], "disable_graph_split": True, "cudagraph_mode": "FULL"},
}


def compiled_net(name, model_cls=Net, capture_all=False):
    torch.manual_seed(0)
    model = model_cls().cuda()
    patch = {**CONFIGS[name], "cudagraph_capture_sizes": SIZES, "cudagraph_capture_all": capture_all}
    return model, magi_compile(model, method_name="forward", dynamic_arg_dims={"x": 0}, config_patch=patch)


def eager(model, x):
    return type(model).forward(model, x)


@pytest.fixture(scope="module")
def cache_env(tmp_path_factory):
    """Magi's and Inductor's caches in a temp dir for this module."""
    root = tmp_path_factory.mktemp("cudagraph_cache")
    saved = {k: os.environ.get(k) for k in ("MAGI_COMPILE_CACHE_ROOT_DIR", "TORCHINDUCTOR_CACHE_DIR")}
    os.environ["MAGI_COMPILE_CACHE_ROOT_DIR"] = str(root / "magi")
    os.environ.setdefault("TORCHINDUCTOR_CACHE_DIR", str(root / "inductor"))
    yield
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def magi_log(caplog):
    with caplog.at_level(logging.INFO, logger="magi_compiler"):
        yield caplog


def close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    ("name", "capture_all"), [(name, False) for name in CONFIGS] + [("piecewise", True), ("full", True)]
)
def test_outputs_equal_uncaptured_at_capture_padded_and_larger_sizes(cache_env, magi_log, name, capture_all):
    """The first call (size 4) captures the largest size and its own (every size with
    capture_all); size 2 is captured on first use; 3 pads to 4, 5 and 7 to 8; 9 and 12 run
    without graphs."""
    model, compiled = compiled_net(name, capture_all=capture_all)
    captured = name != "none"
    records_before = len(capture_records)
    with torch.no_grad():
        x = torch.randn(4, 16, HIDDEN, device="cuda")
        with compilation_counter.expect(num_cudagraph_captures=(3 if capture_all else 2) if captured else 0):
            close(compiled(x), eager(model, x))
        with compilation_counter.expect(
            num_cudagraph_replays=6 if captured else 0,
            num_cudagraph_uncaptured_calls=2 if captured else 0,
            num_cudagraph_captures=0 if capture_all or not captured else 1,
            num_backend_compilations=0,
        ):
            for batch in (2, 8, 3, 5, 7, 4, 9, 12):
                x = torch.randn(batch, 16, HIDDEN, device="cuda")
                out = compiled(x)
                assert out.shape == x.shape
                close(out, eager(model, x))
    records = capture_records[records_before:]
    if captured:
        state = get_entry_state(model)
        assert [r.size for r in records] == [8, 4, 2], "the largest first, then the sizes of the calls"
        assert all(r.name.startswith(state.model_name) and r.seconds > 0 for r in records)
        assert records[0].bytes > 0, "the largest size, captured first, makes the pool"
        above = [r.getMessage() for r in magi_log.records if "above the largest" in r.getMessage()]
        assert len(above) == 1 and "size 9" in above[0], above
    else:
        assert records == []


OUT_OP = "magi_cg_gpu_test::mix_out"


@torch.library.custom_op(OUT_OP, mutates_args=("out",))
def mix_out(x: torch.Tensor, out: torch.Tensor) -> None:
    torch.mul(x, torch.sigmoid(x), out=out)


@mix_out.register_fake
def _(x, out):
    return None


class OutNet(Net):
    """Net with the out-parameter form of the splitting op (nothing to copy between pieces)."""

    def forward(self, x):
        h = self.layers[0](x)
        out = torch.empty_like(h)
        torch.ops.magi_cg_gpu_test.mix_out(h, out)
        h = torch.relu(self.layers[1](out))
        out2 = torch.empty_like(h)
        torch.ops.magi_cg_gpu_test.mix_out(h, out2)
        return self.layers[2](out2) + x


def test_out_parameter_splitting_op_replays_without_copies(cache_env, monkeypatch):
    """Only the entry's input is copied into its static buffer on a replay; nothing between pieces."""
    torch.manual_seed(0)
    model = OutNet().cuda()
    patch = {"splitting_ops": [OUT_OP], "cudagraph_mode": "PIECEWISE", "cudagraph_capture_sizes": SIZES}
    compiled = magi_compile(model, method_name="forward", dynamic_arg_dims={"x": 0}, config_patch=patch)
    with torch.no_grad():
        for batch in (4, 2, 3, 8, 5, 4):
            x = torch.randn(batch, 16, HIDDEN, device="cuda")
            close(compiled(x), eager(model, x))
        inputs = [torch.randn(batch, 16, HIDDEN, device="cuda") for batch in (3, 7)]
        copies = []
        copy = torch.Tensor.copy_
        monkeypatch.setattr(
            torch.Tensor, "copy_", lambda self, *a, **k: copies.append(self.shape) or copy(self, *a, **k)
        )
        with compilation_counter.expect(num_cudagraph_replays=2, num_cudagraph_captures=0):
            outputs = [compiled(x).clone() for x in inputs]
        monkeypatch.undo()
        assert copies == [torch.Size([3, 16, HIDDEN]), torch.Size([7, 16, HIDDEN])], "one input copy per call"
        for x, out in zip(inputs, outputs, strict=True):
            close(out, eager(model, x))


@pytest.mark.parametrize(("name", "replays"), [("piecewise", 3), ("full", 1)])
def test_a_capturing_call_replays_each_graph_once(cache_env, monkeypatch, name, replays):
    """PIECEWISE's capturing pass (each of the three pieces replayed once after its capture) is the
    capturing call's result, with no second pass; FULL's recording runs nothing, so its capturing
    call replays its one graph. The first call (the largest size) and a size captured on use."""
    model, compiled = compiled_net(name)
    counts = []
    replay = torch.cuda.CUDAGraph.replay
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda self: counts.append(self) or replay(self))
    with torch.no_grad():
        for batch, captures in ((8, 1), (2, 1), (2, 0)):
            counts.clear()
            x = torch.randn(batch, 16, HIDDEN, device="cuda")
            with compilation_counter.expect(num_cudagraph_captures=captures, num_cudagraph_replays=1):
                close(compiled(x), eager(model, x))
            assert len(counts) == replays, (batch, len(counts))


def test_output_contract_outputs_are_overwritten_by_the_next_call(cache_env):
    model, compiled = compiled_net("piecewise")
    with torch.no_grad():
        x1, x2 = (torch.randn(4, 16, HIDDEN, device="cuda") for _ in range(2))
        y1 = compiled(x1)
        kept = y1.clone()
        y2 = compiled(x2)
        close(kept, eager(model, x1))
        close(y2, eager(model, x2))
        assert y1.data_ptr() == y2.data_ptr(), "graph outputs live in the graph's memory"
        assert torch.equal(y1, y2), "the next call overwrites the previous outputs"
        z1 = compiled(torch.randn(3, 16, HIDDEN, device="cuda"))
        assert z1.data_ptr() == y1.data_ptr(), "a padded size's output is a slice of the same memory"


class Pooled(torch.nn.Module):
    """A model of its own (see ``Wide``), four pieces between three eager splitting ops, whose
    activations at (batch, 16384, 64) are 4 MiB per row of batch: the caching allocator's large
    blocks, which a capture of another size can reuse once no graph owns them."""

    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(HIDDEN, HIDDEN) for _ in range(4))

    def forward(self, x):
        h = x
        for layer in self.layers[:-1]:
            h = torch.ops.magi_cg_gpu_test.mix(layer(h))
        return self.layers[-1](h) + x


@pytest.mark.parametrize("name", ["piecewise", "full"])
def test_sizes_captured_after_the_largest_reserve_no_more_memory(cache_env, name):
    """Graphs keep unowned aliases of their outputs, so what the largest size's capture reserved
    is reused by every smaller size's capture (PIECEWISE: if each graph owned its outputs, the
    four pieces' outputs at size 4, 64 MiB, would not fit in what size 8 left free)."""
    model, compiled = compiled_net(name, Pooled)
    first = len(capture_records)
    with torch.no_grad():
        for batch in (8, 4, 2, 4):
            x = torch.randn(batch, 16384, HIDDEN, device="cuda")
            close(compiled(x), eager(model, x))
    grown = {record.size: record.bytes for record in capture_records[first:]}
    assert list(grown) == [8, 4, 2], grown
    assert grown[8] > 0 and grown[4] == grown[2] == 0, grown


class Noisy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(HIDDEN, HIDDEN)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x):
        h = torch.ops.magi_cg_gpu_test.mix(self.drop(self.lin(x)))
        return h, torch.rand_like(h)


@pytest.mark.parametrize("name", ["piecewise", "full"])
def test_random_ops_draw_fresh_numbers_on_each_replay(cache_env, name):
    model, compiled = compiled_net(name, Noisy)
    model.train()
    with torch.no_grad():
        x = torch.randn(4, 16, HIDDEN, device="cuda")
        reference = mix(2 * model.lin(x))
        draws = []
        with compilation_counter.expect(num_cudagraph_replays=3):
            for _ in range(3):
                draws.append(tuple(t.clone() for t in compiled(x)))
        for kept in draws:
            dropped = kept[0] == 0
            assert 0.4 < dropped.float().mean().item() < 0.6
            close(kept[0][~dropped], reference[~dropped])
            assert 0 <= kept[1].min().item() and kept[1].max().item() < 1
            assert abs(kept[1].mean().item() - 0.5) < 0.05
        for (h_a, r_a), (h_b, r_b) in itertools.pairwise(draws):
            assert not torch.equal(h_a == 0, h_b == 0), "dropout masks must differ between replays"
            assert not torch.equal(r_a, r_b), "torch.rand must differ between replays"


@pytest.mark.parametrize("name", ["piecewise", "full"])
def test_reallocated_weights_are_recaptured_never_replayed_stale(cache_env, magi_log, name):
    """A reallocation drops every graph; the next call (size 4) captures sizes 8 and 4 again."""
    model, compiled = compiled_net(name)
    with torch.no_grad():
        x = torch.randn(4, 16, HIDDEN, device="cuda")
        close(compiled(x), eager(model, x))
        with compilation_counter.expect(num_cudagraph_recaptures=0, num_cudagraph_captures=0):
            model.load_state_dict({k: torch.randn_like(v) for k, v in model.state_dict().items()})
            close(compiled(x), eager(model, x))  # in place: same addresses, new values
        with compilation_counter.expect(num_cudagraph_recaptures=1, num_cudagraph_captures=2):
            new = {k: torch.randn_like(v) for k, v in model.state_dict().items()}
            model.load_state_dict(new, assign=True)
            close(compiled(x), eager(model, x))
            close(compiled(x[:3]), eager(model, x[:3]))
        with compilation_counter.expect(num_cudagraph_recaptures=1, num_cudagraph_captures=2):
            model.cpu()
            model.cuda()
            close(compiled(x), eager(model, x))
    warnings = [r.getMessage() for r in magi_log.records if "reallocated" in r.getMessage()]
    assert len(warnings) == 2, warnings


def test_size_one_compiles_a_static_graph_that_is_captured_too(cache_env):
    model, compiled = compiled_net("piecewise")
    with torch.no_grad():
        x = torch.randn(4, 16, HIDDEN, device="cuda")
        close(compiled(x), eager(model, x))
        one = torch.randn(1, 16, HIDDEN, device="cuda")
        with compilation_counter.expect(num_cudagraph_captures=1, num_backend_compilations=1):
            close(compiled(one), eager(model, one))
        with compilation_counter.expect(num_cudagraph_replays=2, num_cudagraph_captures=0):
            close(compiled(one), eager(model, one))
            close(compiled(x), eager(model, x))
    assert capture_records[-1].size == 0, "a static graph is captured once, at its one shape"


class Wide(torch.nn.Module):
    """A model of its own (its own ``forward`` code, so Dynamo's automatic dynamic shapes do not
    carry over from ``Net``'s other input shapes)."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(HIDDEN, HIDDEN)

    def forward(self, x):
        return self.proj(x)


@pytest.mark.parametrize("name", ["piecewise", "full"])
def test_out_of_memory_at_the_largest_capture_size_names_the_setting_every_time(cache_env, name):
    model = Wide().cuda()
    patch = {**CONFIGS[name], "cudagraph_capture_sizes": [2, 2**20]}  # 2**20 rows of 4096 x 64 floats: 1 TiB
    compiled = magi_compile(model, method_name="forward", dynamic_arg_dims={"x": 0}, config_patch=patch)
    x = torch.randn(4, 4096, HIDDEN, device="cuda")
    with torch.no_grad():
        for _ in range(2):  # the failed capture left nothing half made behind
            with pytest.raises(torch.OutOfMemoryError, match=r"largest capture size 1048576 .*cudagraph_capture_sizes"):
                compiled(x)


def test_reserved_bytes_is_what_memory_reserved_reports():
    held = torch.empty(2**22, device="cuda")
    assert reserved_bytes() == torch.cuda.memory_reserved() >= held.numel() * held.element_size()
