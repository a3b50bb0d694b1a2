"""huggingface/peft's ``examples/sft`` (``train.py``, ``utils.py``, ``run_peft.sh``), reduced: a causal LM made from
a config, LoRA on every linear layer (``get_peft_model``), trained by ``Trainer`` in bf16 with gradient
checkpointing and accumulated gradients. ``build()`` gives the PEFT model and its data; ``train(model, dataset,
output_dir, callbacks)`` runs it and returns the trainer."""

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoConfig, AutoModelForCausalLM, Trainer, TrainingArguments

from tests.corpus.pytorch.gpt2_trainer import Blocks

BLOCK = 64  # run_peft.sh's max_length 2048, packed
BATCH = 4  # run_peft.sh's 8


def build(block=BLOCK):
    torch.manual_seed(100)  # run_peft.sh's seed
    config = AutoConfig.for_model("mistral", vocab_size=1000, hidden_size=96, intermediate_size=224,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  max_position_embeddings=256)  # corpus patch: a tiny Mistral, no download
    model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")  # use_flash_attn: no GPU
    peft_config = LoraConfig(lora_alpha=16, lora_dropout=0.1, r=8, bias="none", task_type="CAUSAL_LM",
                             target_modules="all-linear")  # 4-bit quantization dropped: bitsandbytes needs a GPU
    model = get_peft_model(model, peft_config)
    # corpus patch: Trainer, not trl's SFTTrainer (its subclass), which does this for reentrant checkpointing
    model.enable_input_require_grads()
    return model, Blocks(64, config.vocab_size, block)


def train(model, dataset, output_dir, callbacks=(), batch_size=BATCH, steps=6):
    args = TrainingArguments(output_dir=output_dir, per_device_train_batch_size=batch_size, max_steps=steps,
                             gradient_accumulation_steps=2,  # corpus patch: run_peft.sh's 8
                             gradient_checkpointing=True, gradient_checkpointing_kwargs={"use_reentrant": True},
                             bf16=True, learning_rate=1e-4, lr_scheduler_type="cosine", weight_decay=1e-4,
                             warmup_steps=0, max_grad_norm=1.0, seed=100, report_to=[], save_strategy="no",
                             logging_steps=100, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=dataset, callbacks=list(callbacks))
    trainer.train()
    return trainer
