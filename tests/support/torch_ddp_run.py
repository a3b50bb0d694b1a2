"""A 2-rank data-parallel job on gloo (CPU), each rank profiled as PyTorch's docs show:
``tensorboard_trace_handler(<run>, worker_name=f"rank{rank}")``, ``profile_memory``, ``record_shapes``.
No tb_modelmem code. ``ddp``: the MLP in ``DistributedDataParallel``; ``fsdp2``: each Linear and the
model sharded with ``fully_shard`` (FSDP2, torch.distributed.fsdp), as its tutorial shards a model.
``profiled``: the DDP job recorded by ``tb_modelmem.pytorch.profile`` on every rank instead, into one
log dir, as a user adds it to a DDP script.

    python -m tests.support.torch_ddp_run LOGDIR [ddp|fsdp2|profiled]
        (writes LOGDIR/<kind>/rank0.*.pt.trace.json, rank1.*)
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from tests.support import gloo

WORLD = 2


def _rank(rank: int, port: int, run: str, kind: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64))
    if kind == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in (model[0], model[2]):
            fully_shard(layer)
        ddp = fully_shard(model)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(ddp.parameters())
    if kind == "profiled":
        import tb_modelmem

        with tb_modelmem.pytorch.profile(ddp, optimizer, run, profile_steps=(3, 4)) as prof:
            for _ in range(5):
                ddp(torch.randn(32 * (rank + 1), 64)).sum().backward()
                optimizer.step()
                optimizer.zero_grad()
                prof.step()
        dist.destroy_process_group()
        return
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    handler = torch.profiler.tensorboard_trace_handler(run, worker_name=f"rank{rank}")
    with torch.profiler.profile(schedule=schedule, on_trace_ready=handler, profile_memory=True,
                                record_shapes=True) as prof:
        for _ in range(5):
            ddp(torch.randn(32 * (rank + 1), 64)).sum().backward()  # rank 1's batch is twice rank 0's
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    dist.destroy_process_group()


def main(logdir: str, kind: str = "ddp") -> None:
    run = os.path.join(logdir, kind)
    gloo.spawn_ranks(_rank, WORLD, run, kind, fresh=run)


if __name__ == "__main__":
    main(*sys.argv[1:3])
