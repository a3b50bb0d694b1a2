"""Run one PyTorch corpus script as a user would, with tb_modelmem attached or not, and write ground truth.

    python -m tests.corpus.pytorch.run NAME --logdir DIR --out TRUTH.json [--mode modelmem|plain] [--batch N --bptt N]
        [--optimizer adam|sgd|momentum]

TensorFlow is blocked from import first: a PyTorch user's process never has it through tb_modelmem.
``modelmem`` attaches tb_modelmem the way the README tells users to (``tb_modelmem.pytorch.profile``
around the plain loop, ``integrations.transformers.MemoryCallback``, ``integrations.lightning.MemoryCallback``),
profiling steps 3-4 and keeping the raw Chrome trace in ``<out>_trace/``. ``plain`` imports no tb_modelmem
code: the loop runs under ``torch.profiler`` with ``tensorboard_trace_handler``, the Trainer with a callback
that steps it (the pattern transformers' docs show), Lightning with its own ``PyTorchProfiler``.

Ground truth comes from the live objects after training, never from tb_modelmem: the trainable parameters' bytes
(a tied one once, by address) and their dtypes, the frozen ones' bytes, their elements and the buffers' (Keras'
"Total params"), the buffers', the optimizer's state by key, its class and betas, the modules' ``named_modules``
paths, the bytes of one batch, whether TensorFlow was imported, and (peft_sft) the dtype autocast computed in.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, Callable, Dict

from tests.support import no_tensorflow

NAMES = ("mnist_main", "gpt2_trainer", "lightning_cnn", "clm_no_trainer", "word_language_model", "dcgan", "nanogpt",
         "peft_sft")
PROFILE_STEPS = (3, 4)
MEMORY_EVERY = 2  # the Trainer runs: a sample of the process's memory every 2 iterations (the default 100)


def truth(model: Any, optimizer: Any, batch_bytes: int) -> Dict[str, Any]:
    import torch

    seen, params, count, frozen, frozen_count = set(), 0, 0, 0, 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            if p.requires_grad:
                params += p.numel() * p.element_size()
                count += p.numel()
            else:  # frozen (a LoRA model's base): non-trainable, as Keras counts a frozen layer's weights
                frozen += p.numel() * p.element_size()
                frozen_count += p.numel()
    state: Dict[str, int] = {}
    optimizers = optimizer if isinstance(optimizer, list) else [optimizer] if optimizer is not None else []
    for per_param in (kept for one in optimizers for kept in one.state.values()):  # none: updated by hand
        for key, value in per_param.items():
            if torch.is_tensor(value):
                state[key] = state.get(key, 0) + value.numel() * value.element_size()
    parameter_count = count
    count += frozen_count + sum(b.numel() for b in model.buffers())  # Keras' "Total params": non-trainable among them
    return {"parameters": params, "element_count": count, "parameter_count": parameter_count, "frozen": frozen,
            "parameter_dtypes": sorted({str(p.dtype) for p in model.parameters() if p.requires_grad}),
            "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
            "optimizer_state": state,
            "optimizer": " + ".join(type(one).__name__ for one in optimizers) or None,
            "betas": [list(one.param_groups[0]["betas"]) for one in optimizers if "betas" in one.param_groups[0]],
            "modules": [path.replace(".", "/") for path, _ in model.named_modules() if path],
            "model_class": type(model).__name__, "batch_bytes": batch_bytes,
            "tensorflow_imported": "tensorflow" in sys.modules}


def _plain_profiler(run_dir: str) -> Any:
    """torch.profiler as its docs show it, steps 3-4 into ``run_dir`` with ``tensorboard_trace_handler``."""
    import torch

    schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    return torch.profiler.profile(schedule=schedule, profile_memory=True, record_shapes=True,
                                  on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir))


def _trainer_run(mode: str, run_dir: str, trace_dir: str, train: Callable[[Any], Any]) -> Any:
    """``train(callbacks)`` under tb_modelmem's Trainer callback (``modelmem``), or under ``torch.profiler`` stepped
    by a callback (``plain``: the pattern transformers' docs show); returns the trainer."""
    if mode == "modelmem":
        from tb_modelmem.integrations.transformers import MemoryCallback

        return train([MemoryCallback(log_dir=run_dir, profile_steps=PROFILE_STEPS, trace_dir=trace_dir,
                                     memory_every=MEMORY_EVERY)])
    from transformers import TrainerCallback

    prof = _plain_profiler(run_dir)

    class ProfCallback(TrainerCallback):
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            prof.step()

    with prof:
        return train([ProfCallback()])


def _loop(mode: str, model: Any, optimizer: Any, run_dir: str, trace_dir: str, train: Callable[[Any], None]) -> None:
    """A plain loop, ``train(step_end)``, profiled as the README tells users to (``modelmem``) or by torch.profiler
    alone (``plain``)."""
    if mode == "modelmem":
        import tb_modelmem

        with tb_modelmem.pytorch.profile(model, optimizer, run_dir, profile_steps=PROFILE_STEPS,
                                         trace_dir=trace_dir) as prof:
            train(prof.step)
    else:
        with _plain_profiler(run_dir) as prof:
            train(prof.step)


def run(name: str, logdir: str, out: str, mode: str, batch: int = 0, bptt: int = 0,
        optimizer: str = "adam") -> Dict[str, Any]:
    trace_dir = out + "_trace"
    if name == "mnist_main":
        from tests.corpus.pytorch import mnist_main

        model, optimizer, loader = mnist_main.build()
        x, y = next(iter(loader))
        _loop(mode, model, optimizer, os.path.join(logdir, "mnist_main"), trace_dir,
              lambda step_end: mnist_main.train(model, loader, optimizer, step_end))
        return truth(model, optimizer, x.nbytes + y.nbytes)
    if name == "gpt2_trainer":
        from tests.corpus.pytorch import gpt2_trainer

        model, dataset = gpt2_trainer.build()
        trainer = _trainer_run(mode, os.path.join(logdir, "gpt2_trainer"), trace_dir, lambda callbacks:
                               gpt2_trainer.train(model, dataset, os.path.join(out + "_artifacts"), callbacks))
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
        save_to = os.path.join(run_dir, "checkpoint") if mode == "modelmem" else None
        # the prepared (wrapped) optimizer, as a user of the script has it at hand
        _loop(mode, model, optimizer, run_dir, trace_dir, lambda step_end: clm_no_trainer.train(
            accelerator, model, optimizer, loader, scheduler, step_end, save_to=save_to))
        return truth(model, optimizer.optimizer, 2 * clm_no_trainer.BATCH * clm_no_trainer.BLOCK * 8)
    if name == "word_language_model":
        from tests.corpus.pytorch import word_language_model as wlm

        bptt = bptt or wlm.BPTT
        model, train_data = wlm.build(batch=batch or wlm.BATCH, bptt=bptt)
        # no optimizer: the script updates the parameters by hand
        _loop(mode, model, None, os.path.join(logdir, "word_language_model"), trace_dir,
              lambda step_end: wlm.train(model, train_data, step_end, bptt=bptt))
        first = wlm.get_batch(train_data, 0, bptt)  # slices of the token ids made before training: views, no bytes
        views = all(t.untyped_storage().data_ptr() == train_data.untyped_storage().data_ptr() for t in first)
        return dict(truth(model, None, sum(t.nbytes for t in first)), batch_is_views=views)
    if name == "dcgan":
        import torch

        from tests.corpus.pytorch import dcgan

        netG, netD, optimizerG, optimizerD, loader = dcgan.build(batch=batch or dcgan.BATCH, optimizer=optimizer)
        # both models, as a GAN's user passes them; the truth names them as the README says: by class name
        _loop(mode, [netG, netD], [optimizerD, optimizerG], os.path.join(logdir, "dcgan"), trace_dir,
              lambda step_end: dcgan.train(netG, netD, optimizerG, optimizerD, loader, step_end))
        both = torch.nn.ModuleDict({"Generator": netG, "Discriminator": netD})
        found = truth(both, [optimizerD, optimizerG], next(iter(loader))[0].nbytes)
        return dict(found, model_class=f"{type(netG).__name__} + {type(netD).__name__}")
    if name == "nanogpt":
        return _nanogpt(logdir, mode, trace_dir, batch, bptt)
    if name == "peft_sft":
        return _peft_sft(logdir, mode, out, trace_dir, batch, bptt)
    raise SystemExit(f"unknown corpus script {name!r}; one of {', '.join(NAMES)}")


def _peft_sft(logdir: str, mode: str, out: str, trace_dir: str, batch: int, block: int) -> Dict[str, Any]:
    """peft's SFT example under ``Trainer``: stepped by tb_modelmem's callback (``modelmem``) or by a callback that
    steps ``torch.profiler`` (``plain``), as for ``gpt2_trainer``."""
    from tests.corpus.pytorch import peft_sft

    block = block or peft_sft.BLOCK
    model, dataset = peft_sft.build(block)
    batch = batch or peft_sft.BATCH
    run_dir = os.path.join(logdir, "peft_sft")
    trainer = _trainer_run(mode, run_dir, trace_dir, lambda callbacks: peft_sft.train(
        model, dataset, out + "_artifacts", callbacks, batch_size=batch))
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate's wrapper
    found = truth(model, optimizer, 2 * batch * block * 8)  # input_ids and labels, int64
    return dict(found, autocast="bfloat16" if trainer.args.bf16 else None)  # Trainer's bf16=True: CPU autocast


def _nanogpt(logdir: str, mode: str, trace_dir: str, batch: int, block: int) -> Dict[str, Any]:
    """nanoGPT's loop, its ``ckpt.pt`` saved into the run (``modelmem``); the truth adds which parameter each of
    ``optimizer.state_dict()``'s numbers is (it numbers them across the param groups, in order)."""
    from tests.corpus.pytorch import nanogpt

    model, optimizer, batches, model_args, steps = nanogpt.build(batch=batch or nanogpt.BATCH,
                                                                 block=block or nanogpt.BLOCK)
    run_dir = os.path.join(logdir, "nanogpt")
    save_to = run_dir if mode == "modelmem" else None  # train.py's ckpt.pt, beside the run's events
    _loop(mode, model, optimizer, run_dir, trace_dir, lambda step_end: nanogpt.train(
        model, optimizer, batches, model_args, steps, step_end, save_to=save_to))
    x, y = batches.get_batch()
    names = {id(p): name for name, p in model.named_parameters()}  # a tied tensor under its first name
    ordered = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    return dict(truth(model, optimizer, x.nbytes + y.nbytes), state_numbers=dict(enumerate(ordered)))


def main() -> None:
    no_tensorflow.block()
    parser = argparse.ArgumentParser()
    parser.add_argument("name", choices=NAMES)
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--mode", choices=("modelmem", "plain"), default="modelmem")
    parser.add_argument("--batch", type=int, default=0,
                        help="word_language_model, dcgan, nanogpt, peft_sft: the batch (default 20, 8, 12, 4)")
    parser.add_argument("--bptt", type=int, default=0,
                        help="word_language_model: bptt (35); nanogpt: block_size (64); peft_sft: tokens (64)")
    parser.add_argument("--optimizer", choices=("adam", "sgd", "momentum"), default="adam",
                        help="dcgan: both models' optimizer (default its Adam; SGD, or SGD with momentum 0.9)")
    args = parser.parse_args()
    found = run(args.name, args.logdir, args.out, args.mode, args.batch, args.bptt, args.optimizer)
    with open(args.out, "w") as f:
        json.dump(found, f, indent=1)


if __name__ == "__main__":
    main()
