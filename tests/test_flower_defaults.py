"""Defaults of the public clustered strategies that separate groups without tuning: IFCA's restarts when it
makes its own starts (``n_init`` left out: 5), and SR-FCA's ``threshold="auto"`` (the largest gap in ONE_SHOT's
sorted pairwise distances).  A 3-group digits app (three rotations, two clients each) under
``torch_client_app`` on :class:`~nets.flower.inline.InlineGrid`.  Skipped without the ``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")  # before flwr is imported: no usage report from tests

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from flwr.app import Array, ArrayRecord  # noqa: E402
from torch import nn  # noqa: E402

from nets.flower.arrays import stack_clusters  # noqa: E402
from nets.flower.clustered import DEFAULT_RESTARTS, IFCA, SRFCA, auto_threshold  # noqa: E402
from nets.flower.inline import InlineGrid  # noqa: E402
from tests.test_flower_clustered import SIX, SR, toy_app  # noqa: E402

pytestmark = pytest.mark.flower

GROUPS, PER_GROUP, SAMPLES = 3, 2, 100


class DigitsMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(64, 16)
        self.out = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.relu(self.hidden(x.flatten(1))))


@pytest.fixture(scope="module")
def three_groups():
    """Client p holds 100 digits of its own, rotated by 90 * (p % 3) degrees (full batch)."""
    from sklearn.datasets import load_digits
    from torch.utils.data import DataLoader, TensorDataset

    from nets.flower.torch_client import torch_client_app

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).reshape(-1, 8, 8)
    parts = np.array_split(np.random.default_rng(0).permutation(len(X))[:GROUPS * PER_GROUP * SAMPLES],
                           GROUPS * PER_GROUP)

    def data(context):
        p = int(context.node_config["partition-id"])
        images = np.ascontiguousarray(np.rot90(X[parts[p]], k=p % GROUPS, axes=(1, 2)))
        ds = TensorDataset(torch.tensor(images, dtype=torch.float32), torch.tensor(y[parts[p]]))
        return DataLoader(ds, batch_size=SAMPLES), DataLoader(ds, batch_size=SAMPLES)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield torch_client_app(DigitsMLP, data)
    torch.set_num_threads(threads)


def _ari(strategy) -> float:
    from sklearn.metrics import adjusted_rand_score

    by_partition = {strategy.partitions[n]: c for n, c in strategy.labels.items()}
    parts = sorted(by_partition)
    return adjusted_rand_score([p % GROUPS for p in parts], [by_partition[p] for p in parts])


def test_ifca_restarts_by_default_when_it_makes_its_starts():
    assert IFCA(n_clusters=3).n_init == DEFAULT_RESTARTS == 5
    assert IFCA(n_clusters=3, client_choice=False).n_init == 1  # default restarts come with the client's choice
    assert IFCA(n_clusters=3, n_init=2).n_init == 2
    # the user's own k starts, stacked: one run of them
    s = IFCA(n_clusters=2, local_steps=1, evaluate_every=0)
    s.start(InlineGrid(toy_app(SIX), 6), stack_clusters([ArrayRecord({"w": Array(np.full(2, v))}) for v in (1., -1.)]),
            num_rounds=1)
    assert s.n_init == 1 and len(s.models) == 2


@pytest.mark.parametrize("seed", range(5))
def test_ifca_defaults_separate_three_groups(seed, three_groups):
    """IFCA from one record (replicated into every restart's starts), nothing but k, steps and lr given: ARI 1 on
    seeds 0-4 (with n_init=1 the same runs separate the groups on 2 of 5 seeds)."""
    torch.manual_seed(seed)
    s = IFCA(n_clusters=3, local_steps=5, lr=0.5, evaluate_every=0, seed=seed)
    s.start(InlineGrid(three_groups, GROUPS * PER_GROUP), ArrayRecord(DigitsMLP().state_dict()), num_rounds=8)
    assert s.n_init == DEFAULT_RESTARTS and s.best_run is not None
    assert _ari(s) == 1.0, {s.partitions[n]: c for n, c in s.labels.items()}


def test_auto_threshold_cuts_at_the_largest_gap():
    def square(d: list[float], n: int) -> np.ndarray:
        D = np.zeros((n, n))
        D[np.triu_indices(n, 1)] = d
        return D + D.T

    # within groups 0.4-1.3, between 6-20: the cut is the geometric mean of 1.3 and 6 (not 9 -> 20's wider gap)
    D = square([0.4, 6.0, 9.0, 0.6, 20.0, 1.3], 4)
    assert auto_threshold(D) == pytest.approx(np.sqrt(1.3 * 6.0))
    assert auto_threshold(square([1.0, 1.5, 1.2], 3)) == 1.5  # no gap (ratios < 2): one group
    assert auto_threshold(square([0.0, 9.4, 10.0, 10.0, 9.4, 0.0], 4)) == pytest.approx(4.7)  # identical pairs
    assert auto_threshold(np.zeros((1, 1))) > 0


def test_srfca_auto_threshold_finds_the_groups():
    """SIX (two groups of three, 10 apart): threshold='auto' clusters as the hand-set threshold 1.0, and round 1
    reports the threshold it took, between the groups' spreads."""
    runs = {}
    for threshold in ("auto", 1.0):
        s = SRFCA(**{**SR, "threshold": threshold})
        result = s.start(InlineGrid(toy_app(SIX), 6), ArrayRecord({"w": Array(np.zeros(2))}))
        runs[threshold] = ({s.partitions[n]: c for n, c in s.labels.items()}, s, result)
    labels, s, result = runs["auto"]
    assert labels == runs[1.0][0]
    assert labels[0] == labels[1] == labels[2] != labels[3] == labels[4] == labels[5]
    assert 0.6 < s.threshold < 9.0 and result.train_metrics_clientapp[1]["threshold"] == s.threshold
    assert s.distance_quantiles[-1] > s.threshold > s.distance_quantiles[0]
    with pytest.raises(ValueError, match="threshold must be a number > 0 or 'auto'"):
        SRFCA(threshold="largest-gap")


@pytest.mark.parametrize("seed", range(5))
def test_srfca_auto_threshold_separates_three_groups_with_cross_distances(seed, three_groups):
    """The 3-group digits app, SR-FCA with threshold='auto' and Def. 5.1's cross-cluster losses (dist='cross'):
    ARI 1 on seeds 0-4.  (The local networks' l2 distances separate the groups by a ratio below 2 here, which
    threshold='auto' reads as one group.)"""
    torch.manual_seed(seed)
    s = SRFCA(threshold="auto", dist="cross", local_train_steps=50, local_step_size=0.5, trmean_steps=2, n_refine=1,
              trmean_step_size=0.5, evaluate_every=0, seed=seed)
    s.start(InlineGrid(three_groups, GROUPS * PER_GROUP), ArrayRecord(DigitsMLP().state_dict()))
    assert _ari(s) == 1.0, ({s.partitions[n]: c for n, c in s.labels.items()}, s.threshold, s.distance_quantiles)
    assert s.distance_quantiles[0] < s.threshold < s.distance_quantiles[-1]
