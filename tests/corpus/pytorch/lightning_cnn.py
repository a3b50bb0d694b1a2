"""A LightningModule as Lightning's docs write one: a conv net with BatchNorm, Adam, ``Trainer.fit``."""

import lightning as L
import torch
import torch.nn.functional as F
from torch import nn


class LitConvNet(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                                      nn.AdaptiveAvgPool2d(1))
        self.classifier = nn.Linear(32, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=1e-3)


def build(batch_size=32, steps=6):
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(batch_size * steps, 3, 32, 32),  # corpus patch: synthetic
                                          torch.randint(0, 10, (batch_size * steps,)))
    return LitConvNet(), torch.utils.data.DataLoader(data, batch_size=batch_size)


def train(model, loader, root, callbacks=(), profiler=None, steps=6, logger=True):
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", callbacks=list(callbacks), profiler=profiler,
                        default_root_dir=root, enable_progress_bar=False, enable_model_summary=False,
                        logger=L.pytorch.loggers.TensorBoardLogger(root, name="lightning") if logger else False,
                        log_every_n_steps=1)
    trainer.fit(model, loader)
    return trainer
