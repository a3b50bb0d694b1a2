"""A real PyTorch training run at one setting, for What if's checks (tests/integration/test_projection_torch.py).

    python -m tests.support.torch_whatif_run gpt2|cnn|autocast_mlp LOGDIR --batch B [--seq L] [--optimizer O] [--plain]

``gpt2``: a tiny GPT-2 made from a config, trained by Hugging Face ``Trainer`` (transformers' run_clm.py, as
tests/corpus/pytorch/gpt2_trainer.py), its MLP 512 wide: batch 8 x 64 tokens is 512 too, a weight's
dimension. ``cnn``: the Lightning conv net of tests/corpus/pytorch/lightning_cnn.py. ``autocast_mlp``: a plain
loop under CPU bfloat16 autocast (a new user's). Steps 3-4 are profiled:
by tb_modelmem's ``MemoryCallback`` (a breakdown beside the trace), or with ``--plain`` by ``torch.profiler``
alone, as a user who never heard of tb_modelmem writes it (``tensorboard_trace_handler`` into the run folder).

Prints JSON ground truth read without tb_modelmem: the raw trace's highest "Total Allocated" (torch's CPU
count, exact bytes, from 0 in the profiled window), and the bytes the live objects held all through it:
``model.parameters()`` (a tied one once), ``model.buffers()`` and the optimizer's own ``state``.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
from typing import Any, Dict, List

from tests.support import no_tensorflow

PROFILED = (3, 4)


def _gpt2(args: argparse.Namespace, run_dir: str, kept: str) -> Any:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Trainer, TrainerCallback, TrainingArguments

    seq = args.seq

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 4096

        def __getitem__(self, i: int) -> Dict[str, Any]:
            ids = torch.randint(0, 1000, (seq,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    config = AutoConfig.for_model("gpt2", vocab_size=1000, n_positions=256, n_embd=96, n_layer=2, n_head=4,
                                  n_inner=512, bos_token_id=0, eos_token_id=0)
    model = AutoModelForCausalLM.from_config(config)
    optim = {"AdamW": "adamw_torch", "AdamW_fused": "adamw_torch_fused", "SGD": "sgd",
             "Adafactor": "adafactor"}[args.optimizer]
    training = TrainingArguments(output_dir=os.path.join(kept, "out"), per_device_train_batch_size=args.batch,
                                 max_steps=6, report_to=[], save_strategy="no", logging_steps=100, use_cpu=True,
                                 optim=optim, dataloader_num_workers=0, disable_tqdm=True, bf16=args.bf16)
    if args.plain:
        prof = torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1),
                                      profile_memory=True, record_shapes=True,
                                      on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir))

        class Step(TrainerCallback):
            def on_step_end(self, *_: Any, **__: Any) -> None:
                prof.step()

        callbacks: List[Any] = [Step()]
    else:
        from tb_modelmem.integrations.transformers import MemoryCallback

        callbacks = [MemoryCallback(log_dir=run_dir, profile_steps=PROFILED, trace_dir=kept)]
    trainer = Trainer(model=model, args=training, train_dataset=Blocks(), callbacks=callbacks)
    if args.plain:
        with prof:
            trainer.train()
    else:
        trainer.train()
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)  # accelerate's wrapper
    return model, optimizer


def _cnn(args: argparse.Namespace, run_dir: str, kept: str) -> Any:
    import torch

    from tb_modelmem.integrations.lightning import MemoryCallback
    from tests.corpus.pytorch import lightning_cnn

    if args.optimizer == "SGD":
        lightning_cnn.LitConvNet.configure_optimizers = lambda self: torch.optim.SGD(self.parameters(), lr=0.01)
    model, loader = lightning_cnn.build(batch_size=args.batch)
    trainer = lightning_cnn.train(model, loader, run_dir, [MemoryCallback(profile_steps=PROFILED, trace_dir=kept)])
    return model, trainer.optimizers[0]


def _autocast_mlp(args: argparse.Namespace, run_dir: str, kept: str) -> Any:
    """A new user's plain loop: an MLP (128-256, LayerNorm, 256-256, 256-10) under CPU bfloat16 autocast, Adam."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(128, 256), torch.nn.LayerNorm(256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = [(torch.randn(args.batch, 128), torch.randint(0, 10, (args.batch,))) for _ in range(6)]

    def train(step_end: Any) -> None:
        for x, y in batches:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            step_end()

    if args.plain:
        schedule = torch.profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
        with torch.profiler.profile(schedule=schedule, profile_memory=True, record_shapes=True,
                                    on_trace_ready=torch.profiler.tensorboard_trace_handler(run_dir)) as prof:
            train(prof.step)
    else:
        import tb_modelmem

        with tb_modelmem.pytorch.profile(model, optimizer, run_dir, profile_steps=PROFILED, trace_dir=kept) as prof:
            train(prof.step)
    return model, optimizer


def main() -> None:
    no_tensorflow.block()
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=("gpt2", "cnn", "autocast_mlp"))
    parser.add_argument("logdir")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--optimizer", choices=("AdamW", "AdamW_fused", "SGD", "Adam", "Adafactor"), default="AdamW",
                        help="AdamW_fused: Trainer's default on torch >= 2.8 (adamw_torch_fused)")
    parser.add_argument("--plain", action="store_true")
    parser.add_argument("--bf16", action="store_true", help="Trainer's bf16=True: autocast to bfloat16")
    args = parser.parse_args()
    import torch

    run_dir, kept = os.path.join(args.logdir, "run"), os.path.join(args.logdir, "kept")
    model, optimizer = {"gpt2": _gpt2, "cnn": _cnn, "autocast_mlp": _autocast_mlp}[args.model](args, run_dir, kept)
    (path,) = glob.glob(os.path.join(run_dir if args.plain else kept, "*.pt.trace.json"))
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    allocated = [e["args"]["Total Allocated"] for e in events if e.get("name") == "[memory]"]
    params = {p.data_ptr(): p.numel() * p.element_size() for p in model.parameters()}
    state = sum(v.numel() * v.element_size() for per in optimizer.state.values() for v in per.values()
                if torch.is_tensor(v))
    print(json.dumps({"peak": max(allocated), "params": sum(params.values()), "state": state,
                      "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
                      "optimizer": type(optimizer).__name__}))


if __name__ == "__main__":
    main()
