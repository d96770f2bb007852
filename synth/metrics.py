"""Clustering and estimation metrics.

* :func:`cluster_labels` / :func:`misclustering` -- SR-FCA Def. 3.1 (cluster
  label by strict majority), with the counting rule spelled out below.
* :func:`matched_misclustering` -- the one-to-one (Hungarian) clustering error.
* :func:`adjusted_rand` -- scikit-learn's ARI.
* :func:`param_error` -- (1/K) sum_j ||theta_j - theta*_j|| after an optimal
  one-to-one matching of estimates to truths.
* :func:`ifca_success` -- IFCA Sec. VI-A: dist <= 0.6 sigma.
* :func:`restart_success` -- the same rule over IFCA's restarts, from their distances.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .theta import pairwise_distances
from .validation import check_array, check_real

__all__ = [
    "ClusterLabels",
    "adjusted_rand",
    "cluster_labels",
    "ifca_success",
    "restart_success",
    "matched_misclustering",
    "misclustering",
    "param_error",
]


@dataclass
class ClusterLabels:
    """SR-FCA Def. 3.1 applied to a predicted clustering.

    label : predicted cluster id -> true cluster label, or -1 when no true
        cluster holds a strict majority (> 1/2) of it ("impure" cluster).
    proxy : predicted cluster id -> True when it is *the* proxy of its label
        (the largest predicted cluster carrying that label; ties -> lowest id).
    impure, unmatched : ids of impure clusters, and of labelled clusters that
        are not the proxy (a true cluster split into several pieces).
    missing : true clusters with no proxy at all.
    """

    label: dict[int, int]
    proxy: dict[int, bool]
    impure: list[int]
    unmatched: list[int]
    missing: list[int]


def _check_labels(pred, true) -> tuple[np.ndarray, np.ndarray]:
    true = check_array("labels_true", true, ndim=1, dtype=np.int64)
    pred = check_array("labels_pred", pred, ndim=1, shape=(len(true),), dtype=np.int64)
    if np.any(true < 0):
        raise ValueError("labels_true must be non-negative cluster ids")
    return pred, true


def cluster_labels(labels_pred, labels_true) -> ClusterLabels:
    """Cluster labels of SR-FCA Def. 3.1; ``-1`` in ``labels_pred`` means "not clustered"."""
    pred, true = _check_labels(labels_pred, labels_true)
    label: dict[int, int] = {}
    sizes: dict[int, int] = {}
    for c in np.unique(pred[pred >= 0]):  # loop over clusters, not clients
        members = true[pred == c]
        counts = np.bincount(members)
        top = int(counts.argmax())
        label[int(c)] = top if counts[top] * 2 > len(members) else -1
        sizes[int(c)] = len(members)
    proxy = dict.fromkeys(label, False)
    for t in np.unique(true):
        cands = [c for c, lab in label.items() if lab == t]
        if cands:
            proxy[max(cands, key=lambda c: (sizes[c], -c))] = True
    return ClusterLabels(
        label=label,
        proxy=proxy,
        impure=[c for c, lab in label.items() if lab == -1],
        unmatched=[c for c, lab in label.items() if lab != -1 and not proxy[c]],
        missing=[int(t) for t in np.unique(true) if not any(lab == t and proxy[c] for c, lab in label.items())],
    )


def misclustering(labels_pred, labels_true) -> float:
    """Fraction of misclustered clients under SR-FCA Def. 3.1.

    A client is correctly clustered iff it sits in the *proxy* cluster of its
    own true cluster: a predicted cluster whose strict majority (> 1/2) comes
    from that true cluster, and the largest such one.  Every client of an
    impure cluster (no strict majority), of an unmatched piece of a split
    cluster, or left unclustered (label -1) counts as misclustered.  A
    clustering equals C* (after relabelling) iff this is 0.  Note: with a 50/50
    collapse into one cluster the cluster is impure and the error is 1, where
    a one-to-one count (:func:`matched_misclustering`) gives 0.5.
    """
    pred, true = _check_labels(labels_pred, labels_true)
    info = cluster_labels(pred, true)
    good = np.zeros(len(true), dtype=bool)
    for c, lab in info.label.items():
        if info.proxy[c]:
            good |= (pred == c) & (true == lab)
    return float(1.0 - good.mean()) if len(true) else 0.0


def matched_misclustering(labels_pred, labels_true) -> float:
    """1 - (best one-to-one overlap between predicted and true clusters) / m (Hungarian)."""
    pred, true = _check_labels(labels_pred, labels_true)
    ok = pred >= 0
    if not ok.any():
        return 1.0
    pu, pi = np.unique(pred[ok], return_inverse=True)
    tu, ti = np.unique(true[ok], return_inverse=True)
    table = np.zeros((len(pu), len(tu)))
    np.add.at(table, (pi, ti), 1.0)
    rows, cols = assignment(-table)
    return float(1.0 - table[rows, cols].sum() / len(true))


def adjusted_rand(labels_pred, labels_true) -> float:
    """Adjusted Rand index; unclustered clients (-1) count as singletons."""
    pred, true = _check_labels(labels_pred, labels_true)
    pred = pred.copy()
    loose = pred < 0
    pred[loose] = pred.max(initial=-1) + 1 + np.arange(loose.sum())
    return _adjusted_rand_score(true, pred)


def _adjusted_rand_score(true: np.ndarray, pred: np.ndarray) -> float:
    """Hubert & Arabie's adjusted Rand index from the pair confusion matrix (scikit-learn's formula, without
    importing scikit-learn, which would dominate the start-up of one run)."""
    _, ti = np.unique(true, return_inverse=True)
    _, pi = np.unique(pred, return_inverse=True)
    C = np.zeros((ti.max(initial=-1) + 1, pi.max(initial=-1) + 1), dtype=np.int64)
    np.add.at(C, (ti, pi), 1)
    n = int(len(true))
    sq = int((C * C).sum())
    tp = sq - n
    fp = int((C @ C.sum(0)).sum()) - sq
    fn = int((C.T @ C.sum(1)).sum()) - sq
    tn = n * n - fp - fn - sq
    if fn == 0 and fp == 0:
        return 1.0
    return float(2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)))


def param_error(models, truths) -> float:
    """(1/K) sum_j ||theta_j - theta*_j|| after an optimal one-to-one matching.

    With fewer estimates than truths, each unmatched truth is charged the
    distance to its nearest estimate (so a collapsed solution is penalised,
    never rewarded); extra estimates beyond the K truths are ignored.
    """
    truths = check_array("truths", truths, ndim=2)
    models = check_array("models", models, ndim=2, shape=(None, truths.shape[1]))
    if len(models) == 0:
        return float("inf")
    dist = pairwise_distances(truths, models)
    rows, cols = assignment(dist)
    total = dist[rows, cols].sum()
    unmatched = np.setdiff1d(np.arange(len(truths)), rows)
    total += dist[unmatched].min(1).sum() if len(unmatched) else 0.0
    return float(total / len(truths))


def ifca_success(models, truths, sigma: float, factor: float = 0.6) -> bool:
    """IFCA Sec. VI-A success: matched ``param_error <= factor * sigma``."""
    sigma = check_real("sigma", sigma, low=0.0)
    return bool(param_error(models, truths) <= factor * sigma)


def restart_success(dists, threshold: float) -> bool:
    """IFCA Sec. VI-A over restarts: some run's matched distance ``<= threshold`` (``0.6 sigma``).

    At threshold 0 (``sigma = 0``) the rule asks for exact recovery, which gradient descent from a random start
    does not reach in finitely many rounds (its iteration maps are invertible with probability 1): a computed
    distance of 0 says only that the models lie within rounding of the truth (``pairwise_distances`` clips
    below ~1e-8 ``||theta||``), so that a float64 closed form would pass where float32 iterations 4e-7 away fail.
    The rule is then failed.
    """
    threshold = check_real("threshold", threshold, low=0.0)
    # a diverged run's distance is +inf (it never passes)
    dists = check_array("dists", dists, ndim=1, finite=False, nonnegative=True)
    if not len(dists):
        raise ValueError("dists must hold one distance per restart, got none")
    return bool(threshold > 0 and dists.min() <= threshold)


def assignment(cost: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Minimum-cost one-to-one assignment of a rectangular cost matrix, as ``scipy.optimize.linear_sum_assignment``.

    Up to 5,040 candidate assignments (e.g. 7 x 7, or 4 models to 4 truths: 24) it enumerates them in numpy:
    importing scipy.optimize costs about 0.4 s of CPU, more than a small IFCA run's whole computation.  Larger
    problems go to scipy.  Returns ``(rows, cols)`` with ``rows`` sorted.
    """
    import math
    from itertools import permutations

    cost = np.asarray(cost, dtype=np.float64)
    r, c = cost.shape
    if min(r, c) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if math.perm(max(r, c), min(r, c)) > 5040:
        from scipy.optimize import linear_sum_assignment

        return linear_sum_assignment(cost)
    if r > c:
        cols_t, rows_t = assignment(cost.T)
        order = np.argsort(rows_t)
        return rows_t[order], cols_t[order]
    P = np.array(list(permutations(range(c), r)), dtype=np.int64)  # (candidates, r)
    totals = cost[np.arange(r), P].sum(1)
    return np.arange(r, dtype=np.int64), P[int(np.argmin(totals))]
