"""pytorch/examples dcgan/main.py, on synthetic 64 x 64 pictures: ``Generator`` and ``Discriminator`` (its
``ngf``/``ndf`` 64, ``nz`` 100, BatchNorm), ``weights_init``, ``BCELoss``, one Adam each (``lr=0.0002,
betas=(0.5, 0.999)``), and its loop: the discriminator on a real batch and on ``fake.detach()``, its step, then
the generator through the discriminator, its step. ``train(netG, netD, optimizerG, optimizerD, loader, step_end)``."""

import torch
import torch.nn as nn
import torch.optim as optim

NZ, NGF, NDF, NC = 100, 64, 64, 3  # main.py's defaults (nc 3: its image datasets)
BATCH = 8  # corpus patch: main.py's batchSize is 64; 8 keeps six CPU steps to seconds


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.ConvTranspose2d(NZ, NGF * 8, 4, 1, 0, bias=False), nn.BatchNorm2d(NGF * 8), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 8, NGF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 4), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 4, NGF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF * 2), nn.ReLU(True),
            nn.ConvTranspose2d(NGF * 2, NGF, 4, 2, 1, bias=False), nn.BatchNorm2d(NGF), nn.ReLU(True),
            nn.ConvTranspose2d(NGF, NC, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, input):
        return self.main(input)  # corpus patch: main.py's data_parallel branch is for ngpu > 1


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.main = nn.Sequential(
            nn.Conv2d(NC, NDF, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF, NDF * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 2), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 2, NDF * 4, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 4), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 4, NDF * 8, 4, 2, 1, bias=False), nn.BatchNorm2d(NDF * 8), nn.LeakyReLU(0.2, inplace=True),
            nn.Conv2d(NDF * 8, 1, 4, 1, 0, bias=False), nn.Sigmoid())

    def forward(self, input):
        return self.main(input).view(-1, 1).squeeze(1)


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        torch.nn.init.normal_(m.weight, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        torch.nn.init.normal_(m.weight, 1.0, 0.02)
        torch.nn.init.zeros_(m.bias)


def build(steps=6, batch=BATCH, optimizer="adam"):
    torch.manual_seed(999)
    pictures = torch.rand(batch * steps, NC, 64, 64) * 2 - 1  # corpus patch: no dataset download
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(pictures), batch_size=batch, shuffle=True)
    netG, netD = Generator(), Discriminator()
    netG.apply(weights_init)
    netD.apply(weights_init)
    if optimizer == "adam":  # the script's
        optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
        optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))
    else:  # corpus patch: what a user asks What if about, run for real ("sgd", "momentum")
        momentum = 0.9 if optimizer == "momentum" else 0.0
        optimizerD = optim.SGD(netD.parameters(), lr=0.0002, momentum=momentum)
        optimizerG = optim.SGD(netG.parameters(), lr=0.0002, momentum=momentum)
    return netG, netD, optimizerG, optimizerD, loader


def train(netG, netD, optimizerG, optimizerD, loader, step_end=lambda: None):
    criterion = nn.BCELoss()
    real_label, fake_label = 1, 0
    for data in loader:
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = data[0]
        batch_size = real_cpu.size(0)
        label = torch.full((batch_size,), real_label, dtype=real_cpu.dtype)
        output = netD(real_cpu)
        errD_real = criterion(output, label)
        errD_real.backward()
        noise = torch.randn(batch_size, NZ, 1, 1)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach())
        errD_fake = criterion(output, label)
        errD_fake.backward()
        optimizerD.step()
        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake)
        errG = criterion(output, label)
        errG.backward()
        optimizerG.step()
        step_end()  # corpus patch: where the profiler's step() goes
