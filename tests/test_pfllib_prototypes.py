"""FedProto's and FedPAC's PFLlib options (the code CLoVE's Table 6 names): local prototypes collected during
training (FedProto ``local_prototypes="during"``, PFLlib@d832e76 ``clientproto.py:54-56, 67``) and the unweighted
mean of the clients' prototypes (FedPAC ``prototype_mean="clients"``, ``serverpac.py:178-193``).  References are
built from the backend's own steps and class statistics.  Deterministic: fixed seeds, float64 networks."""

import numpy as np
import pytest
import torch

from nets.datasets import build_federation
from synth.algorithms import FedPAC, FedProto
from synth.algorithms.fedproto import global_prototypes


def _backend(dataset="digits-label-skew-1", clients=4, n=12, batch_size=None, seed=0):
    fed = build_federation(dataset, clients, n, np.random.default_rng(seed), n_test=4)
    train, _ = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=batch_size, seed=1)
    return train


def test_collect_is_the_mean_of_the_features_at_every_step():
    # full batch, two SGD steps: every sample is seen at the start model and after one step, so the collected
    # prototypes are the mean of the class means at the two models (counts doubled)
    be = _backend()
    m = be.n_clients
    start = be.take(be.from_numpy(be.model.init(0).numpy()[None]), np.zeros(m, dtype=np.int64))
    rows = np.arange(m)
    seen: dict = {}
    two = be.aligned_update(start, rows, 2, 0.1, collect=seen)
    one = be.aligned_update(start, rows, 1, 0.1)
    torch.testing.assert_close(two, be.aligned_update(start, rows, 2, 0.1))  # collecting changes no step
    c0, m0, _ = be.class_statistics(start, rows)
    c1, m1, _ = be.class_statistics(one, rows)
    np.testing.assert_array_equal(seen["counts"], c0 + c1)
    np.testing.assert_allclose(seen["means"], (m0 + m1) / 2, rtol=0, atol=1e-10)


def test_collect_counts_every_minibatch_sample():
    be = _backend(batch_size=5)
    m = be.n_clients
    start = be.take(be.from_numpy(be.model.init(0).numpy()[None]), np.zeros(m, dtype=np.int64))
    seen: dict = {}
    be.aligned_update(start, np.arange(m), 3, 0.1, collect=seen)
    np.testing.assert_array_equal(seen["counts"].sum(1), 15)  # 3 steps of 5 samples (12 per client, cycled)
    assert np.isfinite(seen["means"]).all()


def test_fedproto_prototypes_collected_during_training():
    be = _backend()
    init = be.model.init(0).numpy()[None]
    kw = dict(n_rounds=1, local_steps=2, step_size=0.1, prototype_mean="clients", init=init, random_state=0)
    during = FedProto(local_prototypes="during", **kw).fit(be)
    after = FedProto(**kw).fit(be)
    np.testing.assert_array_equal(during.models_, after.models_)  # round 0 trains without prototypes
    rows = np.arange(be.n_clients)
    start = be.take(be.from_numpy(init), np.zeros(be.n_clients, dtype=np.int64))
    c0, m0, _ = be.class_statistics(start, rows)
    c1, m1, _ = be.class_statistics(be.aligned_update(start, rows, 1, 0.1, lam=1.0), rows)
    ref = global_prototypes(c0 + c1, (m0 + m1) / 2, "clients")
    np.testing.assert_allclose(during.prototypes_, ref, rtol=0, atol=1e-10)
    ok = np.isfinite(ref).all(1)
    assert np.abs(during.prototypes_[ok] - after.prototypes_[ok]).max() > 1e-4


def test_fedproto_during_runs_with_minibatches_and_partial_participation():
    be = _backend(clients=6, batch_size=4)
    est = FedProto(n_rounds=3, local_steps=3, step_size=0.1, local_prototypes="during", prototype_mean="clients",
                   scoring="prototype", participation=0.5, random_state=0).fit(be)
    assert np.isfinite(est.models_).all() and est.prototypes_.shape == (10, 200)


def test_fedpac_unweighted_global_prototypes():
    # Dirichlet label shares: clients hold a class in different amounts, so the two means differ
    be = _backend("digits-dirichlet", clients=4, n=16)
    init = be.model.init(0).numpy()[None]
    kw = dict(n_rounds=1, local_steps=2, step_size=0.1, init=init, random_state=0)
    clients = FedPAC(prototype_mean="clients", **kw).fit(be)
    counts = FedPAC(**kw).fit(be)
    np.testing.assert_array_equal(clients.models_, counts.models_)  # round 0 trains without prototypes
    rows = np.arange(be.n_clients)
    start = be.take(be.from_numpy(init), np.zeros(be.n_clients, dtype=np.int64))
    new = be.aligned_update(start, rows, 2, 0.1, None, 0.0, "head")
    new = be.aligned_update(new, rows, 2, 0.1, None, 1.0, "body")
    n_k, means, _ = be.class_statistics(new, rows)
    np.testing.assert_allclose(clients.prototypes_, global_prototypes(n_k, means, "clients"), rtol=0, atol=1e-10)
    np.testing.assert_allclose(counts.prototypes_, global_prototypes(n_k, means, "counts"), rtol=0, atol=1e-10)
    ok = np.isfinite(clients.prototypes_).all(1)
    assert np.abs(clients.prototypes_[ok] - counts.prototypes_[ok]).max() > 1e-4


@pytest.mark.parametrize("cls, params, name", [(FedProto, {"local_prototypes": "epoch"}, "local_prototypes"),
                                               (FedPAC, {"prototype_mean": "median"}, "prototype_mean")])
def test_bad_values_are_refused(cls, params, name):
    with pytest.raises(ValueError, match=name):
        cls(**params).fit(_backend())
