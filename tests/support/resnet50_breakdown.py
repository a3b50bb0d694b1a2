"""torchvision's ResNet50 (its layout: Bottleneck blocks, expansion 4, layers 3-4-6-3), built with torch alone (no
torchvision here), and a checkpoint of it with AdamW's state after one real step: the breakdown the H100 trace in
``tests/fixtures/torch_h100`` was made with (its README: parameters 102,228,128 B, buffers 212,904 B), for the
checks that replay that trace's caching allocator with each variable a block."""

from __future__ import annotations

from typing import Any


def resnet50() -> Any:
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, inplanes: int, planes: int, stride: int, downsample: bool) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(inplanes, planes, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(planes)
            self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(planes)
            self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(planes * 4)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride, bias=False),
                                            nn.BatchNorm2d(planes * 4)) if downsample else None

        def forward(self, x: Any) -> Any:
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + (x if self.downsample is None else self.downsample(x)))

    class ResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(64)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            inplanes, stages = 64, []
            for planes, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                stage = [Bottleneck(inplanes, planes, stride, True)]
                stage += [Bottleneck(planes * 4, planes, 1, False) for _ in range(blocks - 1)]
                stages.append(nn.Sequential(*stage))
                inplanes = planes * 4
            self.layer1, self.layer2, self.layer3, self.layer4 = stages
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(2048, 1000)

        def forward(self, x: Any) -> Any:
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    return ResNet50()


def save_checkpoint(path: str) -> None:
    """``torch.save`` of the model's and AdamW's state dicts after one real step (on a 2 x 3 x 64 x 64 batch)."""
    import torch

    torch.manual_seed(0)
    model = resnet50()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss = torch.nn.functional.cross_entropy(model(torch.randn(2, 3, 64, 64)), torch.tensor([1, 2]))
    loss.backward()
    optimizer.step()
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict()}, path)
