"""A plain PyTorch loop, in one process or as a 2-rank ``DistributedDataParallel`` job on gloo (CPU), for What
if's data-parallel check (tests/integration/test_projection_torch.py).

    python -m tests.support.torch_ddp_whatif_run single LOGDIR --batch B   # traced by tb_modelmem.pytorch.profile
    python -m tests.support.torch_ddp_whatif_run ddp OUT --batch B         # B per rank: each rank's truth

The model: an MLP 784 -> 2048 -> 2048 -> 10 (5.8 M parameters), Adam, cross-entropy on random data.

``ddp`` prints JSON ground truth read without tb_modelmem: each rank profiles from before its model is built
(so DDP's own buffers, made at construction, are in torch's CPU count from 0) and the truth is the highest
"Total Allocated" of its raw trace, read with ``json``, inside steps 1-3 (the first step, and DDP's broadcast
of rank 0's weights at construction, left out); and the bytes ``model.parameters()`` hold.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
from typing import Any, Dict, List

STEPS = 4
WORLD = 2


def _model() -> Any:
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                               torch.nn.ReLU(), torch.nn.Linear(2048, 10))


def _step(model: Any, optimizer: Any, batch: int) -> None:
    import torch

    x, y = torch.randn(batch, 784), torch.randint(0, 10, (batch,))
    torch.nn.functional.cross_entropy(model(x), y).backward()
    optimizer.step()
    optimizer.zero_grad()


def _single(logdir: str, batch: int) -> None:
    import torch

    import tb_modelmem

    model = _model()
    optimizer = torch.optim.Adam(model.parameters())
    with tb_modelmem.pytorch.profile(model, optimizer, logdir, profile_steps=(3, 4)) as prof:
        for _ in range(STEPS + 1):
            _step(model, optimizer, batch)
            prof.step()


def _rank(rank: int, port: int, batch: int, out: str) -> None:
    import torch
    import torch.distributed as dist

    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    with torch.profiler.profile(profile_memory=True) as prof:
        model = torch.nn.parallel.DistributedDataParallel(_model())  # its defaults, as most scripts build it
        optimizer = torch.optim.Adam(model.parameters())
        for i in range(STEPS):
            with torch.profiler.record_function(f"step{i}"):
                _step(model, optimizer, batch)
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
    dist.destroy_process_group()


def _highest(path: str) -> int:
    """The highest "Total Allocated" inside steps 1-3 of a rank's raw trace."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and e.get("name") in {f"step{i}" for i in range(1, STEPS)}]
    return max(e["args"]["Total Allocated"] for e in events
               if e.get("name") == "[memory]" and any(start <= e["ts"] <= end for start, end in spans))


def _ddp(out: str, batch: int) -> Dict[str, Any]:
    import torch.multiprocessing as mp

    os.makedirs(out, exist_ok=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.spawn(_rank, args=(port, batch, out), nprocs=WORLD)
    peaks: List[int] = [_highest(os.path.join(out, f"rank{rank}.json")) for rank in range(WORLD)]
    params = sum(p.numel() * p.element_size() for p in _model().parameters())
    return {"peaks": peaks, "params": params, "batch_per_rank": batch}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("single", "ddp"))
    parser.add_argument("path")
    parser.add_argument("--batch", type=int, required=True)
    args = parser.parse_args()
    if args.kind == "single":
        _single(args.path, args.batch)
    else:
        print(json.dumps(_ddp(args.path, args.batch)))


if __name__ == "__main__":
    main()
