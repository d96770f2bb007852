"""Metrics: SR-FCA Def. 3.1 misclustering on hand-built cases, matching-based errors, ARI."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from synth import metrics


def test_def_3_1_cases():
    true = np.array([0, 0, 0, 0, 1, 1, 1, 1])
    assert metrics.misclustering(true, true) == 0.0
    assert metrics.misclustering(1 - true, true) == 0.0  # relabelling is free
    # one impurity in each cluster: both clusters keep their majority label
    pred = np.array([0, 0, 0, 1, 1, 1, 1, 0])
    assert metrics.misclustering(pred, true) == 2 / 8
    # 50/50 collapse: no strict majority -> impure -> every client misclustered (Def. 3.1 is strict)
    assert metrics.misclustering(np.zeros(8, int), true) == 1.0
    assert metrics.matched_misclustering(np.zeros(8, int), true) == 0.5
    # a split true cluster: the larger piece is the proxy, the smaller piece is unmatched
    pred = np.array([0, 0, 0, 2, 1, 1, 1, 1])
    info = metrics.cluster_labels(pred, true)
    assert info.unmatched == [2] and info.missing == [] and info.impure == []
    assert metrics.misclustering(pred, true) == 1 / 8
    # unclustered clients (-1) count as misclustered
    pred = np.array([0, 0, 0, -1, 1, 1, 1, 1])
    assert metrics.misclustering(pred, true) == 1 / 8
    # 4 of 7 is a strict majority: cluster 0 is labelled 0 and its 3 impurities are misclustered
    pred = np.array([0, 0, 0, 0, 0, 0, 0, 1])
    info = metrics.cluster_labels(pred, true)
    assert info.label == {0: 0, 1: 1} and info.impure == []
    assert metrics.misclustering(pred, true) == 3 / 8
    # a true cluster with no proxy at all
    pred = np.array([0, 0, 0, 0, 0, 0, 1, 1])
    assert metrics.cluster_labels(pred, true).missing == [] and metrics.misclustering(pred, true) == 2 / 8
    pred = np.array([0, 0, 0, 0, 0, 0, 0, 0])
    assert metrics.cluster_labels(pred, true).missing == [0, 1]


@settings(max_examples=50, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=20), st.integers(0, 2**16))
def test_invariance_to_relabelling_and_client_order(true_list, seed):
    rng = np.random.default_rng(seed)
    true = np.array(true_list)
    pred = rng.integers(-1, 4, size=len(true))
    perm_labels = rng.permutation(4)
    relabelled = np.where(pred >= 0, perm_labels[np.maximum(pred, 0)], -1)
    order = rng.permutation(len(true))
    for f in (metrics.misclustering, metrics.matched_misclustering, metrics.adjusted_rand):
        base = f(pred, true)
        assert np.isclose(f(relabelled, true), base)
        assert np.isclose(f(pred[order], true[order]), base)
    # matched error never exceeds the Def. 3.1 error (a proxy assignment is one particular matching)
    assert metrics.matched_misclustering(pred, true) <= metrics.misclustering(pred, true) + 1e-12


def test_param_error_matching_and_collapse():
    truths = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 3.0]])
    est = truths[[2, 0, 1]] + np.array([[0.1, 0], [0, 0.2], [0, 0]])
    assert np.isclose(metrics.param_error(est, truths), (0.1 + 0.2) / 3)
    # brute force over permutations
    best = min(np.mean([np.linalg.norm(est[p[j]] - truths[j]) for j in range(3)])
               for p in itertools.permutations(range(3)))
    assert np.isclose(metrics.param_error(est, truths), best)
    # a collapsed solution (fewer estimates) is charged, never rewarded
    collapsed = np.array([[0.5, 0.0]])
    # one estimate for three truths: each truth is charged its distance to that estimate
    assert np.isclose(metrics.param_error(collapsed, truths), np.linalg.norm(truths - collapsed, axis=1).mean())
    assert metrics.param_error(collapsed, truths) > metrics.param_error(est, truths)
    assert metrics.ifca_success(est, truths, sigma=1.0) and not metrics.ifca_success(est, truths, sigma=0.1)


def test_ari_singletons_and_validation():
    true = np.array([0, 0, 1, 1])
    assert metrics.adjusted_rand(np.array([5, 5, 7, 7]), true) == 1.0
    assert metrics.adjusted_rand(np.array([0, 0, -1, -1]), true) < 1.0
    with pytest.raises(ValueError, match="labels_pred"):
        metrics.misclustering(np.array([0, 1]), true)
    with pytest.raises(ValueError, match="labels_true"):
        metrics.misclustering(np.array([0, 1]), np.array([0, -1]))


def test_assignment_equals_scipy_and_ari_equals_sklearn():
    """metrics.assignment (enumeration up to 5,040 candidates) and the numpy ARI give the libraries' answers."""
    from scipy.optimize import linear_sum_assignment
    from sklearn.metrics import adjusted_rand_score

    from synth.metrics import _adjusted_rand_score, assignment

    rng = np.random.default_rng(1)
    for _ in range(300):
        r, c = rng.integers(1, 9, 2)  # up to 8 x 8: both the enumerated and the scipy branch
        C = rng.standard_normal((r, c))
        rows, cols = assignment(C)
        ref = linear_sum_assignment(C)
        assert np.array_equal(rows, ref[0]) and C[rows, cols].sum() == pytest.approx(C[ref].sum(), abs=1e-12)
        a, b = rng.integers(0, rng.integers(1, 6), (2, rng.integers(1, 40)))
        assert _adjusted_rand_score(a, b) == pytest.approx(adjusted_rand_score(a, b), abs=1e-12)
        assert _adjusted_rand_score(a, a) == 1.0


def test_restart_success_is_the_dist_rule_and_fails_at_threshold_zero():
    """dist <= threshold over restarts (inclusive); at threshold 0 (exact recovery) a computed 0 does not pass."""
    assert metrics.restart_success([0.3, 0.06], 0.06) and not metrics.restart_success([0.3, 0.0601], 0.06)
    assert not metrics.restart_success([0.0, 1.0], 0.0)
    assert not metrics.restart_success([np.inf], 1.0)  # a diverged run
    with pytest.raises(ValueError, match="threshold"):
        metrics.restart_success([0.1], -0.1)
    with pytest.raises(ValueError, match="dists"):
        metrics.restart_success([-0.1], 0.1)
