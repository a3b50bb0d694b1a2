"""A plain PyTorch loop as a user leaves its log dir, no tb_modelmem code: ``torch.profiler`` on a repeating
schedule (``repeat=0``, its default) over 6 iterations, so its handler writes a second, empty trace when the
profile closes; then a ``torch.save`` of the model's and the optimizer's state_dicts, and a weights-only
safetensors file beside it (written last). Prints JSON read without tb_modelmem: the state's bytes from
``model.parameters()``, ``model.buffers()`` and ``optimizer.state``, and the highest "Total Allocated" of the
window's raw trace (read with ``json``; it counts from 0 in the window). ``--storage``: the loop also records its
storage with ``tb_modelmem.pytorch.profile(..., profile_steps=None)`` (a ``storage`` summary, at step 1).
``--trainer-folder``: it also saves ``checkpoint-6/`` as Hugging Face's Trainer does (the model's safetensors, the
optimizer's ``optimizer.pt``, ``trainer_state.json``).

    python -m tests.support.torch_review_run RUN_FOLDER --batch B [--storage] [--trainer-folder]
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 7 * 7, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2)
        x = nn.functional.max_pool2d(torch.relu(self.conv2(x)), 2)
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def main() -> None:
    from safetensors.torch import save_file
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    parser = argparse.ArgumentParser()
    parser.add_argument("run")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--storage", action="store_true")
    parser.add_argument("--trainer-folder", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Net()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(torch.randn(args.batch, 1, 28, 28), torch.randint(0, 10, (args.batch,))) for _ in range(6)]
    storage = contextlib.nullcontext()
    if args.storage:
        import tb_modelmem.pytorch

        storage = tb_modelmem.pytorch.profile(model, optimizer, args.run, profile_steps=None)
    with profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=tensorboard_trace_handler(args.run), profile_memory=True,
                 record_shapes=True) as prof, storage as recorded:
        for x, y in data:
            nn.functional.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
            if recorded is not None:
                recorded.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, os.path.join(args.run, "ckpt.pt"))
    save_file(dict(model.state_dict()), os.path.join(args.run, "model.safetensors"))
    if args.trainer_folder:
        folder = os.path.join(args.run, f"checkpoint-{len(data)}")
        os.makedirs(folder)
        save_file(dict(model.state_dict()), os.path.join(folder, "model.safetensors"))
        torch.save(optimizer.state_dict(), os.path.join(folder, "optimizer.pt"))
        with open(os.path.join(folder, "trainer_state.json"), "w") as f:
            json.dump({"global_step": len(data)}, f)
    peaks = []
    for path in glob.glob(os.path.join(args.run, "*.pt.trace.json")):
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        memory = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
        peaks.append((max(memory) if memory else None, os.path.basename(path), len(events)))
    state = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    print(json.dumps({
        "parameters": sum(p.numel() * p.element_size() for p in model.parameters()),
        "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
        "optimizer_state": sum(t.numel() * t.element_size() for t in state),
        "traces": sorted(peaks, key=lambda p: p[1])}))


if __name__ == "__main__":
    main()
