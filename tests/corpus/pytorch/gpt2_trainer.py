"""transformers' run_clm.py, reduced: a GPT-2 made from a config, trained by ``Trainer`` on token blocks."""

import torch
from transformers import AutoConfig, AutoModelForCausalLM, Trainer, TrainingArguments

BLOCK = 64


class Blocks(torch.utils.data.Dataset):  # corpus patch: synthetic token blocks, as group_texts makes them
    def __init__(self, count, vocab, length=BLOCK):
        self.count, self.vocab, self.length = count, vocab, length

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        ids = torch.randint(0, self.vocab, (self.length,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def build():
    torch.manual_seed(0)
    config = AutoConfig.for_model("gpt2", vocab_size=1000, n_positions=BLOCK, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=0, eos_token_id=0)  # corpus patch: a tiny GPT-2, no download
    return AutoModelForCausalLM.from_config(config), Blocks(64, config.vocab_size)


def train(model, dataset, output_dir, callbacks=(), batch_size=8, steps=6):
    args = TrainingArguments(output_dir=output_dir, per_device_train_batch_size=batch_size, max_steps=steps,
                             report_to=[], save_strategy="no", logging_steps=100, use_cpu=True,
                             dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=list(callbacks))
    trainer.train()
    return trainer
