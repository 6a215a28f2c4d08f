"""benchmarks/gptfast_decode.py runs end to end on CPU (a short run) against a stand-in for
gpt-fast's model.py written here (gpt-fast is not shipped): every contender's row and the
token check are printed; a directory without model.py is one line. It asserts no timing."""

import re
import subprocess
import sys
import textwrap

from .conftest import REPO_ROOT, script_env

# gpt-fast's model.py interface: ModelArgs(**config), Transformer(args) with setup_caches(batch,
# seq) and forward(idx, input_pos) writing a KV cache buffer in place
STAND_IN = textwrap.dedent(
    """
    import dataclasses
    import torch


    @dataclasses.dataclass
    class ModelArgs:
        block_size: int
        vocab_size: int
        n_layer: int
        n_head: int
        dim: int
        intermediate_size: int


    class Transformer(torch.nn.Module):
        def __init__(self, args):
            super().__init__()
            self.embed = torch.nn.Embedding(args.vocab_size, args.dim)
            self.mix = torch.nn.Linear(args.dim, args.dim)
            self.out = torch.nn.Linear(args.dim, args.vocab_size)
            self.dim = args.dim

        def setup_caches(self, batch, seq):
            self.register_buffer("cache", torch.zeros(batch, seq, self.dim))

        def forward(self, idx, input_pos):
            x = self.embed(idx)
            self.cache[:, input_pos] = x
            context = self.cache[:, : input_pos[-1] + 1].mean(dim=1, keepdim=True)
            return self.out(torch.relu(self.mix(x + context)))
    """
)


def test_gptfast_decode_script_prints_every_contender_and_the_token_check(tmp_path):
    checkout = tmp_path / "gpt-fast"
    checkout.mkdir()
    (checkout / "model.py").write_text(STAND_IN)
    env = script_env(tmp_path / "magi", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "gptfast_decode.py"), "--gpt-fast", str(checkout)]
    command += ["--shape", "toy", "--device", "cpu", "--rounds", "2", "--steps", "2"]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    number = r"\s+\d+\.\d+"
    for contender in ("eager", "torch_compile_reduce_overhead", "magi"):
        assert re.search(rf"^{contender}{number}{number}{number}{number}{number}$", proc.stdout, re.MULTILINE)
        assert f"{contender}: the first 32 of 32 greedy tokens equal eager's" in proc.stdout
    assert "cudagraph" not in proc.stdout  # the CUDA-graph contenders run on CUDA only


def test_a_directory_without_model_py_is_one_line(tmp_path):
    command = [sys.executable, str(REPO_ROOT / "benchmarks" / "gptfast_decode.py"), "--gpt-fast", str(tmp_path)]
    proc = subprocess.run(
        command, env=script_env(tmp_path / "magi"), capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 1
    assert (
        proc.stderr.strip() == f"gptfast_decode: no model.py in {tmp_path} (pass a gpt-fast checkout with --gpt-fast)"
    )
