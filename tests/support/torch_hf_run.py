"""Models no What-if rule was written on, made from a config and trained by a plain loop (AdamW, or the
``torch.optim`` class ``--optimizer`` names), for What if's
held-out PyTorch check (tests/integration/test_projection_torch.py): a tiny Hugging Face Llama (rotary positions,
RMSNorm, a gated SiLU MLP), whose first forward op is the embedding, its first input the table [3000, 160], not
the batch; a tiny BERT masked LM, whose first op slices a [1, 512] buffer of position ids, and whose position
table [512, 144] has the shape of its [batch x seq, 144] buffers at batch 8 x 64 tokens; and a tiny GPT-2, whose
attention concatenates a key/value cache even in training (``torch.cat`` of an empty past and the new keys);
added later with no rule written on them, a T5 and a BART (encoder-decoders: relative position buckets, learned
positions), a Qwen2 (grouped-query attention), the Llama with gradient checkpointing (``llama_gc``), and on
3 x 64 x 64 pictures (``--seq`` unused) a ViT, a ResNet with BatchNorm, a MobileNetV2 (depthwise convolutions),
a ConvNeXt (``nn.Linear`` over channels last) and a Swin (shifted windows); and torch's own
``nn.TransformerEncoder`` (``encoder``), from a new user's report.

    python -m tests.support.torch_hf_run MODEL traced LOGDIR --batch B --seq L [--optimizer O]
    python -m tests.support.torch_hf_run MODEL truth OUT --batch B --seq L [--optimizer O]

``traced``: 5 iterations, 3-4 profiled by ``tb_modelmem.pytorch.profile`` (its raw trace kept in LOGDIR_raw).
``truth`` prints JSON read without tb_modelmem: the process profiles from before its model is built and the
truth is the highest "Total Allocated" of its raw trace, read with ``json``, inside steps 2-3
(``tests.support.torch_mlp_run._highest``); beside it the bytes of ``model.buffers()`` and of the optimizer's
step counters (``optimizer.state``).
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from tests.support.torch_mlp_run import STEPS, _highest

VOCAB = 3000
IMAGE, LABELS = 64, 10  # the vision models' pictures (3 x 64 x 64) and classes
VISION = ("vit", "resnet", "mobilenet_v2", "convnext", "swin")  # their configs' model_type


def _model(name: str) -> Any:
    if name in ("gru", "lstm", "rnn", "grucell", "lstmcell"):
        return _recurrent(name)
    if name == "encoder":
        return _encoder()
    if name == "llama_gc":  # recomputes each layer's activations in the backward pass
        model = _model("llama")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        return model
    import torch
    from transformers import BertConfig, BertForMaskedLM, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if name == "gpt2":  # learned positions, LayerNorm, Conv1D, and a key/value cache built while training
        from transformers import GPT2Config, GPT2LMHeadModel

        return GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=256, n_embd=128, n_layer=2, n_head=4,
                                          bos_token_id=0, eos_token_id=0))
    if name == "t5":  # an encoder-decoder: relative position buckets, the decoder's labels shifted right
        from transformers import T5Config, T5ForConditionalGeneration

        return T5ForConditionalGeneration(T5Config(vocab_size=VOCAB, d_model=128, d_kv=32, d_ff=320, num_layers=2,
                                                   num_decoder_layers=2, num_heads=4, decoder_start_token_id=0))
    if name == "qwen2":  # grouped-query attention: 2 key/value heads shared by 8 query heads
        from transformers import Qwen2Config, Qwen2ForCausalLM

        return Qwen2ForCausalLM(Qwen2Config(vocab_size=VOCAB, hidden_size=192, intermediate_size=448,
                                            num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                                            max_position_embeddings=512))
    if name == "vit":  # images: patches of 8 over a 64 x 64 picture, a class token
        from transformers import ViTConfig, ViTForImageClassification

        return ViTForImageClassification(ViTConfig(image_size=IMAGE, patch_size=8, hidden_size=144, num_hidden_layers=2,
                                                   num_attention_heads=4, intermediate_size=384, num_labels=LABELS))
    if name == "resnet":  # convolutions with BatchNorm (running statistics: buffers)
        from transformers import ResNetConfig, ResNetForImageClassification

        return ResNetForImageClassification(ResNetConfig(embedding_size=32, hidden_sizes=[32, 64, 128, 256],
                                                         depths=[1, 1, 1, 1], layer_type="basic", num_labels=LABELS))
    if name == "bart":  # an encoder-decoder with learned positions
        from transformers import BartConfig, BartForConditionalGeneration

        return BartForConditionalGeneration(BartConfig(
            vocab_size=VOCAB, d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=320, decoder_ffn_dim=320, max_position_embeddings=256,
            pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2))
    if name == "mobilenet":  # depthwise convolutions
        from transformers import MobileNetV2Config, MobileNetV2ForImageClassification

        return MobileNetV2ForImageClassification(MobileNetV2Config(image_size=IMAGE, depth_multiplier=0.35,
                                                                   num_labels=LABELS))
    if name == "convnext":  # a depthwise 7 x 7, then nn.Linear over channels last ([batch, h, w, channels])
        from transformers import ConvNextConfig, ConvNextForImageClassification

        return ConvNextForImageClassification(ConvNextConfig(hidden_sizes=[32, 64, 128, 256], depths=[1, 1, 2, 1],
                                                             num_labels=LABELS))
    if name == "swin":  # attention within shifted windows
        from transformers import SwinConfig, SwinForImageClassification

        return SwinForImageClassification(SwinConfig(image_size=IMAGE, patch_size=4, embed_dim=48, depths=[1, 1, 2],
                                                     num_heads=[2, 4, 8], window_size=4, num_labels=LABELS))
    if name == "bert":  # BERT's default table of 512 positions
        return BertForMaskedLM(BertConfig(vocab_size=VOCAB, hidden_size=144, intermediate_size=400, num_hidden_layers=2,
                                          num_attention_heads=4, max_position_embeddings=512))
    return LlamaForCausalLM(LlamaConfig(vocab_size=VOCAB, hidden_size=160, intermediate_size=352, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512))


def _recurrent(name: str) -> Any:
    """A recurrent language model called as the Hugging Face ones are (``model(input_ids=, labels=).loss``): an
    embedding, ``nn.GRU`` (one layer, 128 wide), ``nn.LSTM`` (two layers, bidirectional, 96 wide, time first)
    or ``nn.RNN`` (three layers of ReLU, 112 wide), a head over the vocabulary at each position. On the CPU each
    call runs a loop over the time steps, its buffers one step's, and stacks the steps' outputs from a list whose
    shapes torch's profiler does not record past 30 members (the LSTM: oneDNN's, with a workspace in bytes).
    ``grucell`` and ``lstmcell`` are a char-RNN's loop in Python instead: ``nn.GRUCell`` (128 wide) or
    ``nn.LSTMCell`` (112 wide) called once per token, the outputs stacked at top level by ``torch.stack``."""
    import torch
    from torch import nn

    class Recurrent(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 64)
            if name == "gru":
                self.rnn: nn.Module = nn.GRU(64, 128, batch_first=True)
                width, self.time_first = 128, False
            elif name == "rnn":
                self.rnn = nn.RNN(64, 112, num_layers=3, batch_first=True, nonlinearity="relu")
                width, self.time_first = 112, False
            elif name.endswith("cell"):
                self.rnn = nn.GRUCell(64, 128) if name == "grucell" else nn.LSTMCell(64, 112)
                width, self.time_first = 128 if name == "grucell" else 112, False
            else:
                self.rnn = nn.LSTM(64, 96, num_layers=2, bidirectional=True)
                width, self.time_first = 192, True
            self.head = nn.Linear(width, VOCAB)

        def forward(self, input_ids: Any, labels: Any) -> Any:
            x = self.embed(input_ids)
            if name.endswith("cell"):  # a char-RNN's loop in Python: one call per step, its outputs stacked
                state, steps = None, []
                for t in range(x.shape[1]):
                    state = self.rnn(x[:, t], state)
                    steps.append(state if name == "grucell" else state[0])
                hidden = torch.stack(steps, dim=1)
            else:
                hidden, _ = self.rnn(x.transpose(0, 1) if self.time_first else x)
            logits = self.head(hidden.transpose(0, 1) if self.time_first else hidden)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten())
            return type("Output", (), {"loss": loss})

    torch.manual_seed(0)
    return Recurrent()


def _encoder() -> Any:
    """torch's own ``nn.TransformerEncoder`` (``batch_first=True``: two layers 96 wide, 4 heads, 192 in the
    feed-forward), a learned position table and a head over the vocabulary, called as the Hugging Face models
    are. Its ``nn.MultiheadAttention`` works time first inside whatever ``batch_first`` says: the packed
    projections are [3, seq, batch, 96]."""
    import torch
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, 96)
            self.positions = nn.Parameter(torch.zeros(512, 96))
            layer = nn.TransformerEncoderLayer(96, 4, 192, dropout=0.0, batch_first=True)
            self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(96, VOCAB)

        def forward(self, input_ids: Any, labels: Any) -> Any:
            hidden = self.encoder(self.embed(input_ids) + self.positions[: input_ids.shape[1]])
            loss = nn.functional.cross_entropy(self.head(hidden).flatten(0, 1), labels.flatten())
            return type("Output", (), {"loss": loss})

    torch.manual_seed(0)
    return Encoder()


def _optimizer(name: str, model: Any) -> Any:
    import torch

    if name == "AdamW":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    if name in ("Adafactor", "RMSprop", "Adagrad", "NAdam", "Adamax", "Adadelta", "RAdam"):
        return getattr(torch.optim, name)(model.parameters(), lr=1e-3)
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9 if name == "momentum" else 0.0)


def _step(model: Any, optimizer: Any, batch: int, seq: int, i: int) -> None:
    import torch

    generator = torch.Generator().manual_seed(i)
    if getattr(getattr(model, "config", None), "model_type", "") in VISION:
        pixels = torch.randn(batch, 3, IMAGE, IMAGE, generator=generator)
        model(pixel_values=pixels, labels=torch.randint(0, LABELS, (batch,), generator=generator)).loss.backward()
    else:
        ids = torch.randint(0, VOCAB, (batch, seq), generator=generator)
        model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("model", choices=("llama", "llama_gc", "bert", "gpt2", "t5", "qwen2", "bart", "vit", "resnet",
                                          "mobilenet", "convnext", "swin", "gru", "lstm", "rnn", "grucell", "lstmcell",
                                          "encoder"))
    parser.add_argument("kind", choices=("traced", "truth"))
    parser.add_argument("path")
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--seq", type=int, required=True)
    parser.add_argument("--optimizer", default="AdamW", choices=("AdamW", "SGD", "momentum", "Adafactor", "RMSprop",
                                                                 "Adagrad", "NAdam", "Adamax", "Adadelta", "RAdam"))
    args = parser.parse_args()
    import torch

    if args.kind == "traced":
        import tb_modelmem

        model = _model(args.model)
        optimizer = _optimizer(args.optimizer, model)
        # the window's raw Chrome trace kept beside the log dir (LOGDIR_raw), for checks read with json
        with tb_modelmem.pytorch.profile(model, optimizer, args.path, profile_steps=(3, 4),
                                         trace_dir=f"{args.path.rstrip(os.sep)}_raw") as prof:
            for i in range(STEPS + 1):
                _step(model, optimizer, args.batch, args.seq, i)
                prof.step()
        return
    os.makedirs(args.path, exist_ok=True)
    with torch.profiler.profile(profile_memory=True) as prof:
        model = _model(args.model)
        optimizer = _optimizer(args.optimizer, model)
        for i in range(STEPS):
            with torch.profiler.record_function(f"step{i}"):
                _step(model, optimizer, args.batch, args.seq, i)
    prof.export_chrome_trace(os.path.join(args.path, "rank0.json"))
    counters = [t for state in optimizer.state.values() for key, t in state.items() if torch.is_tensor(t)
                and key == "step"]
    print(json.dumps({"peak": _highest(os.path.join(args.path, "rank0.json")),
                      "buffers": sum(b.numel() * b.element_size() for b in model.buffers()),
                      "counters": sum(t.numel() * t.element_size() for t in counters)}))


if __name__ == "__main__":
    main()
