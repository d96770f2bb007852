"""The torch backend's optimiser state across local steps taken one call at a time (FedSoft, FeSEM with a
proximal term): Adam's moments, step count and minibatch order continue, so k calls of one step are one run of
k steps, and the proximal update equals an independent torch.optim.Adam loop.  Deterministic (fixed seeds)."""

import numpy as np
import pytest
import torch

from nets.backend import TorchBackend
from nets.functional import FunctionalModel
from nets.models import model_factory
from synth.algorithms import FedSoft, FeSEM
from synth.algorithms.fedsoft import proximal_local_update

M, N_MAX = 5, 12


def _backend(batch_size, optimizer="adam", batched=True):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(M, N_MAX, 1, 4, 4, generator=g, dtype=torch.float64)
    y = torch.randint(0, 3, (M, N_MAX), generator=g)
    model = FunctionalModel(model_factory("mlp", (1, 4, 4), 3), "ce", dtype=torch.float64)
    return TorchBackend(model, X, y, np.array([12, 5, 12, 9, 7]), batch_size=batch_size, optimizer=optimizer,
                        batched=batched, seed=3)


def _start(backend, k=2):
    return torch.stack([backend.model.init(j) for j in range(k)])


@pytest.mark.parametrize("batched", [True, False])
@pytest.mark.parametrize("batch_size,optimizer", [(None, "adam"), (4, "adam"), (4, "sgd")])
def test_steps_one_call_at_a_time_equal_one_call(batch_size, optimizer, batched):
    backend = _backend(batch_size, optimizer, batched)
    models, labels, sel = _start(backend), np.array([1, 0, 1]), np.array([4, 0, 2])
    backend.at_round(2)
    once = backend.local_update(models, labels, 6, 0.05, sel)
    backend.at_round(2)
    state, W = {}, models
    for j in range(6):
        W = backend.local_update(W if j else models, labels if j == 0 else np.arange(3), 1, 0.05, sel, state=state)
    torch.testing.assert_close(W, once, rtol=0, atol=1e-13)
    if optimizer == "adam":  # without the state every step restarts Adam: a different (sign-like) trajectory
        backend.at_round(2)
        W = backend.local_update(models, labels, 1, 0.05, sel)
        for _ in range(5):
            W = backend.local_update(W, np.arange(3), 1, 0.05, sel)
        assert (W - once).abs().max() > 1e-3


def test_state_of_other_clients_is_refused():
    backend = _backend(None)
    state = {}
    backend.local_update(_start(backend), np.zeros(2, dtype=np.int64), 1, 0.1, np.array([0, 1]), state=state)
    with pytest.raises(ValueError, match="another set of clients"):
        backend.local_update(_start(backend), np.zeros(2, dtype=np.int64), 1, 0.1, np.array([0, 2]), state=state)
    with pytest.raises(TypeError, match="state must be"):
        backend.local_update(_start(backend), np.zeros(2, dtype=np.int64), 1, 0.1, np.array([0, 2]), state=[])


def _reference_prox_adam(backend, start, anchors, mu, steps, lr):
    """One torch.optim.Adam per client on f_i, each step followed by the decoupled pull -lr mu_i (w - a_i)."""
    model, out = backend.model, []
    b1, b2 = backend.adam_betas
    for i in range(len(start)):
        w = start[i].clone().requires_grad_(True)
        opt = torch.optim.Adam([w], lr=lr, betas=(b1, b2), eps=backend.adam_eps)
        n = backend.n_samples[i]
        for _ in range(steps):
            before = w.detach().clone()
            opt.zero_grad()
            params = {k: v[0] for k, v in model.split(w[None]).items()}
            model.weighted_loss_params(params, backend.X[i, :n], backend.y[i, :n],
                                       torch.full((n,), 1.0 / n, dtype=w.dtype)).backward()
            opt.step()
            with torch.no_grad():
                w -= lr * mu[i] * (before - anchors[i])
        out.append(w.detach())
    return torch.stack(out)


def test_proximal_update_with_adam_is_one_optimiser_run():
    # FedSoft Eq. (4) / FeSEM's proximal local problem, full batch, Adam: independent reference above
    backend = _backend(None)
    start = torch.stack([backend.model.init(10 + i) for i in range(M)])
    anchors = torch.stack([backend.model.init(20 + i) for i in range(M)])
    mu = np.linspace(0.1, 1.0, M)
    backend.at_round(0)
    got = proximal_local_update(backend, start, anchors, mu, 8, 0.01)
    torch.testing.assert_close(got, _reference_prox_adam(backend, start, anchors, mu, 8, 0.01), rtol=0, atol=1e-10)


@pytest.mark.parametrize("make", [lambda: FedSoft(n_clusters=2, prox=0.5, n_rounds=2, local_steps=4, step_size=0.01,
                                                  random_state=0),
                                  lambda: FeSEM(n_clusters=2, prox=0.5, n_rounds=2, local_steps=4, step_size=0.01,
                                                warmup_steps=2, random_state=0)])
def test_fedsoft_and_fesem_carry_adam_across_their_proximal_steps(make, monkeypatch):
    # every one-step call of a round's proximal update receives the same state dict, advanced step by step
    backend = _backend(4)
    seen = []
    original = TorchBackend.local_update

    def spy(self, models, labels, steps, lr, clients=None, state=None):
        out = original(self, models, labels, steps, lr, clients, state=state)
        seen.append((steps, None if state is None else id(state), None if state is None else state["steps"]))
        return out

    monkeypatch.setattr(TorchBackend, "local_update", spy)
    make().fit(backend)
    one_step = [s for s in seen if s[0] == 1]
    assert len(one_step) == 8 and all(s[1] is not None for s in one_step)
    rounds = [one_step[:4], one_step[4:]]
    for r in rounds:
        assert len({s[1] for s in r}) == 1 and [s[2] for s in r] == [1, 2, 3, 4]
