"""Greedy decode of gpt-fast's ``Transformer`` (a model nobody here wrote), one token per call,
batch 1: eager, ``torch.compile(mode="reduce-overhead")`` (what gpt-fast itself compiles its
decode step with) and ``@magi_compile`` without CUDA graphs, with ``FULL`` and with
``PIECEWISE`` graphs, side by side in one process.

gpt-fast is not shipped here: clone https://github.com/pytorch-labs/gpt-fast and pass its
directory; its ``model.py`` (``ModelArgs``, ``Transformer`` with ``setup_caches`` and
``forward(idx, input_pos)``) is imported from there. The model is built with random weights in
bfloat16 on the device (CUDA) or float32 (CPU); ``--shape`` picks a config.

Each contender decodes from its own copy of the model (same weights, its own KV cache) with its
own copy of the decode step's code object (Dynamo caches per code object). The first five steps
(compiling, capturing) are timed once; then a round times ``--steps`` steps of every contender
(synchronized around them), starting one contender further each round. Printed: per-token
median and min over the rounds, ratios to eager's and to reduce-overhead's medians, and, as a
correctness check, how many of 32 greedy tokens from a fresh copy of the model equal eager's.
The order of the contenders makes the compile times unequal (a later contender finds kernels a
former one compiled); they are printed, not compared. Figures only: nothing here asserts a speed.

Usage: ``python benchmarks/gptfast_decode.py --gpt-fast DIR [--shape tinyllama|stories110M|toy]
[--device cuda|cpu] [--rounds 20] [--steps 20]``
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import sys
import time
import types
from collections.abc import Callable
from pathlib import Path

import torch

from magi_compiler import magi_compile

SHAPES = {
    # TinyLlama-1.1B's shape (grouped-query attention, 22 layers)
    "tinyllama": {
        "block_size": 2048,
        "vocab_size": 32000,
        "n_layer": 22,
        "n_head": 32,
        "n_local_heads": 4,
        "dim": 2048,
        "intermediate_size": 5632,
    },
    # gpt-fast's own "stories110M" config
    "stories110M": {"block_size": 2048, "vocab_size": 32000, "n_layer": 12, "n_head": 12, "dim": 768},
    # two small layers: a CPU smoke run
    "toy": {"block_size": 256, "vocab_size": 512, "n_layer": 2, "n_head": 4, "dim": 64, "intermediate_size": 128},
}
PROMPT = 16
WARMUP = 5
CHECK_TOKENS = 32


def decode(model: torch.nn.Module, token: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
    logits = model(token, input_pos)
    return logits[:, -1].argmax(-1, keepdim=True)


def _fresh_decode(tag: str) -> Callable[..., torch.Tensor]:
    code = decode.__code__.replace(co_name=f"decode_{tag}")
    return types.FunctionType(code, decode.__globals__, f"decode_{tag}")


def _contenders(device: str) -> dict[str, Callable[[], Callable[..., torch.Tensor]]]:
    contenders: dict[str, Callable[[], Callable[..., torch.Tensor]]] = {
        "eager": lambda: _fresh_decode("eager"),
        "torch_compile_reduce_overhead": lambda: torch.compile(
            _fresh_decode("ro"), mode="reduce-overhead", fullgraph=True
        ),
        "magi": lambda: magi_compile(_fresh_decode("magi")),
    }
    if device == "cuda":
        for mode in ("FULL", "PIECEWISE"):
            patch = {"cudagraph_mode": mode}
            contenders[f"magi_{mode.lower()}_cudagraph"] = lambda patch=patch: magi_compile(config_patch=patch)(
                _fresh_decode(patch["cudagraph_mode"].lower())
            )
    return contenders


def _load_model_module(directory: Path) -> types.ModuleType:
    path = directory / "model.py"
    if not path.is_file():
        raise SystemExit(f"gptfast_decode: no model.py in {directory} (pass a gpt-fast checkout with --gpt-fast)")
    spec = importlib.util.spec_from_file_location("gpt_fast_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Dynamo looks the model's module up by name when it traces
    spec.loader.exec_module(module)
    for name in ("ModelArgs", "Transformer"):
        if not hasattr(module, name):
            raise SystemExit(f"gptfast_decode: {path} has no {name} (not gpt-fast's model.py?)")
    return module


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _prefill(model: torch.nn.Module, prompt: torch.Tensor) -> torch.Tensor:
    logits = model(prompt, torch.arange(PROMPT, device=prompt.device))
    return logits[:, -1].argmax(-1, keepdim=True)


def _greedy(
    model: torch.nn.Module, step: Callable[..., torch.Tensor], prompt: torch.Tensor, positions: list
) -> list[int]:
    token = _prefill(model, prompt)
    tokens = []
    for pos in range(PROMPT, PROMPT + CHECK_TOKENS):
        token = step(model, token, positions[pos]).clone()
        tokens.append(token.item())
    return tokens


def run(args: argparse.Namespace) -> None:
    device = args.device
    module = _load_model_module(Path(args.gpt_fast))
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    config = SHAPES[args.shape]
    max_seq = max(PROMPT + WARMUP + args.rounds * args.steps, PROMPT + CHECK_TOKENS)
    if max_seq > config["block_size"]:
        raise SystemExit(f"gptfast_decode: {args.rounds} rounds x {args.steps} steps exceed the block size")
    torch.manual_seed(0)
    with torch.device(device):
        base = module.Transformer(module.ModelArgs(**config)).to(dtype).eval()
        base.setup_caches(1, max_seq)
    generator = torch.Generator(device).manual_seed(1)
    prompt = torch.randint(0, config["vocab_size"], (1, PROMPT), device=device, generator=generator)
    positions = [torch.tensor([pos], device=device) for pos in range(max_seq)]
    contenders = _contenders(device)
    state: dict[str, dict] = {}
    with torch.no_grad():
        for name, make in contenders.items():
            model, step = copy.deepcopy(base), make()
            token = _prefill(model, prompt)
            _sync(device)
            start = time.perf_counter()
            for pos in range(PROMPT, PROMPT + WARMUP):
                token = step(model, token, positions[pos]).clone()
            _sync(device)
            first = time.perf_counter() - start
            state[name] = {
                "model": model,
                "step": step,
                "token": token,
                "pos": PROMPT + WARMUP,
                "first": first,
                "samples": [],
            }
            print(f"{name}: first {WARMUP} steps (compile, capture) {first:.2f} s", flush=True)
        names = list(contenders)
        for index in range(args.rounds):
            for name in names[index % len(names) :] + names[: index % len(names)]:
                entry = state[name]
                model, step, token = entry["model"], entry["step"], entry["token"]
                _sync(device)
                start = time.perf_counter()
                for pos in range(entry["pos"], entry["pos"] + args.steps):
                    token = step(model, token, positions[pos]).clone()
                _sync(device)
                entry["samples"].append((time.perf_counter() - start) / args.steps * 1e3)
                entry["token"], entry["pos"] = token, entry["pos"] + args.steps
        print(f"\n{args.shape}: {args.rounds} interleaved rounds x {args.steps} decode steps, {dtype}, batch 1")
        eager = statistics.median(state["eager"]["samples"])
        ro = statistics.median(state["torch_compile_reduce_overhead"]["samples"])
        print(f"{'contender':32} {'median ms':>10} {'min ms':>8} {'x eager':>8} {'x RO':>8} {'first s':>8}")
        for name in names:
            samples = state[name]["samples"]
            median = statistics.median(samples)
            row = f"{name:32} {median:10.3f} {min(samples):8.3f} {median / eager:8.2f} {median / ro:8.2f}"
            print(f"{row} {state[name]['first']:8.2f}")
        print()
        reference = None
        for name in names:
            tokens = _greedy(copy.deepcopy(base), state[name]["step"], prompt, positions)
            reference = tokens if reference is None else reference
            same = next((i for i, (a, b) in enumerate(zip(tokens, reference, strict=True)) if a != b), CHECK_TOKENS)
            print(f"{name}: the first {same} of {CHECK_TOKENS} greedy tokens equal eager's")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--gpt-fast", required=True, help="a checkout of pytorch-labs/gpt-fast (its model.py is used)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama", help="model config (default tinyllama)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--rounds", type=int, default=20, help="interleaved rounds (default 20)")
    parser.add_argument("--steps", type=int, default=20, help="decode steps per contender per round (default 20)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.steps < 1:
        parser.error("--rounds and --steps must be at least 1")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: CUDA is not available")
    run(args)


if __name__ == "__main__":
    main(sys.argv[1:])
