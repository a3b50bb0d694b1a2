"""A PyTorch model compiled by ``torch.compile``, its iterations 3-4 profiled by ``tb_modelmem.pytorch.profile``
with the raw trace kept, and what dynamo counted before and after the window.

    python -m tests.support.torch_compiled_run LOGDIR wrapped|in_place

``wrapped``: ``compiled = torch.compile(model)`` (an ``OptimizedModule``), ``in_place``: ``model.compile()``.
Writes LOGDIR/run/ (events), LOGDIR/raw/ (the Chrome trace) and LOGDIR/dynamo.json: the graphs dynamo had
compiled and the graph breaks it met after warm-up and at the end (torch's own counters).
"""

from __future__ import annotations

import json
import os
import sys

import torch
from torch import nn

import tb_modelmem


class Net(nn.Module):
    """A small CNN with a user-defined forward (torch compiles no ``nn.Sequential`` in place)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.relu(self.conv2(x))
        return self.fc(x.mean((2, 3)))


def _counted() -> dict:
    from torch._dynamo.utils import counters

    return {"unique_graphs": counters["stats"]["unique_graphs"], "graph_breaks": sum(counters["graph_break"].values())}


def main(logdir: str, how: str) -> None:
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters())
    x, y = torch.randn(16, 3, 32, 32), torch.randint(0, 10, (16,))
    if how == "wrapped":
        compiled = torch.compile(model)
    else:
        model.compile()
        compiled = model
    counted = {}
    with tb_modelmem.pytorch.profile(model, optimizer, os.path.join(logdir, "run"), profile_steps=(3, 4),
                                     trace_dir=os.path.join(logdir, "raw")) as prof:
        for step in range(1, 6):
            nn.functional.cross_entropy(compiled(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
            if step == 2:
                counted["warm"] = _counted()
    counted["end"] = _counted()
    with open(os.path.join(logdir, "dynamo.json"), "w") as f:
        json.dump(counted, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
