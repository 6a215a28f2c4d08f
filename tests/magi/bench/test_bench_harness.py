"""The harnesses on real models: skipped contenders carried through, the dynamic-batch passes."""

import torch

from magi_bench import contenders as bench_contenders
from magi_bench.harness import run_dynamic_batches, run_interleaved
from magi_bench.models import ModelDims, attention_spec, isolated_subclass
from magi_bench.progress import Progress
from magi_bench.timers import Timer

DIMS = ModelDims(hidden=16, seq=4, layers=1, batch=2, heads=2)
CPU = torch.device("cpu")


def _contenders(tmp_path):
    spec = attention_spec(DIMS)
    names = ("eager", "torch_compile_reduce_overhead", "magi_full_cudagraph")
    built = bench_contenders.build_contenders(spec, CPU, torch.float32, str(tmp_path), names)
    model = spec.build(isolated_subclass(spec.cls, tmp_path.name))  # its own forward code: a fresh Dynamo cache
    model.load_state_dict(built[0].call.state_dict())
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    built.append(bench_contenders.Contender("torch_compile", compiled, bench_contenders._dynamo_graphs))
    return built


def test_cuda_contenders_are_skipped_on_cpu_with_a_reason(tmp_path):
    built = _contenders(tmp_path)
    assert [(c.name, c.skipped) for c in built[:3]] == [
        ("eager", None),
        ("torch_compile_reduce_overhead", "needs CUDA (reduce-overhead records CUDA graphs)"),
        ("magi_full_cudagraph", "needs CUDA (Magi CUDA graphs)"),
    ]
    assert built[1].call is None and built[2].call is None
    runs = run_interleaved(
        built, built[0].call.example_input(CPU, torch.float32), Timer(CPU), 3, 0, Progress(enabled=False)
    )
    assert [r.name for r in runs] == [c.name for c in built]
    assert [len(r.samples) for r in runs] == [3, 0, 0, 3]
    assert runs[1].skipped and runs[3].outputs_match and runs[3].graphs_compiled == 1


def test_dynamic_batches_time_every_pass_and_check_every_size(tmp_path):
    built = _contenders(tmp_path)
    inputs = [torch.randn(b, DIMS.seq, DIMS.hidden) for b in (2, 3, 5, 2, 3, 5)]
    first = torch.randn(7, DIMS.seq, DIMS.hidden)
    runs = {r.name: r for r in run_dynamic_batches(built, inputs, Timer(CPU), 3, Progress(enabled=False), first)}
    compiled = runs["torch_compile"]
    assert len(compiled.pass_s) == 3 and all(t > 0 for t in compiled.pass_s)
    assert compiled.compile_call_s > 0, "the compiling call is timed on its own"
    assert compiled.graphs_compiled_first_pass == 1 and compiled.graphs_compiled_later == 0
    assert compiled.outputs_match and compiled.rel_error < 1e-6
    assert runs["magi_full_cudagraph"].skipped == "needs CUDA (Magi CUDA graphs)"
    assert runs["magi_full_cudagraph"].pass_s == []
    wrong = bench_contenders.Contender("torch_compile", lambda x: built[0].call(x) * 1.01, lambda: 0)
    (_, bad) = run_dynamic_batches([built[0], wrong], inputs, Timer(CPU), 2, Progress(enabled=False), first)
    assert not bad.outputs_match and bad.rel_error > 1e-3


def test_dynamic_batches_warm_every_batch_size_with_eager_before_any_contender(tmp_path):
    built = _contenders(tmp_path)
    eager_model = built[0].call
    order = []
    built[0] = bench_contenders.Contender(
        "eager", lambda x: order.append(("eager", x.shape[0])) or eager_model(x), lambda: 0
    )
    compiled = built[3].call
    built[3] = bench_contenders.Contender(
        built[3].name, lambda x: order.append(("compiled", x.shape[0])) or compiled(x), built[3].graph_count
    )
    inputs = [torch.randn(b, DIMS.seq, DIMS.hidden) for b in (2, 3)]
    run_dynamic_batches(built, inputs, Timer(CPU), 2, Progress(enabled=False), torch.randn(5, DIMS.seq, DIMS.hidden))
    assert order[:5] == [("eager", batch) for batch in range(1, 6)]
    assert order.index(("compiled", 5)) > 5, "the warm-up comes before any other contender's first call"
