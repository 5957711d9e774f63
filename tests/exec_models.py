"""Small models for the executor's tests and benchmark, loaded as ``FILE.py:FACTORY``
(the path a user's own model takes). Dropout is off: a random op cannot match an eager
step drawn from another generator."""

import torch
from torch import nn


def mlp(features=64, width=128):
    """Three linear layers."""
    return nn.Sequential(nn.Linear(features, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                         nn.Linear(width, 10))


def cnn(width=16):
    """Conv-BN-ReLU twice, pooling, a linear head (BatchNorm's running statistics are
    updated in place during the step)."""
    w = width
    return nn.Sequential(nn.Conv2d(3, w, 3, padding=1), nn.BatchNorm2d(w), nn.ReLU(),
                         nn.Conv2d(w, 2 * w, 3, padding=1, stride=2), nn.BatchNorm2d(2 * w), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2 * w, 10))


class LSTM(nn.Module):
    """Two stacked LSTM cells unrolled over the sequence (input [batch, seq, features])."""

    def __init__(self, features=16, hidden=32, layers=2):
        super().__init__()
        self.cells = nn.ModuleList(nn.LSTMCell(features if i == 0 else hidden, hidden) for i in range(layers))
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        b, t, _ = x.shape
        hs = [(x.new_zeros(b, c.hidden_size), x.new_zeros(b, c.hidden_size)) for c in self.cells]
        for s in range(t):
            inp = x[:, s]
            for i, cell in enumerate(self.cells):
                hs[i] = cell(inp, hs[i])
                inp = hs[i][0]
        return self.head(inp)


def lstm(features=16, hidden=32, layers=2):
    return LSTM(features, hidden, layers)


def transformer(d_model=32, ffn=64, heads=4):
    """One Transformer encoder layer and a linear head over the mean token."""
    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(d_model=d_model, nhead=heads, dim_feedforward=ffn, dropout=0.0,
                                                    batch_first=True)
            self.head = nn.Linear(d_model, 10)

        def forward(self, x):
            return self.head(self.layer(x).mean(dim=1))

    return Block()


class Inception(nn.Module):
    """An Inception-like cell: four parallel branches (1x1; 1x1-3x3; 1x1-3x3-3x3; pool-1x1)
    concatenated, then a linear head: the branches are independent work for two devices."""

    def __init__(self, c=16, w=24):
        super().__init__()
        self.b1 = nn.Conv2d(c, w, 1)
        self.b2 = nn.Sequential(nn.Conv2d(c, w, 1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1))
        self.b3 = nn.Sequential(nn.Conv2d(c, w, 1), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1), nn.ReLU(),
                                nn.Conv2d(w, w, 3, padding=1))
        self.b4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1), nn.Conv2d(c, w, 1))
        self.head = nn.Linear(4 * w, 10)

    def forward(self, x):
        y = torch.cat([self.b1(x), self.b2(x), self.b3(x), self.b4(x)], dim=1).relu()
        return self.head(y.mean(dim=(2, 3)))


def inception(c=16, w=24):
    return Inception(c, w)


def two_towers(width=512, depth=3):
    """Two independent MLP towers on the same input, summed: the model with parallel
    branches whose best plan on two devices should beat one device."""
    class Towers(nn.Module):
        def __init__(self):
            super().__init__()
            def tower():
                layers = []
                for _ in range(depth):
                    layers += [nn.Linear(width, width), nn.ReLU()]
                return nn.Sequential(*layers)
            self.a, self.b = tower(), tower()
            self.head = nn.Linear(width, 10)

        def forward(self, x):
            return self.head(self.a(x) + self.b(x))

    return Towers()


