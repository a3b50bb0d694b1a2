"""PyTorch checkpoints as the ecosystem writes them (issue 49), each with the truth its live objects gave:

    python -m tests.support.torch_checkpoints OUT     # writes OUT/<kind>..., and OUT/truth.json

- ``trainer/checkpoint-2/``: Hugging Face ``Trainer`` saving a GPT-2 made from a config (safetensors,
  ``optimizer.pt``, ``scheduler.pt``, ``rng_state.pth``, ``training_args.bin``, ...);
- ``trainer_bin/checkpoint-2/``: the same with ``pytorch_model.bin`` (a torch.save'd state_dict) for the
  weights, as transformers before 5 saved by default;
- ``trainer_lora/checkpoint-2/``: the same Trainer over a PEFT LoRA model (``adapter_model.safetensors``);
- ``accelerate/``: ``Accelerator.save_state`` of transformers' ``run_clm_no_trainer.py`` loop (a GPT-2 under
  AdamW in its two groups: no decay for names with ``bias`` or ``layer_norm.weight``, which GPT-2's ``ln_1``
  does not match; a linear schedule) with a second model under SGD with momentum, its biases in a group of their
  own (``model_1``, ``optimizer_1``);
  ``accelerate_bin/`` the same saved as ``pytorch_model.bin`` (a tied weight under both names);
  ``accelerate_distill/``: a student beside a frozen teacher of the same shapes;
- ``sharded/``: ``save_pretrained`` split into safetensors shards with their index;
- ``bf16.safetensors``: ``safetensors.torch.save_file`` of bfloat16 and float8 tensors;
- ``lightning.ckpt``: Lightning's checkpoint of a conv net with BatchNorm under Adam;
- ``dcp_1/`` and ``dcp_2/``: ``torch.distributed.checkpoint.save`` of a model + AdamW from
  ``get_state_dict``, in one process and sharded by FSDP2 over two gloo ranks.

Truth: ``model.parameters()`` (a tied one once), ``model.buffers()``, ``optimizer.state`` by key, file sizes.
Run in a fresh process (torch.distributed, TensorFlow blocked).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict

from tests.support import gloo, no_tensorflow


def _state(optimizer: Any) -> Dict[str, int]:
    import torch

    out: Dict[str, int] = {}
    for per_param in optimizer.state.values():
        for key, value in per_param.items():
            if torch.is_tensor(value):
                out[key] = out.get(key, 0) + value.numel() * value.element_size()
    return out


def _model_truth(model: Any) -> Dict[str, int]:
    seen, params = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            params += p.numel() * p.element_size()
    return {"parameters": params, "buffers": sum(b.numel() * b.element_size() for b in model.buffers())}


def _trainer(out: str) -> Dict[str, Any]:
    """Trainer's checkpoint, and beside it the same folder as transformers before 5 wrote it by default
    (``pytorch_model.bin``, a torch.save'd state_dict, in place of ``model.safetensors``)."""
    import shutil

    import torch
    from transformers import Trainer, TrainingArguments

    from tests.corpus.pytorch import gpt2_trainer

    model, dataset = gpt2_trainer.build()
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, max_steps=2, report_to=[],
                             save_strategy="steps", save_steps=2, use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)
    folder = os.path.join(out, "checkpoint-2")
    old = os.path.join(out + "_bin", "checkpoint-2")
    shutil.copytree(folder, old)
    os.remove(os.path.join(old, "model.safetensors"))
    state = {k: v for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied: saved once, as HF does
    torch.save(state, os.path.join(old, "pytorch_model.bin"))
    named = {id(p): name for name, p in model.named_parameters()}
    groups = [{"params": [named[id(p)] for p in group["params"]], "weight_decay": group["weight_decay"]}
              for group in optimizer.param_groups]  # Trainer's decay and no-decay groups
    truth = {**_model_truth(model), "optimizer_state": _state(optimizer), "optimizer": type(optimizer).__name__,
             "groups": groups, "slots_by_module": _slots_by_module(model, optimizer)}
    return {"trainer": {**truth, "path": folder}, "trainer_bin": {**truth, "path": old}}


def _trainer_lora(out: str) -> Dict[str, Any]:
    """Trainer's checkpoint of a PEFT LoRA model (rank 4 on GPT-2's c_attn): the adapter's weights alone
    (``adapter_model.safetensors``, named without PEFT's adapter name ``default``), and their optimizer."""
    from peft import LoraConfig, get_peft_model
    from transformers import Trainer, TrainingArguments

    from tests.corpus.pytorch import gpt2_trainer

    model, dataset = gpt2_trainer.build()
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn"], fan_in_fan_out=True,
                                             task_type="CAUSAL_LM"))
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, max_steps=2, report_to=[],
                             save_strategy="steps", save_steps=2, use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=dataset)
    trainer.train()
    optimizer = getattr(trainer.optimizer, "optimizer", trainer.optimizer)

    def saved(name: str) -> str:  # PEFT saves an adapter's tensors without its name
        return name.replace(".default.", ".")

    named = {id(p): saved(name) for name, p in model.named_parameters()}
    trainable = [p for p in model.parameters() if p.requires_grad]
    return {"parameters": sum(p.numel() * p.element_size() for p in trainable), "buffers": 0,
            "optimizer_state": _state(optimizer), "optimizer": type(optimizer).__name__,
            "groups": [{"params": [named[id(p)] for p in group["params"]], "weight_decay": group["weight_decay"]}
                       for group in optimizer.param_groups],
            "slots_by_module": {saved(m + ".").rstrip("."): b for m, b in _slots_by_module(model, optimizer).items()},
            "path": os.path.join(out, "checkpoint-2")}


def _slots_by_module(model: Any, optimizer: Any, prefix: str = "") -> Dict[str, int]:
    """Each parameter's slots (its state tensors shaped as it), by its module's path."""
    import torch

    named = {id(p): name for name, p in model.named_parameters()}
    out: Dict[str, int] = {}
    for p, per_param in optimizer.state.items():
        module = prefix + named[id(p)].rsplit(".", 1)[0]
        out[module] = out.get(module, 0) + sum(v.numel() * v.element_size() for v in per_param.values()
                                               if torch.is_tensor(v) and v.shape == p.shape)
    return out


def _accelerate(out: str) -> Dict[str, Any]:
    import torch
    from accelerate import Accelerator
    from transformers import get_scheduler

    from tests.corpus.pytorch import gpt2_trainer

    model, dataset = gpt2_trainer.build()
    no_decay = ["bias", "layer_norm.weight"]  # run_clm_no_trainer.py's, as it is
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.01},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=5e-4)
    scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=0, num_training_steps=2)
    head = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    head_optimizer = torch.optim.SGD([{"params": [head[0].weight, head[2].weight], "weight_decay": 0.01},
                                      {"params": [head[0].bias, head[2].bias], "weight_decay": 0.0}],
                                     lr=0.01, momentum=0.9)
    loader = torch.utils.data.DataLoader(dataset, batch_size=8)
    accelerator = Accelerator(cpu=True)
    model, head, optimizer, head_optimizer, loader, scheduler = accelerator.prepare(
        model, head, optimizer, head_optimizer, loader, scheduler)
    for step, batch in enumerate(loader):
        outputs = model(**batch, output_hidden_states=True)
        accelerator.backward(outputs.loss + head(outputs.hidden_states[-1].detach()).mean())
        optimizer.step()
        head_optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        head_optimizer.zero_grad()
        if step == 1:
            break
    accelerator.save_state(out)
    accelerator.save_state(out + "_bin", safe_serialization=False)  # pytorch_model.bin: lm_head.weight kept too
    state = _state(optimizer)
    for key, value in _state(head_optimizer).items():
        state[key] = state.get(key, 0) + value
    parameters = _model_truth(model)["parameters"] + _model_truth(head)["parameters"]
    head_names = {id(p): "model_1." + name for name, p in head.named_parameters()}
    truth = {"parameters": parameters, "buffers": 0, "optimizer_state": state, "optimizer": "AdamW + SGD",
             "head_groups": [[head_names[id(p)] for p in group["params"]] for group in head_optimizer.param_groups],
             "slots_by_module": {**_slots_by_module(model, optimizer), **_slots_by_module(head, head_optimizer,
                                                                                           "model_1.")}}
    return {"accelerate": {**truth, "path": out}, "accelerate_bin": {**truth, "path": out + "_bin"},
            "accelerate_distill": _distill(out + "_distill")}


def _distill(out: str) -> Dict[str, Any]:
    """A student trained beside a frozen teacher of the same shapes, both prepared: the optimizer's slots fit
    either model's parameters, so which it updates is not in the files."""
    import torch
    from accelerate import Accelerator

    torch.manual_seed(0)
    teacher, student = (torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
                        for _ in range(2))
    teacher.requires_grad_(False)
    optimizer = torch.optim.AdamW(student.parameters(), lr=1e-3)
    accelerator = Accelerator(cpu=True)
    teacher, student, optimizer = accelerator.prepare(teacher, student, optimizer)
    for _ in range(2):
        x = torch.randn(8, 16)
        loss = torch.nn.functional.mse_loss(student(x), teacher(x))
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
    accelerator.save_state(out)
    parameters = _model_truth(teacher)["parameters"] + _model_truth(student)["parameters"]
    return {"parameters": parameters, "buffers": 0, "optimizer_state": _state(optimizer), "optimizer": "AdamW",
            "path": out, "slots_by_module": _slots_by_module(student, optimizer, "model_1.")}


def _sharded(out: str) -> Dict[str, Any]:
    from tests.corpus.pytorch import gpt2_trainer

    model, _ = gpt2_trainer.build()
    model.save_pretrained(out, max_shard_size="300KB")
    return {**_model_truth(model), "path": os.path.join(out, "model.safetensors.index.json")}


def _bf16(path: str) -> Dict[str, Any]:
    import torch
    from safetensors.torch import save_file

    tensors = {"embed.weight": torch.zeros(1000, 64, dtype=torch.bfloat16),
               "proj.weight": torch.zeros(64, 64, dtype=torch.float8_e4m3fn),
               "norm.running_mean": torch.zeros(64)}
    save_file(tensors, path)
    return {"tensors": {k: v.numel() * v.element_size() for k, v in tensors.items()}, "path": path}


def _lightning(root: str) -> Dict[str, Any]:
    from tests.corpus.pytorch import lightning_cnn

    model, loader = lightning_cnn.build()
    trainer = lightning_cnn.train(model, loader, root, steps=2, logger=False)
    path = os.path.join(root, "lightning.ckpt")
    trainer.save_checkpoint(path)
    return {**_model_truth(model), "optimizer_state": _state(trainer.optimizers[0]), "optimizer": "Adam",
            "path": path}


def _dcp_rank(rank: int, port: int, world: int, out: str) -> None:
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    model, optimizer = _dcp_model(sharded=world > 1)
    model_sd, optim_sd = get_state_dict(model, optimizer)
    dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=out)
    if rank == 0:
        with open(os.path.join(os.path.dirname(out), os.path.basename(out) + ".json"), "w") as f:
            json.dump({"parameters": sum(p.numel() * p.element_size() for p in model.parameters()),
                       "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
                       "optimizer_state": _state(optimizer), "optimizer": "AdamW", "path": out}, f)
    dist.barrier()
    dist.destroy_process_group()


def _dcp_model(sharded: bool) -> Any:
    """A Linear-BatchNorm-Linear model and its AdamW after one step (FSDP2-sharded when ``sharded``: a sharded
    tensor's numel is its global one)."""
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 8))
    if sharded:
        from torch.distributed.fsdp import fully_shard

        for layer in (model[0], model[3]):
            fully_shard(layer)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 16)).sum().backward()
    optimizer.step()
    return model, optimizer


def make_all(out: str) -> Dict[str, Any]:
    os.makedirs(out, exist_ok=True)
    truth: Dict[str, Any] = {**_trainer(os.path.join(out, "trainer")),
                             "trainer_lora": _trainer_lora(os.path.join(out, "trainer_lora")),
                             **_accelerate(os.path.join(out, "accelerate")),
                             "sharded": _sharded(os.path.join(out, "sharded")),
                             "bf16": _bf16(os.path.join(out, "bf16.safetensors")),
                             "lightning": _lightning(os.path.join(out, "lightning"))}
    for world in (1, 2):
        folder = os.path.join(out, f"dcp_{world}")
        gloo.spawn_ranks(_dcp_rank, world, world, folder, fresh=folder)
        with open(folder + ".json") as f:
            truth[f"dcp_{world}"] = json.load(f)
    with open(os.path.join(out, "truth.json"), "w") as f:
        json.dump(truth, f, indent=1)
    return truth


if __name__ == "__main__":
    no_tensorflow.block()
    make_all(sys.argv[1])
