"""A model no What-if rule was written on: a tiny Hugging Face Llama (rotary positions, RMSNorm, a gated SiLU MLP)
made from a config and trained by a plain loop with AdamW, for What if's held-out PyTorch check
(tests/integration/test_projection_torch.py). Its first forward op is the embedding, whose first input is the
table [3000, 160], not the batch.

    python -m tests.support.torch_llama_run traced LOGDIR --batch B --seq L [--optimizer O]
    python -m tests.support.torch_llama_run truth OUT --batch B --seq L [--optimizer O]

``traced``: 5 iterations, 3-4 profiled by ``tb_modelmem.pytorch.profile``. ``truth`` prints JSON read without
tb_modelmem: the process profiles from before its model is built and the truth is the highest "Total
Allocated" of its raw trace, read with ``json``, inside steps 2-3 (``tests.support.torch_mlp_run._highest``).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from tests.support.torch_mlp_run import STEPS, _highest

VOCAB = 3000


def _model() -> Any:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=160, intermediate_size=352, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512))


def _optimizer(name: str, model: Any) -> Any:
    import torch

    if name == "AdamW":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9 if name == "momentum" else 0.0)


def _step(model: Any, optimizer: Any, batch: int, seq: int, i: int) -> None:
    import torch

    ids = torch.randint(0, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(i))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("kind", choices=("traced", "truth"))
    parser.add_argument("path")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--optimizer", choices=("AdamW", "SGD", "momentum"), default="AdamW")
    args = parser.parse_args()
    import torch

    if args.kind == "traced":
        import tb_modelmem

        model = _model()
        optimizer = _optimizer(args.optimizer, model)
        with tb_modelmem.pytorch.profile(model, optimizer, args.path, profile_steps=(3, 4)) as prof:
            for i in range(STEPS + 1):
                _step(model, optimizer, args.batch, args.seq, i)
                prof.step()
        return
    os.makedirs(args.path, exist_ok=True)
    with torch.profiler.profile(profile_memory=True) as prof:
        model = _model()
        optimizer = _optimizer(args.optimizer, model)
        for i in range(STEPS):
            with torch.profiler.record_function(f"step{i}"):
                _step(model, optimizer, args.batch, args.seq, i)
    prof.export_chrome_trace(os.path.join(args.path, "rank0.json"))
    print(json.dumps({"peak": _highest(os.path.join(args.path, "rank0.json"))}))


if __name__ == "__main__":
    main()
