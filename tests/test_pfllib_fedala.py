"""FedALA's PFLlib options (the code CLoVE's Table 6 names): per-minibatch weight learning
(``ala_batch_size``, PFLlib@d832e76 ``system/utils/ALA.py:120-140``) and the start phase without a bound
(``ala_max_steps=None``, ALA.py:119-153).  A line-by-line numpy transcription of PFLlib's ALA loop on the
synthetic linear model is the reference.  Deterministic: fixed seeds."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from nets.datasets import build_federation
from synth.algorithms import FedALA
from synth.federation import MixedLinearRegression


def _fed(n_samples=None, seed=3):
    fed = MixedLinearRegression(K=2, clients_per_cluster=3, n=30, d=4, sigma=0.1, R=2.0).sample(
        np.random.default_rng(seed))
    if n_samples is None:
        return fed
    n = np.asarray(n_samples, dtype=np.int64)
    keep = np.arange(fed.X.shape[1])[None, :] < n[:, None]  # padding rows are zero (the backend checks it)
    return replace(fed, X=fed.X * keep[:, :, None], y=fed.y * keep, n_samples=n)


def _pfllib_ala(fed, g, local, W, start, rng, *, fraction, batch, eta, window=10, threshold=0.1):
    """PFLlib's ``ALA.adaptive_local_aggregation`` for every client, transcribed for the linear model
    ``f_i(w) = mean (x^T w - y)^2`` (the layer is every coordinate).  The window draw is the toolkit's
    (one ``rng.random(m)``): PFLlib's ``random.randint`` is another generator of the same distribution."""
    n = fed.n_samples
    sizes = np.maximum(1, np.floor(fraction * n + 1e-9).astype(np.int64))
    starts = (rng.random(len(n)) * (n - sizes + 1)).astype(np.int64)
    W = W.copy()
    hat = local.copy()
    for i in range(len(n)):
        diff = g - local[i]
        if not np.any(diff):  # ALA.py:82-83, the first round: local model == global model
            continue
        Xw = fed.X[i, starts[i]:starts[i] + sizes[i]]
        yw = fed.y[i, starts[i]:starts[i] + sizes[i]]
        losses = []
        while True:  # ALA.py:119
            for b in range(0, sizes[i], batch):  # DataLoader(drop_last=False), not shuffled: ALA.py:74, 120
                xb, yb = Xw[b:b + batch], yw[b:b + batch]
                r = xb @ (local[i] + diff * W[i]) - yb
                loss = (r ** 2).mean()
                grad = 2.0 * xb.T @ r / len(yb)
                W[i] = np.clip(W[i] - eta * grad * diff, 0.0, 1.0)  # ALA.py:132-135
            losses.append(loss)  # the last batch's loss: ALA.py:142
            if not start[i]:  # ALA.py:146-147
                break
            if len(losses) > window and np.std(losses[-window:]) < threshold:  # ALA.py:150
                break
        hat[i] = local[i] + diff * W[i]
    return hat, W


def _pfllib_fedala(fed, *, rounds, steps, lr, fraction, batch, eta, seed):
    """PFLlib's FedALA server loop (``serverala.py:22-46``, ``clientala.py:20-56``) on the synthetic backend:
    every client does ALA then ``steps`` gradient steps; the server averages weighted by n_i."""
    be = fed.backend()
    rng = np.random.default_rng(seed)
    m, d = fed.n_clients, fed.dim
    g = np.zeros(d)
    local = np.zeros((m, d))
    W = np.ones((m, d))
    start = np.ones(m, dtype=bool)
    for _ in range(rounds):
        trained = np.any(local != g, axis=1)
        hat, W = _pfllib_ala(fed, g, local, W, start & trained, rng, fraction=fraction, batch=batch, eta=eta)
        start &= ~trained  # ALA.py:155: start_phase ends after the first active ALA
        local = be.local_update(hat, np.arange(m), steps, lr)
        w = fed.n_samples / fed.n_samples.sum()
        g = w @ local
    trained = np.any(local != g, axis=1)
    hat, W = _pfllib_ala(fed, g, local, W, start & trained, rng, fraction=fraction, batch=batch, eta=eta)
    return hat, W


@pytest.mark.parametrize("n_samples", [None, [30, 30, 17, 30, 9, 23]])
def test_minibatch_weight_learning_is_pfllibs_loop(n_samples):
    # clients of 30, 17, 9, 23 samples: windows of 24, 13, 7, 18 cut into batches of 5 -- five, three, two and
    # four batches, the last ones short, so clients leave a pass at different batches
    fed = _fed(n_samples)
    kw = dict(rounds=4, steps=3, lr=0.05, fraction=0.8, eta=1.0, seed=11)
    ref_models, ref_W = _pfllib_fedala(fed, batch=5, **kw)
    est = FedALA(n_rounds=4, local_steps=3, step_size=0.05, ala_fraction=0.8, ala_eta=1.0, ala_batch_size=5,
                 ala_max_steps=None, init="zeros", random_state=11).fit(fed.backend())
    np.testing.assert_allclose(est.weights_, ref_W, rtol=0, atol=1e-10)
    np.testing.assert_allclose(est.models_, ref_models, rtol=0, atol=1e-10)
    # the option matters: one whole-window step per pass learns other weights
    whole = FedALA(n_rounds=4, local_steps=3, step_size=0.05, ala_fraction=0.8, ala_eta=1.0, ala_max_steps=None,
                   init="zeros", random_state=11).fit(fed.backend())
    assert np.abs(whole.weights_ - ref_W).max() > 1e-3


def test_one_batch_holding_the_window_is_the_whole_window_step():
    fed = _fed()
    kw = dict(n_rounds=3, local_steps=2, step_size=0.05, init="zeros", random_state=2)
    a = FedALA(**kw).fit(fed.backend())
    b = FedALA(ala_batch_size=1000, **kw).fit(fed.backend())
    np.testing.assert_array_equal(a.weights_, b.weights_)
    np.testing.assert_array_equal(a.models_, b.models_)


def test_start_phase_without_bound_runs_past_the_default_cap():
    # a threshold that 100 passes do not reach: the default cap stops there, PFLlib's loop goes on until the
    # losses settle (the same result as a cap that is never reached)
    fed = _fed()
    kw = dict(n_rounds=2, local_steps=2, step_size=0.05, ala_eta=0.05, ala_std=1e-7, init="zeros", random_state=0)
    capped = FedALA(**kw).fit(fed.backend())
    free = FedALA(ala_max_steps=None, **kw).fit(fed.backend())
    huge = FedALA(ala_max_steps=10**6, **kw).fit(fed.backend())
    np.testing.assert_array_equal(free.weights_, huge.weights_)
    assert np.abs(free.weights_ - capped.weights_).max() > 1e-4


def test_start_phase_runs_at_least_window_plus_one_passes():
    # ALA.py:150 reads the deviation only once more than num_pre_loss = 10 losses are recorded: a threshold that
    # any deviation meets still stops after 11 passes, as a bound of 11 passes does
    fed = _fed()
    kw = dict(n_rounds=2, local_steps=2, step_size=0.05, ala_batch_size=7, init="zeros", random_state=0)
    settled = FedALA(ala_std=1e9, ala_max_steps=None, **kw).fit(fed.backend())
    eleven = FedALA(ala_std=0.0, ala_max_steps=11, **kw).fit(fed.backend())
    twelve = FedALA(ala_std=0.0, ala_max_steps=12, **kw).fit(fed.backend())
    np.testing.assert_array_equal(settled.weights_, eleven.weights_)
    assert np.abs(settled.weights_ - twelve.weights_).max() > 0


def test_minibatch_weight_learning_on_a_network():
    # nets: the windows are TorchBackend.subsample views; batches of 5 differ from one whole-window step, and a
    # batch holding the whole window gives the default's weights
    fed = build_federation("digits-label-skew-1", 4, 12, np.random.default_rng(0), n_test=4)
    train, _ = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=None, seed=1)
    kw = dict(n_rounds=2, local_steps=2, step_size=0.2, ala_max_steps=4, random_state=0)
    whole = FedALA(**kw).fit(train)
    one = FedALA(ala_batch_size=100, **kw).fit(train)
    mini = FedALA(ala_batch_size=3, **kw).fit(train)
    np.testing.assert_allclose(one.weights_, whole.weights_, rtol=0, atol=1e-12)
    assert np.abs(mini.weights_ - whole.weights_).max() > 1e-6
    assert ((mini.weights_ >= 0) & (mini.weights_ <= 1)).all()


@pytest.mark.parametrize("params, name", [({"ala_batch_size": 0}, "ala_batch_size"),
                                          ({"ala_max_steps": 0}, "ala_max_steps")])
def test_bad_values_are_refused(params, name):
    with pytest.raises(ValueError, match=name):
        FedALA(**params).fit(_fed().backend())
