"""Per-FedAvg's PFLlib options (the code CLoVE's Table 6 names): the evaluated model after one adaptation step on
one random minibatch (``meta_adapt_batch``, PFLlib@d832e76 ``clientperavg.py:83-99``), the meta-steps on
minibatches of a shuffled loader of ``2B`` (``meta_batch``, ``clientperavg.py:23, 33-72``), two training passes per
round (``meta_passes``, ``serverperavg.py:35-36``) and the server's n_i-weighted average (``meta_weights``,
``serverbase.py:114-150``).  A numpy transcription of Alg. 1 (FO) on the linear model is the reference.
Deterministic: fixed seeds."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from nets.datasets import build_federation
from synth.algorithms import PerFedAvg
from synth.federation import MixedLinearRegression


def _fed(n_samples=None, seed=4):
    fed = MixedLinearRegression(K=2, clients_per_cluster=3, n=24, d=4, sigma=0.1, R=2.0).sample(
        np.random.default_rng(seed))
    if n_samples is None:
        return fed
    n = np.asarray(n_samples, dtype=np.int64)
    keep = np.arange(fed.X.shape[1])[None, :] < n[:, None]  # padding rows are zero (the backend checks it)
    return replace(fed, X=fed.X * keep[:, :, None], y=fed.y * keep, n_samples=n)


def _grad(X, y, w):
    """Gradient of the linear model's loss ``mean (x^T w - y)^2``."""
    return 2.0 * X.T @ (X @ w - y) / len(y)


def _reference(fed, *, rounds, steps, alpha, beta, weights):
    """Per-FedAvg (FO) from zeros, every step on the full local data; the server's average ``weights``."""
    m, d = fed.n_clients, fed.dim
    n = fed.n_samples
    w = np.zeros(d)
    for _ in range(rounds):
        theta = np.repeat(w[None], m, 0)
        for i in range(m):
            X, y = fed.X[i, :n[i]], fed.y[i, :n[i]]
            for _ in range(steps):
                tmp = theta[i] - alpha * _grad(X, y, theta[i])
                theta[i] = theta[i] - beta * _grad(X, y, tmp)
        p = np.full(m, 1.0 / m) if weights == "uniform" else n / n.sum()
        w = p @ theta
    return w


def test_two_passes_are_twice_the_local_steps():
    fed = _fed()
    kw = dict(n_rounds=3, meta_alpha=0.05, step_size=0.05, init="zeros", random_state=0)
    twice = PerFedAvg(local_steps=3, meta_passes=2, **kw).fit(fed.backend())
    six = PerFedAvg(local_steps=6, **kw).fit(fed.backend())
    once = PerFedAvg(local_steps=3, **kw).fit(fed.backend())
    np.testing.assert_array_equal(twice.global_model_, six.global_model_)
    np.testing.assert_allclose(twice.global_model_, _reference(fed, rounds=3, steps=6, alpha=0.05, beta=0.05,
                                                               weights="uniform"), rtol=0, atol=1e-10)
    assert np.abs(twice.global_model_ - once.global_model_).max() > 1e-3


@pytest.mark.parametrize("weights", ["uniform", "samples"])
def test_server_average_weights(weights):
    fed = _fed([24, 6, 24, 12, 24, 9])
    est = PerFedAvg(n_rounds=3, local_steps=2, meta_alpha=0.05, step_size=0.05, meta_weights=weights,
                    init="zeros", random_state=0).fit(fed.backend())
    ref = _reference(fed, rounds=3, steps=2, alpha=0.05, beta=0.05, weights=weights)
    other = _reference(fed, rounds=3, steps=2, alpha=0.05, beta=0.05,
                       weights="samples" if weights == "uniform" else "uniform")
    np.testing.assert_allclose(est.global_model_, ref, rtol=0, atol=1e-10)
    assert np.abs(est.global_model_ - other).max() > 1e-3  # unequal n_i: the two averages differ


def test_adaptation_on_one_minibatch_is_pfllibs_train_one_step():
    # the evaluated model is w - alpha grad f_i(w) on one batch of B samples of client i (a window at a random
    # offset drawn after training: the shared model is the same as with the paper's all-data adaptation)
    fed = _fed()
    B, alpha = 5, 0.05
    kw = dict(n_rounds=2, local_steps=2, meta_alpha=alpha, step_size=0.05, init="zeros", random_state=9)
    one = PerFedAvg(meta_adapt_batch=B, **kw).fit(fed.backend())
    full = PerFedAvg(**kw).fit(fed.backend())
    np.testing.assert_array_equal(one.global_model_, full.global_model_)
    w = one.global_model_
    rng = np.random.default_rng(9)  # init "zeros" and full participation draw nothing before the batch
    starts = (rng.random(fed.n_clients) * (fed.n_samples - B + 1)).astype(np.int64)
    for i, s in enumerate(starts):
        ref = w - alpha * _grad(fed.X[i, s:s + B], fed.y[i, s:s + B], w)
        np.testing.assert_allclose(one.models_[i], ref, rtol=0, atol=1e-12)
        all_data = w - alpha * _grad(fed.X[i], fed.y[i], w)
        np.testing.assert_allclose(full.models_[i], all_data, rtol=0, atol=1e-12)
    assert np.abs(one.models_ - full.models_).max() > 1e-4


def test_a_minibatch_holding_all_data_is_the_papers_adaptation():
    fed = _fed([24, 6, 24, 12, 24, 9])
    kw = dict(n_rounds=2, local_steps=2, meta_alpha=0.05, step_size=0.05, init="zeros", random_state=1)
    np.testing.assert_allclose(PerFedAvg(meta_adapt_batch=24, **kw).fit(fed.backend()).models_,
                               PerFedAvg(**kw).fit(fed.backend()).models_, rtol=0, atol=1e-12)


def test_one_minibatch_adaptation_on_a_network():
    fed = build_federation("digits-label-skew-1", 4, 12, np.random.default_rng(0), n_test=4)
    train, _ = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=None, seed=1)
    kw = dict(n_rounds=2, local_steps=2, meta_alpha=0.05, step_size=0.05, random_state=0)
    full = PerFedAvg(**kw).fit(train)
    whole = PerFedAvg(meta_adapt_batch=12, **kw).fit(train)
    one = PerFedAvg(meta_adapt_batch=3, meta_passes=2, **kw).fit(train)
    np.testing.assert_allclose(whole.models_, full.models_, rtol=0, atol=1e-12)
    assert np.abs(one.models_ - full.models_).max() > 1e-6


def _pfllib_train(fed, rng, *, rounds, epochs, passes, B, alpha, beta):
    """PFLlib's ``clientperavg.train`` transcribed on the linear model, from zeros: per call, a shuffled loader of
    batches of ``2B`` with ``drop_last``; step 1 on the first ``B`` samples, step 2 at ``w_tmp`` on the rest, ``w``
    restored, the outer step; the server averages by n_i.  The shuffles: the keys the estimator draws."""
    m, d = fed.n_clients, fed.dim
    n = fed.n_samples
    w = np.zeros(d)
    for _ in range(rounds):
        theta = np.repeat(w[None], m, 0)
        for _ in range(passes * epochs):
            keys = rng.random((m, int(n.max())))
            for i in range(m):
                order = np.argsort(np.where(np.arange(keys.shape[1]) < n[i], keys[i], 2.0), kind="stable")
                for s in range(n[i] // (2 * B)):  # drop_last
                    a, b = order[2 * B * s: 2 * B * s + B], order[2 * B * s + B: 2 * B * (s + 1)]
                    tmp = theta[i] - alpha * _grad(fed.X[i, a], fed.y[i, a], theta[i])
                    theta[i] = theta[i] - beta * _grad(fed.X[i, b], fed.y[i, b], tmp)
        w = (n / n.sum()) @ theta
    return w


def test_minibatch_meta_steps_are_pfllibs_train():
    # unequal clients: 24 samples make 2 meta-steps of 2B = 10 per epoch, 12 make 1, 6 and 9 make none
    fed = _fed([24, 6, 24, 12, 24, 9])
    B = 5
    est = PerFedAvg(n_rounds=3, local_steps=2, meta_passes=2, meta_batch=B, meta_alpha=0.05, step_size=0.05,
                    meta_weights="samples", init="zeros", random_state=3).fit(fed.backend())
    ref = _pfllib_train(fed, np.random.default_rng(3), rounds=3, epochs=2, passes=2, B=B, alpha=0.05, beta=0.05)
    np.testing.assert_allclose(est.global_model_, ref, rtol=0, atol=1e-10)
    full = PerFedAvg(n_rounds=3, local_steps=2, meta_passes=2, meta_alpha=0.05, step_size=0.05,
                     meta_weights="samples", init="zeros", random_state=3).fit(fed.backend())
    assert np.abs(est.global_model_ - full.global_model_).max() > 1e-3


def test_minibatch_meta_steps_on_a_network_gather_the_minibatch():
    # the network backend gathers the two half-batches (TorchBackend.select); a window of a client's stored order
    # gathered that way has the gradient the masked window view (subsample) gives
    fed = build_federation("digits-label-skew-1", 4, 12, np.random.default_rng(0), n_test=4)
    train, _ = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=None, seed=1)
    theta = train.init_models(1, "default", np.random.default_rng(0)).repeat(4, 1)
    starts, sizes = np.array([0, 3, 5, 7]), np.array([4, 4, 2, 5])
    pos = starts[:, None] + np.minimum(np.arange(5)[None, :], sizes[:, None] - 1)
    rows = np.arange(4)
    np.testing.assert_allclose(train.select(pos, sizes).client_gradients(theta, rows).numpy(),
                               train.subsample(starts, sizes).client_gradients(theta, rows).numpy(),
                               rtol=1e-10, atol=1e-12)
    kw = dict(n_rounds=2, local_steps=1, meta_alpha=0.05, step_size=0.05, random_state=0)
    one = PerFedAvg(meta_batch=3, **kw).fit(train)
    full = PerFedAvg(**kw).fit(train)
    assert np.isfinite(one.models_).all() and np.abs(one.models_ - full.models_).max() > 1e-6


def test_minibatch_meta_steps_are_first_order():
    with pytest.raises(ValueError, match="meta_batch"):
        PerFedAvg(meta_batch=2, meta_variant="hf").fit(_fed().backend())


@pytest.mark.parametrize("params, name", [({"meta_adapt_batch": 0}, "meta_adapt_batch"),
                                          ({"meta_batch": 0}, "meta_batch"),
                                          ({"meta_passes": 0}, "meta_passes"),
                                          ({"meta_weights": "counts"}, "meta_weights")])
def test_bad_values_are_refused(params, name):
    with pytest.raises(ValueError, match=name):
        PerFedAvg(**params).fit(_fed().backend())
