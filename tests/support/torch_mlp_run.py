"""A plain PyTorch loop, in one process or as a 2-rank ``DistributedDataParallel`` job on gloo (CPU), for What
if's checks of data parallelism and of optimizers whose step has no scratch (tests/integration/
test_projection_torch.py).

    python -m tests.support.torch_mlp_run traced LOGDIR --batch B [--optimizer O] [--path P] [--clip] [--compile]
    python -m tests.support.torch_mlp_run truth OUT --batch B [--optimizer O] [--path P] [--clip] [--ranks 2]

The model: an MLP 784 -> 2048 -> 2048 -> 10 (5.8 M parameters), cross-entropy on random data; ``--optimizer`` Adam
(the default), another ``torch.optim`` class of ``SCRATCH_MAKERS`` (lr 1e-3), Adam with ``amsgrad=True``
(``amsgrad``), SGD, or SGD with momentum 0.9 (``momentum``). ``--path foreach|fused``: the optimizer made with that
flag set (a class with no fused kernel keeps the CPU's default, one parameter at a time). ``--clip``: the gradients
clipped to norm 1 before each step (``clip_grad_norm_``, Trainer's default: foreach ops beside the update).
``--ranks 2``: the model in DDP (B per rank). ``--mixed``: its first layer float32, the others bfloat16.
``--groups DECAY``: two param groups, as Trainer makes, of like sizes: the middle layer's parameters with no
weight decay, the rest with DECAY; with ``--frozen`` the middle layer frozen, its group's decay 0.01 and the
rest's 0. ``--compile``: its forward run by ``torch.compile(model)`` (inductor, a fresh
compile in each process).
``traced`` runs 5 iterations, profiling 3-4 with ``tb_modelmem.pytorch.profile``.

``truth`` prints JSON ground truth read without tb_modelmem: each process profiles from before its model is
built (so everything it holds, DDP's own buffers made at construction too, is in torch's CPU count from 0) and
the truth is the highest "Total Allocated" of its raw trace, read with ``json``, inside steps 2-3 (the first two
left out: DDP rebuilds its buckets after the first), and the bytes of every tensor in ``optimizer.state`` but
its ``step`` counts. DDP is built with
``init_sync=False``: the broadcast of rank 0's weights it makes at construction left one rank holding a flat copy
of them (+23,298,088 B) through every later step in about 1 run in 4 under pytest, which is not the step's.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
from typing import Any, Dict, List, Optional

from tests.support import gloo

STEPS = 4
# torch.optim classes whose step makes scratch of its parameters' sizes, besides SGD with and without momentum
SCRATCH_MAKERS = ("Adam", "AdamW", "Adagrad", "RMSprop", "Adadelta", "Adamax", "NAdam", "RAdam", "Adafactor")


def _model(mixed: bool = False) -> Any:
    """The MLP; ``mixed``: its first layer float32, the others bfloat16 (one foreach list per dtype)."""
    import torch

    class Cast(torch.nn.Module):
        def __init__(self, dtype: Any) -> None:
            super().__init__()
            self.dtype = dtype

        def forward(self, x: Any) -> Any:
            return x.to(self.dtype)

    torch.manual_seed(0)
    if not mixed:
        return torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 2048),
                                   torch.nn.ReLU(), torch.nn.Linear(2048, 10))
    return torch.nn.Sequential(torch.nn.Linear(784, 2048), torch.nn.ReLU(), Cast(torch.bfloat16),
                               torch.nn.Linear(2048, 2048).to(torch.bfloat16), torch.nn.ReLU(),
                               torch.nn.Linear(2048, 10).to(torch.bfloat16), Cast(torch.float32))


def _step(model: Any, optimizer: Any, batch: int, forward: Any = None, clip: bool = False) -> None:
    import torch

    x, y = torch.randn(batch, 784), torch.randint(0, 10, (batch,))
    torch.nn.functional.cross_entropy((forward or model)(x), y).backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()


def _optimizer(name: str, model: Any, path: str = "", decay: Optional[float] = None, frozen: bool = False) -> Any:
    import torch

    cls = getattr(torch.optim, "Adam" if name == "amsgrad" else name if name in SCRATCH_MAKERS else "SGD")
    flag = {path: True} if path and path in inspect.signature(cls).parameters else {}
    if name == "amsgrad":
        flag["amsgrad"] = True
    params: Any = model.parameters()
    if decay is not None:  # two param groups, as Trainer makes (decay, no decay), here of like sizes
        middle = {id(p) for p in model[2 if len(model) == 5 else 3].parameters()}
        params = [{"params": [p for p in model.parameters() if id(p) not in middle], "weight_decay": decay},
                  {"params": [p for p in model.parameters() if id(p) in middle], "weight_decay": 0.0}]
        if frozen:  # a frozen backbone's group, with its own decay: step() updates none of it
            for p in params[1]["params"]:
                p.requires_grad_(False)
            params[0]["weight_decay"], params[1]["weight_decay"] = 0.0, 0.01
    if name in SCRATCH_MAKERS + ("amsgrad",):
        return cls(params, lr=1e-3, **flag)
    return cls(params, lr=0.01, momentum=0.9 if name == "momentum" else 0.0, **flag)


def _forward(model: Any, compiled: bool) -> Any:
    import torch

    return torch.compile(model) if compiled else model


def _traced(logdir: str, batch: int, optimizer_name: str, compiled: bool, path: str, clip: bool,
            mixed: bool, decay: Optional[float], frozen: bool) -> None:
    import tb_modelmem

    model = _model(mixed)
    optimizer = _optimizer(optimizer_name, model, path, decay, frozen)
    forward = _forward(model, compiled)
    with tb_modelmem.pytorch.profile(model, optimizer, logdir, profile_steps=(3, 4)) as prof:
        for _ in range(STEPS + 1):
            _step(model, optimizer, batch, forward, clip)
            prof.step()


def _rank(rank: int, port: int, ranks: int, batch: int, optimizer_name: str, out: str, compiled: bool,
          path: str, clip: bool, mixed: bool = False, decay: Optional[float] = None, frozen: bool = False) -> None:
    import torch
    import torch.distributed as dist

    if ranks > 1:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
        dist.init_process_group("gloo", rank=rank, world_size=ranks)
    with torch.profiler.profile(profile_memory=True) as prof:
        model = _model(mixed)
        if ranks > 1:
            # its defaults but init_sync (every rank seeds alike: nothing to broadcast): that broadcast's flat copy
            # of the weights was held by gloo's work on one rank into every later step in some runs
            model = torch.nn.parallel.DistributedDataParallel(model, init_sync=False)
        optimizer = _optimizer(optimizer_name, model, path, decay, frozen)
        forward = _forward(model, compiled)
        for i in range(STEPS):
            with torch.profiler.record_function(f"step{i}"):
                _step(model, optimizer, batch, forward, clip)
    prof.export_chrome_trace(os.path.join(out, f"rank{rank}.json"))
    slots = sum(value.numel() * value.element_size() for state in optimizer.state.values()
                for key, value in state.items() if key != "step" and isinstance(value, torch.Tensor))
    with open(os.path.join(out, f"rank{rank}_slots.json"), "w") as f:
        json.dump(slots, f)
    if ranks > 1:
        dist.destroy_process_group()


def _highest(path: str) -> int:
    """The highest "Total Allocated" inside steps 2-3 of a rank's raw trace."""
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in events
             if e.get("ph") == "X" and e.get("name") in {f"step{i}" for i in range(2, STEPS)}]
    return max(e["args"]["Total Allocated"] for e in events
               if e.get("name") == "[memory]" and any(start <= e["ts"] <= end for start, end in spans))


def _truth(out: str, batch: int, optimizer_name: str, ranks: int, compiled: bool, path: str,
           clip: bool, mixed: bool, decay: Optional[float], frozen: bool) -> Dict[str, Any]:
    os.makedirs(out, exist_ok=True)
    if ranks > 1:
        gloo.spawn_ranks(_rank, ranks, ranks, batch, optimizer_name, out, compiled, path, clip)
    else:
        _rank(0, 0, 1, batch, optimizer_name, out, compiled, path, clip, mixed, decay, frozen)
    peaks: List[int] = [_highest(os.path.join(out, f"rank{rank}.json")) for rank in range(ranks)]
    with open(os.path.join(out, "rank0_slots.json")) as f:
        slots = json.load(f)
    return {"peaks": peaks, "batch_per_rank": batch, "slot_bytes": slots}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("traced", "truth"))
    parser.add_argument("out")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--optimizer", choices=SCRATCH_MAKERS + ("amsgrad", "SGD", "momentum"), default="Adam")
    parser.add_argument("--ranks", type=int, choices=(1, 2), default=1)
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--path", choices=("", "foreach", "fused"), default="")
    parser.add_argument("--clip", action="store_true")
    parser.add_argument("--mixed", action="store_true")
    parser.add_argument("--groups", type=float, metavar="DECAY")
    parser.add_argument("--frozen", action="store_true")
    args = parser.parse_args()
    if args.kind == "traced":
        _traced(args.out, args.batch, args.optimizer, args.compile, args.path, args.clip, args.mixed, args.groups,
                args.frozen)
    else:
        print(json.dumps(_truth(args.out, args.batch, args.optimizer, args.ranks, args.compile, args.path,
                                args.clip, args.mixed, args.groups, args.frozen)))


if __name__ == "__main__":
    main()
