"""TorchBackend: batched == looped, gradients against plain autograd, weight sharing, trimmed mean, seeds."""

import numpy as np
import pytest
import torch

from nets.backend import TorchBackend
from nets.functional import FunctionalModel
from nets.models import model_factory
from synth.algorithms import IFCA
from synth.backend import trimmed_mean as np_trimmed_mean

M_CLIENTS, N_MAX = 7, 12


def _model(dtype=torch.float64):
    return FunctionalModel(model_factory("mlp", (1, 4, 4), 3), "ce", dtype=dtype)


def _backends(dtype=torch.float64, **kw):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(M_CLIENTS, N_MAX, 1, 4, 4, generator=g, dtype=dtype)
    y = torch.randint(0, 3, (M_CLIENTS, N_MAX), generator=g)
    n = np.array([12, 5, 12, 9, 1, 12, 7])  # unequal sizes exercise the padding mask
    model = _model(dtype)
    return (TorchBackend(model, X, y, n, batched=True, seed=3, **kw),
            TorchBackend(model, X, y, n, batched=False, seed=3, **kw))


def _stack(model, k, seed=0):
    return torch.stack([model.init(seed + j) for j in range(k)])


def test_losses_batched_equals_looped():
    fast, slow = _backends()
    models = _stack(fast.model, 3)
    np.testing.assert_allclose(fast.losses(models), slow.losses(models), rtol=1e-12, atol=1e-12)
    sel = np.array([4, 0, 6])
    np.testing.assert_allclose(fast.losses(models, sel), slow.losses(models)[sel], rtol=1e-12, atol=1e-12)


def test_losses_match_plain_module():
    fast, _ = _backends()
    theta = _stack(fast.model, 1)[0]
    module = fast.model.factory().double()
    torch.nn.utils.vector_to_parameters(theta, module.parameters())
    i = 3
    n = fast.n_samples[i]
    want = torch.nn.functional.cross_entropy(module(fast.X[i, :n]), fast.y[i, :n]).item()
    assert fast.losses(theta[None])[i, 0] == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("batch_size,optimizer", [(None, "sgd"), (4, "sgd"), (4, "adam"), (None, "adam")])
def test_local_update_batched_equals_looped(batch_size, optimizer):
    fast, slow = _backends(batch_size=batch_size, optimizer=optimizer)
    models = _stack(fast.model, 2)
    labels = np.array([0, 1, 1, 0, 1, 0, 0])
    a = fast.local_update(models, labels, 5, np.array([0.1, 0.3]))
    b = slow.local_update(models, labels, 5, np.array([0.1, 0.3]))
    assert not torch.allclose(a, models[torch.as_tensor(labels)])  # training moved the models
    torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
    sel = np.array([5, 2])
    c = fast.local_update(models, labels[sel], 5, 0.2, sel)
    d = slow.local_update(models, labels[sel], 5, 0.2, sel)
    torch.testing.assert_close(c, d, rtol=1e-10, atol=1e-12)


def test_gradients_match_plain_autograd():
    fast, slow = _backends()
    models = _stack(fast.model, 2)
    W = np.random.default_rng(0).random((M_CLIENTS, 2))
    W[2] = 0.0
    G = fast.weighted_gradients(models, W)
    torch.testing.assert_close(G, slow.weighted_gradients(models, W), rtol=1e-10, atol=1e-12)
    # independent computation: loss.backward() on an nn.Module holding the parameters
    want = torch.zeros_like(G)
    for j in range(2):
        for i in range(M_CLIENTS):
            module = fast.model.factory().double()
            torch.nn.utils.vector_to_parameters(models[j], module.parameters())
            n = fast.n_samples[i]
            loss = torch.nn.functional.cross_entropy(module(fast.X[i, :n]), fast.y[i, :n])
            loss.backward()
            want[j] += W[i, j] * torch.cat([p.grad.reshape(-1) for p in module.parameters()])
    torch.testing.assert_close(G, want, rtol=1e-9, atol=1e-12)
    labels = np.array([0, 1, 0, 1, 1, 0, 1])
    cg = fast.client_gradients(models, labels)
    torch.testing.assert_close(cg, slow.client_gradients(models, labels), rtol=1e-10, atol=1e-12)
    # sum_i w_i grad f_i(theta_{l_i}) with one-hot weights equals weighted_gradients
    onehot = np.eye(2)[labels]
    torch.testing.assert_close(fast.weighted_gradients(models, onehot),
                               torch.stack([cg[labels == j].sum(0) for j in range(2)]), rtol=1e-9, atol=1e-12)


def test_scores_batched_equals_looped():
    fast, slow = _backends()
    models = _stack(fast.model, 3)
    assign = np.array([0, 2, 1, 1, 0, 2, 2])
    for a, b in zip(fast.scores(models, assign), slow.scores(models, assign), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)
    loss, acc = fast.scores(models, assign)
    np.testing.assert_allclose(loss, fast.losses(models)[np.arange(M_CLIENTS), assign], rtol=1e-12)
    assert np.all((acc >= 0) & (acc <= 1))
    many = _stack(fast.model, M_CLIENTS)  # one model per client takes the vmap-over-clients path
    for a, b in zip(fast.scores(many, np.arange(M_CLIENTS)), slow.scores(many, np.arange(M_CLIENTS)), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("averaging", ["model", "gradient"])
def test_ifca_fit_batched_equals_looped(averaging):
    fast, slow = _backends(batch_size=5)
    fits = [IFCA(n_clusters=2, n_rounds=4, step_size=0.5, averaging=averaging, local_steps=3, init="default",
                 n_init=2, random_state=11).fit(b) for b in (fast, slow)]
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_allclose(fits[0].models_, fits[1].models_, rtol=1e-9, atol=1e-11)


def test_ifca_converged_stopping_runs_on_torch_stacks():
    """stopping='converged' (runs leave the stack once their result is known; a model without clients last round
    reuses its losses) on a TorchBackend: the gradients of the scored and the reused rows are assembled in the
    backend's own stack, and with no run stopping early the fit is the fixed protocol's."""
    fast, _ = _backends()
    kw = dict(n_clusters=3, n_rounds=4, step_size=0.5, averaging="gradient", init="default", n_init=2,
              random_state=11)
    fixed = IFCA(**kw).fit(fast)
    conv = IFCA(stopping="converged", tol=0.0, **kw).fit(fast)
    assert (conv.result_.extra["run_rounds"] == 4).all()
    np.testing.assert_array_equal(conv.labels_, fixed.labels_)
    np.testing.assert_allclose(conv.models_, fixed.models_, rtol=1e-9, atol=1e-11)


def test_chunking_does_not_change_results():
    big, _ = _backends(batch_size=4)
    small, _ = _backends(batch_size=4, memory_budget=2**20)
    small.memory_budget = 1  # bypass validation: force one client per chunk
    models = _stack(big.model, 2)
    labels = np.array([0, 1, 1, 0, 1, 0, 0])
    torch.testing.assert_close(big.local_update(models, labels, 3, 0.2), small.local_update(models, labels, 3, 0.2),
                               rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(big.losses(models), small.losses(models), rtol=1e-12)


def test_minibatches_depend_on_seed_and_round_only():
    a, _ = _backends(batch_size=3)
    b, _ = _backends(batch_size=3)
    models = _stack(a.model, 1)
    labels = np.zeros(M_CLIENTS, dtype=int)
    a.at_round(4)
    first = a.local_update(models, labels, 2, 0.3)
    b.at_round(1)
    b.local_update(models, labels, 2, 0.3)  # a different history ...
    b.at_round(4)
    torch.testing.assert_close(first, b.local_update(models, labels, 2, 0.3))  # ... same round, same batches
    c = TorchBackend(a.model, a.X, a.y, a.n_samples, batch_size=3, seed=4)
    c.at_round(4)
    assert not torch.allclose(first, c.local_update(models, labels, 2, 0.3))


def test_trimmed_mean_matches_numpy():
    fast, _ = _backends()
    vals = torch.randn(9, fast.n_params, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    labels = np.array([0, 0, 1, 1, 1, 0, 0, 1, 0])
    out = fast.trimmed_mean(vals, labels, 3, 0.2)
    for g in range(2):
        np.testing.assert_allclose(out[g].numpy(), np_trimmed_mean(vals.numpy()[labels == g], 0.2), rtol=1e-12)
    assert torch.isnan(out[2]).all()


def test_weight_sharing_ties_shared_layers():
    model = _model()
    shared = np.ones(model.n_params, dtype=bool)
    last = model.slices()
    for name in list(last)[-2:]:
        shared[last[name]] = False
    fast, slow = _backends(shared=shared, share_block=2)
    for averaging in ("model", "gradient"):
        fits = [IFCA(n_clusters=2, n_rounds=3, step_size=0.5, averaging=averaging, local_steps=2, init="default",
                     n_init=2, random_state=5).fit(b) for b in (fast, slow)]
        for est in fits:
            for run in est.result_.extra["models_all"]:  # every restart: shared coordinates equal, head differs
                np.testing.assert_array_equal(run[0, shared], run[1, shared])
                assert not np.allclose(run[0, ~shared], run[1, ~shared])
        np.testing.assert_allclose(fits[0].models_, fits[1].models_, rtol=1e-9, atol=1e-11)
    # gradient averaging: the shared part is the gradient of the total loss w.r.t. the one shared copy
    models = fast.tie_shared(_stack(model, 2))
    W = np.eye(2)[np.array([0, 1, 1, 0, 1, 0, 0])] / M_CLIENTS
    G = fast.weighted_gradients(models, W)
    plain = TorchBackend(model, fast.X, fast.y, fast.n_samples).weighted_gradients(models, W)
    torch.testing.assert_close(G[0, shared], plain[:, shared].sum(0))
    torch.testing.assert_close(G[:, ~torch.as_tensor(shared)], plain[:, ~torch.as_tensor(shared)])


def test_init_models_deterministic_and_validated():
    fast, _ = _backends()
    a = fast.init_models(3, "default", np.random.default_rng(0))
    b = fast.init_models(3, "default", np.random.default_rng(0))
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a[0], a[1])
    with pytest.raises(ValueError, match="init must be one of default, gaussian, zeros"):
        fast.init_models(2, "bernoulli", np.random.default_rng(0))
    with pytest.raises(ValueError, match="method='erm'"):
        fast.local_models("erm")
    with pytest.raises(ValueError, match="n_samples must be"):
        TorchBackend(fast.model, fast.X, fast.y, np.zeros(M_CLIENTS))
    with pytest.raises(ValueError, match="batch_size must be an integer in"):
        TorchBackend(fast.model, fast.X, fast.y, batch_size=0)
