"""The user's side of the app: a small MLP and scikit-learn's digits, rotated differently in each group of clients.

Nothing here comes from cflab: replace ``Net`` and ``load_data`` by your own model and data.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from flwr.app import Context
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

# the run config's defaults (pyproject.toml's [tool.flwr.app.config] holds the same values)
DEFAULTS: dict[str, Any] = {
    "num-server-rounds": 10, "num-clusters": 4, "groups": 4, "local-steps": 10, "lr": 0.5, "batch-size": 32,
    "fraction-train": 1.0, "min-nodes": 8, "start-timeout": 60.0, "timeout": 120.0, "seed": 0,
}


def setting(context: Context, key: str) -> Any:
    """The run config's ``key`` (``flwr run``), else its default (``run_simulation`` passes no run config)."""
    return context.run_config.get(key, DEFAULTS[key])


class Net(nn.Module):
    """8x8 images -> 32 hidden units (batch-normalised) -> 10 digits.

    The BatchNorm layer's running mean and variance and its ``num_batches_tracked`` are part of the
    ``state_dict``: they travel with the weights, are averaged per cluster (the counter takes the largest of its
    clients') and come back in each cluster's model."""

    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(64, 32)
        self.norm = nn.BatchNorm1d(32)
        self.out = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.norm(self.hidden(x.flatten(1)))))


def group_of(partition_id: int, groups: int) -> int:
    """The group (rotation) of a client: its digits are rotated by ``90 * group`` degrees."""
    return partition_id % groups


def load_data(partition_id: int, num_partitions: int, groups: int, batch_size: int,
              seed: int = 0) -> tuple[DataLoader, DataLoader]:
    """Client ``partition_id``'s share of the digits (a disjoint slice), rotated by ``90 * (partition_id % groups)``
    degrees; 80 % to train on, 20 % to test on."""
    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(X))
    part = np.array_split(order, num_partitions)[partition_id]
    images = np.rot90((X[part] / 16.0).reshape(-1, 8, 8), k=group_of(partition_id, groups), axes=(1, 2))
    images = torch.tensor(np.ascontiguousarray(images), dtype=torch.float32)
    labels = torch.tensor(y[part], dtype=torch.long)
    cut = int(0.8 * len(part))
    train = TensorDataset(images[:cut], labels[:cut])
    test = TensorDataset(images[cut:], labels[cut:])
    # BatchNorm cannot train on a batch of one sample: such a last batch is dropped
    return (DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=cut % batch_size == 1),
            DataLoader(test, batch_size=256))
