"""``nets flower``'s backend (:class:`nets.flower.backend.FederatedBackend`) with a client lost after its choice: the
round's aggregate is the average of the updates that arrived, not an average with the model the lost client was
sent.  The exchange is a stand-in that answers like the ClientApp (no Ray, no Flower engine); skipped without the
``flower`` extra.
"""

from __future__ import annotations

import os

os.environ.setdefault("FLWR_TELEMETRY_ENABLED", "0")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

pytest.importorskip("flwr")
torch = pytest.importorskip("torch")

from torch import nn  # noqa: E402

from nets.backend import TorchBackend  # noqa: E402
from nets.flower.backend import Answers, FederatedBackend  # noqa: E402
from nets.functional import FunctionalModel  # noqa: E402
from synth.algorithms.common import apply_round, assignment_weights  # noqa: E402

pytestmark = pytest.mark.flower

P = 3
STEP = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0], [-4.0, 0.0, 4.0], [0.5, 0.5, 0.5]])  # each client's move


def backend(lost: set[int]) -> FederatedBackend:
    """Four clients of a linear model; ``train`` answers ``model + STEP[client]``, except the ``lost``."""
    model = FunctionalModel(lambda: nn.Linear(P, 1, bias=False), "sq", dtype=torch.float64)
    stacks = TorchBackend(model, torch.zeros((1, 1, P), dtype=torch.float64))

    def exchange(action, clients, config, *, common=None, rows=None, each=None) -> Answers:
        assert action == "train"
        out = np.full((len(clients), 1, P), np.nan)
        answered = np.array([int(c) not in lost for c in clients])
        for a, c in enumerate(clients):
            if answered[a]:
                out[a, 0] = rows[a][0] + STEP[int(c)]
        return Answers(answered, out, {})

    return FederatedBackend(exchange, stacks, np.array([10, 30, 20, 20]))


MODELS = np.array([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]])
LABELS = np.array([0, 0, 1, 1])


def one_round(lost: set[int], n_weighted: bool) -> np.ndarray:
    fb = backend(lost)
    W = assignment_weights(LABELS, 2, fb.n_samples if n_weighted else None)
    out = apply_round(fb, torch.as_tensor(MODELS), W, np.ones(2), "model", 1)
    return out.detach().numpy()


@pytest.mark.parametrize("n_weighted", [False, True])  # IFCA's equal weights, CLoVE's and FedAvg's n_i weights
def test_lost_client_leaves_the_aggregate(n_weighted):
    got = one_round({1}, n_weighted)
    # cluster 0 = clients 0 (answered) and 1 (lost): the model is client 0's update
    assert np.allclose(got[0], MODELS[0] + STEP[0], rtol=0, atol=1e-12)
    # cluster 1 = clients 2 and 3, both answered: their (weighted) mean, as without faults
    w = np.array([20.0, 20.0]) if n_weighted else np.ones(2)
    assert np.allclose(got[1], MODELS[1] + (w[0] * STEP[2] + w[1] * STEP[3]) / w.sum(), rtol=0, atol=1e-12)


def test_cluster_of_lost_clients_only_stays_put():
    got = one_round({2, 3}, n_weighted=True)
    assert np.allclose(got[1], MODELS[1], rtol=0, atol=1e-12)
    assert np.allclose(got[0], MODELS[0] + (10 * STEP[0] + 30 * STEP[1]) / 40, rtol=0, atol=1e-12)


def test_no_loss_is_the_plain_average():
    got = one_round(set(), n_weighted=False)
    assert np.allclose(got[0], MODELS[0] + (STEP[0] + STEP[1]) / 2, rtol=0, atol=1e-12)
