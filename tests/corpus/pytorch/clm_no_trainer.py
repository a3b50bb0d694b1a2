"""transformers' run_clm_no_trainer.py, reduced: a GPT-2 made from a config, trained by a plain loop that
Accelerate prepares (its AdamW in the script's decay and no-decay groups, a linear schedule), checkpointed by
``accelerator.save_state``."""

import torch
from accelerate import Accelerator
from transformers import AutoConfig, AutoModelForCausalLM, get_scheduler

from tests.corpus.pytorch.gpt2_trainer import Blocks  # synthetic token blocks, as group_texts makes them

BLOCK = 32
BATCH = 8


def build():
    """The model, the optimizer, the schedule and the loader, prepared by Accelerate as the script does."""
    torch.manual_seed(0)
    config = AutoConfig.for_model("gpt2", vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=0, eos_token_id=0)  # corpus patch: a tiny GPT-2, no download
    model = AutoModelForCausalLM.from_config(config)
    no_decay = ["bias", "layer_norm.weight"]
    grouped = [
        {"params": [p for n, p in model.named_parameters() if not any(nd in n for nd in no_decay)],
         "weight_decay": 0.0},
        {"params": [p for n, p in model.named_parameters() if any(nd in n for nd in no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(grouped, lr=5e-5)
    loader = torch.utils.data.DataLoader(Blocks(64, config.vocab_size, BLOCK), shuffle=True, batch_size=BATCH)
    scheduler = get_scheduler("linear", optimizer=optimizer, num_warmup_steps=0, num_training_steps=len(loader))
    accelerator = Accelerator(cpu=True)  # corpus patch: the CPU
    model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
    return accelerator, model, optimizer, loader, scheduler


def train(accelerator, model, optimizer, loader, scheduler, step_end=lambda: None, save_to=None):
    model.train()
    for batch in loader:
        outputs = model(**batch)
        accelerator.backward(outputs.loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        step_end()  # corpus patch: where the profiler's step() goes
    if save_to:
        accelerator.save_state(save_to)
