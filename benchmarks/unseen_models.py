"""Models the calibration never saw, for ``python -m benchmarks tune`` (a user's own model)."""

from __future__ import annotations


def three_branches(width: int = 768, classes: int = 10):
    """Three MLP branches of depths 1, 2 and 3 on one input, concatenated into a head: the
    shape of a user's multi-branch model."""
    import torch
    from torch import nn

    class ThreeBranches(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.branches = nn.ModuleList(
                nn.Sequential(*[m for _ in range(depth) for m in (nn.Linear(width, width), nn.ReLU())])
                for depth in (1, 2, 3))
            self.head = nn.Linear(3 * width, classes)

        def forward(self, x):
            return self.head(torch.cat([b(x) for b in self.branches], dim=1))

    return ThreeBranches()
