"""The demo's PyTorch runs, in a process of their own (TensorFlow blocked from it, as a PyTorch user's
process has none):

  torch_loop            pytorch/examples' MNIST network in a plain loop under ``tb_modelmem.pytorch.profile``:
                        Storage by state_dict name, iterations 3-4 profiled with each op on its module
  gpt2_trainer          a GPT-2 made from a config, trained by Hugging Face ``Trainer`` with
                        ``integrations.transformers.MemoryCallback`` (skipped when transformers is absent)

    python -m demo.torch_runs LOGDIR
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys


class _Refused(importlib.abc.Loader):
    def create_module(self, spec):  # type: ignore[no-untyped-def]
        raise ModuleNotFoundError(f"No module named {spec.name!r} (this demo process has none, as a user's has none)")

    def exec_module(self, module):  # type: ignore[no-untyped-def]
        pass


class NoTensorFlow(importlib.abc.MetaPathFinder):
    """TensorFlow (or the packages named) "not installed" for this process (tb_modelmem must never need it
    for PyTorch or flax): a probe (``find_spec``, as libraries ask whether TensorFlow exists) is answered;
    an import fails."""

    def __init__(self, packages: tuple = ("tensorflow",)) -> None:
        self.packages = packages

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name.split(".", 1)[0] in self.packages:
            return importlib.machinery.ModuleSpec(name, _Refused())
        return None


def torch_loop(logdir: str) -> None:
    import torch
    import torch.nn.functional as F

    import tb_modelmem

    class Net(torch.nn.Module):  # pytorch/examples mnist/main.py's
        def __init__(self) -> None:
            super().__init__()
            self.conv1, self.conv2 = torch.nn.Conv2d(1, 32, 3, 1), torch.nn.Conv2d(32, 64, 3, 1)
            self.dropout1, self.dropout2 = torch.nn.Dropout(0.25), torch.nn.Dropout(0.5)
            self.fc1, self.fc2 = torch.nn.Linear(9216, 128), torch.nn.Linear(128, 10)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = F.max_pool2d(F.relu(self.conv2(F.relu(self.conv1(x)))), 2)
            x = self.dropout2(F.relu(self.fc1(torch.flatten(self.dropout1(x), 1))))
            return F.log_softmax(self.fc2(x), dim=1)

    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(64 * 6, 1, 28, 28), torch.randint(0, 10, (64 * 6,)))
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    with tb_modelmem.pytorch.profile(model, optimizer, os.path.join(logdir, "torch_loop"), (3, 4)) as prof:
        for x, y in torch.utils.data.DataLoader(data, batch_size=64):
            optimizer.zero_grad()
            F.nll_loss(model(x), y).backward()
            optimizer.step()
            prof.step()


def gpt2_trainer(logdir: str) -> None:
    if importlib.util.find_spec("transformers") is None:
        print("      (transformers is not installed: the Trainer run is skipped)")
        return
    import tempfile

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, Trainer, TrainingArguments

    from tb_modelmem.integrations.transformers import MemoryCallback

    class Blocks(torch.utils.data.Dataset):
        def __len__(self) -> int:
            return 64

        def __getitem__(self, i: int) -> dict:
            ids = torch.randint(0, 1000, (64,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": ids, "labels": ids.clone()}

    torch.manual_seed(0)
    config = AutoConfig.for_model("gpt2", vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                                  bos_token_id=0, eos_token_id=0)
    with tempfile.TemporaryDirectory() as output:
        args = TrainingArguments(output_dir=output, per_device_train_batch_size=8, max_steps=6, report_to=[],
                                 save_strategy="no", use_cpu=True, disable_tqdm=True)
        Trainer(model=AutoModelForCausalLM.from_config(config), args=args, train_dataset=Blocks(),
                callbacks=[MemoryCallback(log_dir=os.path.join(logdir, "gpt2_trainer"))]).train()


if __name__ == "__main__":
    sys.meta_path.insert(0, NoTensorFlow())
    torch_loop(sys.argv[1])
    gpt2_trainer(sys.argv[1])
