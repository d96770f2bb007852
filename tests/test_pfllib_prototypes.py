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


def _pfllib_send_heads(V, h, heads, rng):
    """PFLlib@d832e76 ``serverpac.py:40-44, 126-174`` and ``clientpac.py:110-112`` transcribed on vectors: heads are
    mutable client objects, uploaded in one random order, weighted by the QP solved in another."""
    from synth.algorithms.fedpac import collaboration_weights

    c = len(V)
    selected = list(rng.permutation(c))  # np.random.choice order
    uploaded_ids = list(rng.permutation(c))  # random.sample(selected_clients, ...) order
    clients = [{"head": heads[i].copy()} for i in range(c)]
    Vars, Hs = [V[i] for i in selected], [h[i] for i in selected]
    uploaded_heads = [clients[cid] for cid in uploaded_ids]  # the same objects as the clients' heads
    head_weights = collaboration_weights(np.array(Vars), np.array(Hs))
    for idx, cid in enumerate(uploaded_ids):
        new_head = sum(w * up["head"] for w, up in zip(head_weights[idx], uploaded_heads, strict=True))
        clients[cid]["head"] = new_head  # set_head: read by the later add_heads through uploaded_heads
    return np.array([cl["head"] for cl in clients])


def test_pfllib_head_mix_is_pfllibs_assignment():
    from synth.algorithms.fedpac import collaboration_weights, pfllib_head_mix

    rng = np.random.default_rng(0)
    c = 7
    V = rng.uniform(0.05, 0.5, c)
    h = rng.normal(size=(c, 3, 4))
    heads = rng.normal(size=(c, 5))
    for seed in range(5):
        M = pfllib_head_mix(V, h, np.random.default_rng(seed))
        ref = _pfllib_send_heads(V, h, heads, np.random.default_rng(seed))
        np.testing.assert_allclose(M @ heads, ref, rtol=0, atol=1e-10)
    # two groups of alike clients (label skew): the QP combines within a group, PFLlib's assignment across them
    group = np.array([0, 0, 0, 0, 1, 1, 1])
    h2 = np.where(group[:, None, None] == 0, 1.0, -1.0) * np.ones((c, 3, 4))
    alpha = collaboration_weights(np.full(c, 0.3), h2)
    M = pfllib_head_mix(np.full(c, 0.3), h2, np.random.default_rng(1))
    np.testing.assert_allclose(alpha[np.ix_(group == 0, group == 1)], 0.0, atol=1e-9)
    assert M[np.ix_(group == 0, group == 1)].max() > 0.1


def test_fedpac_pfllib_head_assignment_on_a_network():
    be = _backend("digits-label-skew-1", clients=6, n=12)
    kw = dict(n_rounds=2, local_steps=2, step_size=0.1, prototype_mean="clients", random_state=0)
    matched = FedPAC(**kw).fit(be)
    pfllib = FedPAC(head_assignment="pfllib", **kw).fit(be)
    head = be.head_mask()
    assert np.abs(pfllib.models_[:, head] - matched.models_[:, head]).max() > 1e-4
    np.testing.assert_array_equal(pfllib.combination_weights_.shape, (6, 6))
