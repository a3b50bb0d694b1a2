"""karpathy/nanoGPT (``model.py``'s ``GPT``, ``train.py``'s loop) at the README's CPU recipe, on synthetic characters:
a GPT whose token embedding is tied to its output head, ``configure_optimizers``' two AdamW groups (decay for
tensors of two or more dimensions), micro-batches whose gradients accumulate before one step, ``clip_grad_norm_``
and ``train.py``'s checkpoint dict (``model``, ``optimizer``, ``model_args``, ``iter_num``, ``best_val_loss``,
``config``) saved with ``torch.save``. ``train(model, optimizer, step_end, save_to)``."""

import math
import os
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.nn import functional as F

# README: `python train.py config/train_shakespeare_char.py --device=cpu --compile=False --eval_iters=20
# --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4 --n_embd=128 --max_iters=2000
# --lr_decay_iters=2000 --dropout=0.0`
BATCH, BLOCK, N_LAYER, N_HEAD, N_EMBD, DROPOUT, BIAS = 12, 64, 4, 4, 128, 0.0, False
VOCAB = 65  # shakespeare_char's meta.pkl
ACCUMULATE = 4  # corpus patch: the config's 1 (train_gpt2.py's is 40), so that gradients accumulate
LR, WEIGHT_DECAY, BETAS, GRAD_CLIP = 1e-3, 1e-1, (0.9, 0.99), 1.0


@dataclass
class GPTConfig:
    block_size: int = BLOCK
    vocab_size: int = VOCAB
    n_layer: int = N_LAYER
    n_head: int = N_HEAD
    n_embd: int = N_EMBD
    dropout: float = DROPOUT
    bias: bool = BIAS


class LayerNorm(nn.Module):
    """A layer norm whose bias can be left out."""

    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head, self.n_embd, self.dropout = config.n_head, config.n_embd, config.dropout

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0, is_causal=True)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C)))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.gelu = nn.GELU()
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=LayerNorm(config.n_embd, bias=config.bias),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying: one tensor, two names
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]  # a tied tensor once, as named_parameters gives it
        groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
                  {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)  # fused only on CUDA


class Batches:
    """train.py's ``get_batch``: ``batch`` windows of ``block`` characters at random places in the data, and the
    same shifted by one as targets. Corpus patch: no train.bin memmap; synthetic characters, drawn once."""

    def __init__(self, batch, block):
        self.data = torch.randint(0, VOCAB, (batch * block * 4,))
        self.batch, self.block = batch, block

    def get_batch(self):
        ix = torch.randint(len(self.data) - self.block, (self.batch,))
        x = torch.stack([self.data[i:i + self.block] for i in ix])
        y = torch.stack([self.data[i + 1:i + 1 + self.block] for i in ix])
        return x, y


def build(batch=BATCH, block=BLOCK, steps=6):
    torch.manual_seed(1337)  # train.py's seed
    model_args = dict(n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, block_size=block, bias=BIAS,
                      vocab_size=VOCAB, dropout=DROPOUT)
    model = GPT(GPTConfig(**model_args))
    optimizer = model.configure_optimizers(WEIGHT_DECAY, LR, BETAS)
    return model, optimizer, Batches(batch, block), model_args, steps


def train(model, optimizer, batches, model_args, steps, step_end=lambda: None, save_to=None):
    model.train()
    X, Y = batches.get_batch()  # fetch the very first batch
    for iter_num in range(steps):
        for micro_step in range(ACCUMULATE):
            _, loss = model(X, Y)
            loss = loss / ACCUMULATE  # scale the loss to account for gradient accumulation
            X, Y = batches.get_batch()  # the next batch, fetched while the forward pass's work is in flight
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        optimizer.step()  # train.py: scaler.step(optimizer); its GradScaler is disabled off CUDA float16
        optimizer.zero_grad(set_to_none=True)
        step_end()  # corpus patch: where the profiler's step() goes
    if save_to:  # train.py saves at its eval interval; here once, after the last step
        os.makedirs(save_to, exist_ok=True)
        checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "model_args": model_args,
                      "iter_num": steps, "best_val_loss": torch.tensor(4.17),  # estimate_loss' mean: a tensor
                      "config": dict(model_args, batch_size=X.size(0), gradient_accumulation_steps=ACCUMULATE,
                                     learning_rate=LR, dataset="shakespeare_char", compile=False, device="cpu")}
        torch.save(checkpoint, os.path.join(save_to, "ckpt.pt"))
