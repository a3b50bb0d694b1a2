"""pytorch/examples mnist/main.py, on synthetic MNIST-shaped data: ``train(model, loader, optimizer, step_end)``."""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import StepLR


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        return F.log_softmax(x, dim=1)


def build(batch_size=64, steps=6):
    torch.manual_seed(1)
    data = torch.utils.data.TensorDataset(torch.randn(batch_size * steps, 1, 28, 28),  # corpus patch: no download
                                          torch.randint(0, 10, (batch_size * steps,)))
    loader = torch.utils.data.DataLoader(data, batch_size=batch_size)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    return model, optimizer, loader


def train(model, loader, optimizer, step_end=lambda: None):
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    model.train()
    for data, target in loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        step_end()  # corpus patch: where the profiler's step() goes
    scheduler.step()
