"""FedPAC (Xu et al., ICLR 2023): the classifier-collaboration quadratic program and the algorithm on nets.

The QP's weights concentrate on clients whose feature statistics match (label-skewed groups) and reduce to a
uniform average when every client looks the same.  Deterministic (fixed seeds; SLSQP is deterministic)."""

import numpy as np
import pytest
import torch

from nets.datasets import build_federation
from synth.algorithms import FedPAC
from synth.algorithms.fedpac import collaboration_weights, feature_statistics


def _objective(a, V, h, i):
    delta = (h[i][None] - h).reshape(len(V), -1)
    return float(a @ (np.diag(V) + delta @ delta.T) @ a)


def test_qp_is_optimal_on_the_simplex():
    rng = np.random.default_rng(0)
    c = 6
    V = rng.uniform(0.05, 0.5, c)
    h = rng.normal(size=(c, 3, 4))
    A = collaboration_weights(V, h, tol=0.0)
    np.testing.assert_allclose(A.sum(1), 1.0, atol=1e-9)
    assert (A >= 0).all()
    trial = rng.dirichlet(np.ones(c), size=2000)  # no point of the simplex does better (up to solver tolerance)
    for i in range(c):
        best = _objective(A[i], V, h, i)
        assert best <= min(_objective(a, V, h, i) for a in trial) + 1e-7


def test_identical_clients_average_uniformly():
    # the reduction: equal statistics and variances -> min sum_j alpha_j^2 V is the uniform average (FedAvg heads)
    c = 5
    A = collaboration_weights(np.full(c, 0.3), np.ones((c, 2, 3)))
    np.testing.assert_allclose(A, np.full((c, c), 1.0 / c), atol=1e-6)


def test_groups_with_different_statistics_do_not_collaborate():
    # two groups of clients whose class-conditional features differ strongly: each client combines only heads
    # of its own group (the bias term dominates across groups, the variance term spreads weight within one)
    rng = np.random.default_rng(1)
    h = np.concatenate([np.zeros((3, 2, 4)), 5 * np.ones((3, 2, 4))]) + 0.01 * rng.normal(size=(6, 2, 4))
    A = collaboration_weights(np.full(6, 0.2), h)
    group = np.array([0, 0, 0, 1, 1, 1])
    same = group[:, None] == group[None, :]
    assert A[~same].max() == 0.0
    assert A[same].min() > 0.2  # and it does collaborate inside the group


def test_feature_statistics_match_their_definitions():
    counts = np.array([[2.0, 0.0], [1.0, 3.0]])
    means = np.array([[[1.0, 0.0], [0.0, 0.0]], [[0.0, 2.0], [1.0, 1.0]]])
    sq = np.array([[2.0, 0.0], [4.0, 3.0]])
    V, h = feature_statistics(counts, means, sq)
    # client 0: p = (1, 0): V = (1 * 2 - 1 * 1) / 2
    assert V[0] == pytest.approx(0.5)
    # client 1: p = (1/4, 3/4): V = (1/4 * 4 - 1/16 * 4 + 3/4 * 3 - 9/16 * 2) / 4
    assert V[1] == pytest.approx((1.0 - 0.25 + 2.25 - 1.125) / 4)
    np.testing.assert_allclose(h[1], [[0.0, 0.5], [0.75, 0.75]])


def test_fedpac_on_label_skew_shares_the_extractor_and_groups_heads():
    fed = build_federation("digits-label-skew-1", 8, 16, np.random.default_rng(0), n_test=8)
    train, test = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=None, seed=1)
    est = FedPAC(n_rounds=4, local_steps=4, step_size=0.2, proto_lambda=1.0, random_state=0).fit(train)
    head = train.head_mask()
    body = est.models_[:, ~head]
    np.testing.assert_allclose(body, np.repeat(body[:1], fed.n_clients, 0), rtol=0, atol=1e-12)
    assert np.ptp(est.models_[:, head], axis=0).max() > 1e-3  # heads are personal
    # label skew 1: the clients of a cluster share their two classes; collaboration stays (almost) inside
    A = est.combination_weights_
    same = fed.clusters[:, None] == fed.clusters[None, :]
    assert (A * same).sum(1).min() > 0.9, A.round(2)


def test_bad_hyper_parameters_name_the_parameter():
    fed = build_federation("digits-label-skew-1", 4, 8, np.random.default_rng(0), n_test=4)
    train, _ = fed.backends(fed.model("mlp"))
    for kwargs, name in [({"proto_lambda": -1.0}, "proto_lambda"), ({"head_steps": -1}, "head_steps"),
                         ({"head_step_size": 0.0}, "head_step_size"), ({"step_size": 0.0}, "step_size")]:
        with pytest.raises(ValueError, match=name):
            FedPAC(**kwargs).fit(train)


def test_each_head_is_the_alpha_weighted_combination_of_the_trained_heads():
    # Xu et al. Sec. 4, classifier collaboration: psi_i <- sum_j alpha_ij psi_j over the heads after local
    # training, alpha from the statistics at the received extractor.  One round recomputed stage by stage.
    fed = build_federation("digits-label-skew-2", 8, 16, np.random.default_rng(0), n_test=8)
    train, _ = fed.backends(fed.model("mlp", dtype=torch.float64), batch_size=None, seed=1)
    w0 = train.to_numpy(train.init_models(1, "default", np.random.default_rng(3)))
    est = FedPAC(n_rounds=1, local_steps=3, step_size=0.2, init=w0, random_state=0).fit(train)
    m, head = fed.n_clients, train.head_mask()
    train.at_round(0)
    start = train.take(train.from_numpy(w0), np.zeros(m, dtype=np.int64))
    alpha = collaboration_weights(*feature_statistics(*train.class_statistics(start, np.arange(m))))
    trained = train.aligned_update(start, np.arange(m), 3, 0.2, None, 0.0, "head")
    trained = train.aligned_update(trained, np.arange(m), 3, 0.2, None, 1.0, "body")
    heads = train.to_numpy(trained)[:, head]
    np.testing.assert_allclose(est.combination_weights_, alpha, rtol=0, atol=1e-12)
    # the instance separates the combination from its alternatives: no collaboration, or alpha transposed
    assert np.abs(alpha @ heads - heads).max() > 1e-2
    assert np.abs(alpha @ heads - alpha.T @ heads).max() > 1e-3
    np.testing.assert_allclose(est.models_[:, head], alpha @ heads, rtol=0, atol=1e-10)
