"""Runs a small module-level model through an AOT ``@magi_compile`` entry (the process's
``MAGI_COMPILE_*`` variables configure it) and prints, as JSON on the last stdout line, the
compilation counters and the ``magi_compiler`` log records of WARNING and above."""

import dataclasses
import json
import logging

import torch

from magi_compiler import compilation_counter, magi_compile


@magi_compile(dynamic_arg_dims={"x": 0}, model_tag="aot_log", config_patch={"aot": True})
class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Linear(16, 32)
        self.down = torch.nn.Linear(32, 16)

    def forward(self, x):
        return self.down(torch.relu(self.up(x)))


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def main():
    records = _Records()
    logging.getLogger("magi_compiler").addHandler(records)
    torch.manual_seed(0)
    model = Block()
    with torch.no_grad():
        for batch in (4, 6, 5):
            x = torch.randn(batch, 16)
            torch.testing.assert_close(model(x), Block.forward.__wrapped__(model, x))
    print(json.dumps({"counters": dataclasses.asdict(compilation_counter), "warnings": records.messages}))


if __name__ == "__main__":
    main()
