"""Run one PyTorch corpus script as a user would, with tb_modelmem attached or not, and write ground truth.

    python -m tests.corpus.pytorch.run NAME --logdir DIR --out TRUTH.json [--mode modelmem|plain]

TensorFlow is blocked from import first: a PyTorch user's process never has it through tb_modelmem.
``modelmem`` attaches tb_modelmem the way the README tells users to (``tb_modelmem.pytorch.profile``
around the plain loop, ``integrations.transformers.MemoryCallback``, ``integrations.lightning.MemoryCallback``),
profiling steps 3-4 and keeping the raw Chrome trace in ``<out>_trace/``. ``plain`` imports no tb_modelmem
code: the loop runs under ``torch.profiler`` with ``tensorboard_trace_handler``, the Trainer with a callback
that steps it (the pattern transformers' docs show), Lightning with its own ``PyTorchProfiler``.

Ground truth comes from the live objects after training, never from tb_modelmem: the parameters' bytes (a tied
one once, by address), their elements and the buffers' (Keras' "Total params"), the buffers', the optimizer's
state by key, its class, the modules' ``named_modules`` paths, the bytes of one batch, and whether TensorFlow
was imported.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Dict

from tests.support import no_tensorflow

NAMES = ("mnist_main", "gpt2_trainer", "lightning_cnn", "clm_no_trainer")
PROFILE_STEPS = (3, 4)


def truth(model: Any, optimizer: Any, batch_bytes: int) -> Dict[str, Any]:
    import torch

    seen, params, count = set(), 0, 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            params += p.numel() * p.element_size()
            count += p.numel()
    state: Dict[str, int] = {}
    for per_param in optimizer.state.values():
        for key, value in per_param.items():
            if torch.is_tensor(value):
                state[key] = state.get(key, 0) + value.numel() * value.element_size()
    parameter_count = count
    count += sum(b.numel() for b in model.buffers())  # Keras' "Total params": non-trainable state among them
    return {"parameters": params, "element_count": count, "parameter_count": parameter_count,
            "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
            "optimizer_state": state, "optimizer": type(optimizer).__name__,
            "modules": [path.replace(".", "/") for path, _ in model.named_modules() if path],
            "model_class": type(model).__name__, "batch_bytes": batch_bytes,
            "tensorflow_imported": "tensorflow" in sys.modules}


def run(name: str, logdir: str, out: str, mode: str) -> Dict[str, Any]:
    import torch

    trace_dir = out + "_trace"
    if name == "mnist_main":
        from tests.corpus.pytorch import mnist_main

        model, optimizer, loader = mnist_main.build()
        x, y = next(iter(loader))
        run_dir = os.path.join(logdir, "mnist_main")
        if mode == "modelmem":
            import tb_modelmem

            with tb_modelmem.pytorch.profile(model, optimizer, run_dir, profile_steps=PROFILE_STEPS,
                                             trace_dir=trace_dir) as prof:
                mnist_main.train(model, loader, optimizer, prof.step)
        else:
            schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
            with torch.profiler.profile(schedule=schedule, profile_memory=True, record_shapes=True,
                                        on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir)) as prof:
                mnist_main.train(model, loader, optimizer, prof.step)
        return truth(model, optimizer, x.nbytes + y.nbytes)
    if name == "gpt2_trainer":
        from transformers import TrainerCallback

        from tests.corpus.pytorch import gpt2_trainer

        model, dataset = gpt2_trainer.build()
        run_dir = os.path.join(logdir, "gpt2_trainer")
        if mode == "modelmem":
            from tb_modelmem.integrations.transformers import MemoryCallback

            callbacks: Any = [MemoryCallback(log_dir=run_dir, profile_steps=PROFILE_STEPS, trace_dir=trace_dir)]
            trainer = gpt2_trainer.train(model, dataset, os.path.join(out + "_artifacts"), callbacks)
        else:
            schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
            prof = torch.profiler.profile(schedule=schedule, profile_memory=True, record_shapes=True,
                                          on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir))

            class ProfCallback(TrainerCallback):
                def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
                    prof.step()

            with prof:
                trainer = gpt2_trainer.train(model, dataset, os.path.join(out + "_artifacts"), [ProfCallback()])
        optimizer = trainer.optimizer
        optimizer = getattr(optimizer, "optimizer", optimizer)  # accelerate's wrapper
        return truth(model, optimizer, 2 * 8 * gpt2_trainer.BLOCK * 8)
    if name == "lightning_cnn":
        from tests.corpus.pytorch import lightning_cnn

        model, loader = lightning_cnn.build()
        x, y = next(iter(loader))
        if mode == "modelmem":
            from tb_modelmem.integrations.lightning import MemoryCallback

            trainer = lightning_cnn.train(model, loader, logdir, [MemoryCallback(profile_steps=PROFILE_STEPS,
                                                                                 trace_dir=trace_dir)])
        else:
            from lightning.pytorch.profilers import PyTorchProfiler

            profiler = PyTorchProfiler(dirpath=os.path.join(logdir, "lightning_profiler"), filename="profile",
                                       profile_memory=True, record_shapes=True)
            trainer = lightning_cnn.train(model, loader, logdir, profiler=profiler, steps=8, logger=False)
        return truth(model, trainer.optimizers[0], x.nbytes + y.nbytes)
    if name == "clm_no_trainer":
        from tests.corpus.pytorch import clm_no_trainer

        accelerator, model, optimizer, loader, scheduler = clm_no_trainer.build()
        run_dir = os.path.join(logdir, "clm_no_trainer")
        if mode == "modelmem":
            import tb_modelmem

            # the prepared (wrapped) optimizer, as a user of the script has it at hand
            with tb_modelmem.pytorch.profile(model, optimizer, run_dir, profile_steps=PROFILE_STEPS,
                                             trace_dir=trace_dir) as prof:
                clm_no_trainer.train(accelerator, model, optimizer, loader, scheduler, prof.step,
                                     save_to=os.path.join(run_dir, "checkpoint"))
        else:
            schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
            with torch.profiler.profile(schedule=schedule, profile_memory=True, record_shapes=True,
                                        on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir)) as prof:
                clm_no_trainer.train(accelerator, model, optimizer, loader, scheduler, prof.step)
        return truth(model, optimizer.optimizer, 2 * clm_no_trainer.BATCH * clm_no_trainer.BLOCK * 8)
    raise SystemExit(f"unknown corpus script {name!r}; one of {', '.join(NAMES)}")


def main() -> None:
    no_tensorflow.block()
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("modelmem", "plain"), default="modelmem")
    args = parser.parse_args()
    found = run(args.name, args.logdir, args.out, args.mode)
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
