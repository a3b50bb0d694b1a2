"""A plain PyTorch training run, profiled as PyTorch's docs show: ``torch.profiler`` with
``tensorboard_trace_handler(<run>)``, ``profile_memory``, ``record_shapes`` and ``with_stack``, and
``torch.utils.tensorboard.SummaryWriter`` scalars in the same run folder. No tb_modelmem code.

    python -m tests.support.torch_plain_run LOGDIR [BATCH ...]   (writes LOGDIR/run/*.pt.trace.json and events)

Each BATCH (32 unless given) is one cycle of the profiler's schedule, so one trace file, in the order given.
"""

from __future__ import annotations

import os
import sys
from typing import Sequence

import torch
from torch import nn

from tests.corpus.pytorch.mnist_main import Net  # pytorch/examples' MNIST network

OPTIMIZER = torch.optim.Adam


def main(logdir: str, batches: Sequence[int] = (32,)) -> None:
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler
    from torch.utils.tensorboard import SummaryWriter

    torch.manual_seed(0)
    run = os.path.join(logdir, "run")
    model = Net()
    optimizer = OPTIMIZER(model.parameters(), lr=1e-3)
    writer = SummaryWriter(run)
    data = {batch: (torch.rand(batch, 1, 28, 28), torch.randint(0, 10, (batch,))) for batch in batches}
    cycle = 4  # wait 1, warm up 1, record 2
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2, repeat=len(batches)),
                 on_trace_ready=tensorboard_trace_handler(run), profile_memory=True, record_shapes=True,
                 with_stack=True) as prof:
        for step in range(cycle * len(batches) + 1):
            x, y = data[batches[min(step // cycle, len(batches) - 1)]]
            optimizer.zero_grad(set_to_none=True)
            loss = nn.functional.nll_loss(model(x), y)
            loss.backward()
            optimizer.step()
            writer.add_scalar("loss", loss.item(), step)
            prof.step()
    writer.close()


if __name__ == "__main__":
    main(sys.argv[1], [int(batch) for batch in sys.argv[2:]] or [32])
