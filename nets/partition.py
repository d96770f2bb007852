"""Partitioners: split a train/test pool into m clients of K true clusters.

Each client gets ``n`` training samples and ``n_test`` test samples drawn from
its own cluster's distribution (without replacement inside each pool).

Feature / concept shifts (labels of a client are those of the pool):

* ``rotated``: IFCA Sec. VI-B / SR-FCA Sec. 5 -- cluster c sees images rotated
  by ``c * 360/K`` degrees (K = 4: 0/90/180/270; K = 2: 0/180, Rotated CIFAR).
  As in IFCA's code, every cluster draws its clients' images from its own
  random permutation of the whole pool, so an image can appear once per cluster;
  with ``split=True`` one permutation of the pool is split among all clients,
  so no image appears twice (SR-FCA's public code, ``src/datasets/simulated.py``
  lines 13-18 and 21-30, with 100 x 600 = the whole MNIST training split).
* ``inverted``: SR-FCA Sec. 5 -- cluster 1 sees ``1 - x``.
* ``feature-skew``: CLoVE Sec. 5, which defines its feature skew as the same
  0/90/180/270 rotations; kept under CLoVE's name, drawn without replacement
  across clusters as CLoVE partitions.
* ``concept-shift``: CLoVE Sec. 5 -- all labels everywhere, each cluster
  applies two label swaps unique to it.

Label skews (CLoVE Sec. 5 and App. C.1.2), images untouched:

* ``label-skew-1``: each cluster has two classes of its own, no overlap.
* ``label-skew-2``: each cluster has U classes, V of them shared by all
  clusters (U, V) = (4, 2) for images, (2, 1) for AG News.
* ``label-skew-3``: K = 5; cluster c < 4 misses one class of its own, cluster
  4 has all classes; a client's class proportions are Dirichlet(alpha = 0.5).
* ``label-skew-4``: one third of a client's data uniform over all classes,
  the rest from a dominant class unique to its cluster.
* ``one-class``: CLoVE Sec. 5.2 / App. C.2 (unsupervised) -- every cluster is
  one class of its own (K <= number of classes; K = 10 for MNIST).
* ``dirichlet``: cluster c's class proportions are Dirichlet(alpha); its
  clients draw labels from them.

Deviation, stated once: CLoVE's label skews 3/4 spread each class over its
clients by a Dirichlet split, which gives unequal client sizes; here every
client has exactly ``n`` samples and its *class proportions* are Dirichlet.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from synth.validation import check_choice, check_int, check_real

__all__ = ["PARTITIONS", "Partition", "PoolTooSmallError", "cluster_sizes", "partition"]

PARTITIONS = ("rotated", "inverted", "feature-skew", "concept-shift", "label-skew-1", "label-skew-2",
              "label-skew-3", "label-skew-4", "dirichlet", "one-class")
_IMAGE_ONLY = ("rotated", "inverted", "feature-skew")


class PoolTooSmallError(ValueError):
    """A class pool holds fewer samples than the clients' draws need (``available`` < ``need``)."""

    def __init__(self, message: str, available: int, need: int):
        super().__init__(message)
        self.available, self.need = available, need


@dataclass
class Partition:
    """Client arrays: ``X (m, n, ...)``, ``y (m, n)``, test arrays, and the true cluster of every client."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    clusters: np.ndarray
    notes: list[str] = field(default_factory=list)


def cluster_sizes(m: int, K: int) -> np.ndarray:
    """Clients per cluster: as equal as possible, the first ``m % K`` clusters one larger."""
    K = check_int("clusters", K, low=1)
    m = check_int("clients", m, low=K)
    return np.full(K, m // K) + (np.arange(K) < m % K)


def default_clusters(kind: str, n_classes: int) -> int:
    """K used when the caller gives none."""
    return {"rotated": 4, "inverted": 2, "feature-skew": 4, "label-skew-3": 5, "one-class": n_classes,
            "label-skew-1": min(4, n_classes // 2), "label-skew-2": 3 if n_classes == 4 else 4}.get(kind, 4)


def partition(kind: str, X, y, X_test, y_test, n_classes: int, m: int, n: int, n_test: int | None,
              K: int | None, rng: np.random.Generator, alpha: float = 0.5, split: bool = False) -> Partition:
    """Split pools into ``m`` clients of ``K`` clusters by ``kind`` (see the module docstring); ``split`` (rotated
    and inverted only): one permutation of each pool split among all clients, none shared."""
    kind = check_choice("partition", kind, PARTITIONS)
    K = default_clusters(kind, n_classes) if K is None else check_int("clusters", K, low=1)
    m = check_int("clients", m, low=K)
    n = check_int("n_per_client", n, low=1)
    alpha = check_real("alpha", alpha, low=0.0, low_inclusive=False)
    if kind == "feature-skew" and K > 4:
        raise ValueError(f"clusters must be at most 4 for feature-skew (rotations 0/90/180/270), got {K}")
    if kind in _IMAGE_ONLY and X.ndim != 4:
        raise ValueError(f"partition {kind!r} transforms images; this dataset's inputs have shape {X.shape[1:]}")
    clusters = np.repeat(np.arange(K), cluster_sizes(m, K))
    if kind in ("rotated", "inverted"):
        if kind == "inverted" and K != 2:
            raise ValueError(f"clusters must be 2 for the inverted partition (x and 1 - x), got {K}")
        if kind == "rotated" and K not in (2, 4):
            raise ValueError(f"clusters must be 2 (0/180 degrees) or 4 (0/90/180/270) for rotations, got {K}")
        sample = _one_split if split else _per_cluster_permutation
        part = sample(X, y, X_test, y_test, clusters, n, n_test, rng)
    elif split:
        raise ValueError(f"a split draw is defined for the rotated and inverted partitions, not {kind!r}")
    else:
        probs = _class_probabilities(kind, clusters, K, n_classes, rng, alpha)
        part = _by_class(X, y, X_test, y_test, probs, n, n_test, rng, kind)
        part.clusters = clusters
    _apply_shift(kind, part, K, n_classes, rng)
    return part


# ------------------------------------------------------------------ sampling
def _per_cluster_permutation(X, y, Xt, yt, clusters, n, n_test, rng) -> Partition:
    """IFCA's construction: each cluster chunks its own permutation of the pool into its clients."""
    per = np.bincount(clusters)
    if per.max() > len(y):
        raise ValueError(f"clients is too large: {per.max()} clients per cluster need at least one distinct training "
                         f"sample each, the pool has {len(y)}")
    if per.max() * n > len(y):
        raise ValueError(f"n_per_client={n} is too large: {per.max()} clients per cluster need {per.max() * n} "
                         f"distinct training samples, the pool has {len(y)}")
    nt = _test_size(n, n_test, len(yt) // per.max())
    idx, tidx = [], []
    for size in per:  # loop over clusters, not clients
        idx.append(rng.permutation(len(y))[:size * n].reshape(size, n))
        tidx.append(rng.permutation(len(yt))[:size * nt].reshape(size, nt))
    idx, tidx = np.concatenate(idx), np.concatenate(tidx)
    want = n if n_test is None else n_test
    notes = [] if nt == want else [f"{nt} test samples per client (the test pool of {len(yt)} split among "
                                   f"{per.max()} clients per cluster), not {want}"]
    return Partition(X[idx], y[idx], Xt[tidx], yt[tidx], clusters, notes)


def _one_split(X, y, Xt, yt, clusters, n, n_test, rng) -> Partition:
    """SR-FCA's public code (``simulated.py:13-30``): one permutation of each pool chunked into all clients."""
    m = len(clusters)
    if m * n > len(y):
        raise ValueError(f"n_per_client={n} is too large for a split draw: {m} clients need {m * n} distinct training "
                         f"samples, the pool has {len(y)}")
    if m > len(yt):
        raise ValueError(f"clients is too large for a split draw: {m} clients need a test sample each, the test "
                         f"pool has {len(yt)}")
    nt = _test_size(n, n_test, len(yt) // m)
    idx = rng.permutation(len(y))[:m * n].reshape(m, n)
    tidx = rng.permutation(len(yt))[:m * nt].reshape(m, nt)
    want = n if n_test is None else n_test
    notes = [] if nt == want else [f"{nt} test samples per client (the test pool of {len(yt)} split among {m} "
                                   f"clients), not {want}"]
    return Partition(X[idx], y[idx], Xt[tidx], yt[tidx], clusters, notes)


def _test_size(n: int, n_test: int | None, available: int) -> int:
    want = n if n_test is None else check_int("n_test", n_test, low=1)
    if available < 1:
        raise ValueError("the test pool is too small to give every client a test sample; use fewer clients")
    return min(want, available)


def _class_probabilities(kind, clusters, K, C, rng, alpha) -> np.ndarray:
    """``(m, C)`` class distribution of each client."""
    order = rng.permutation(C)  # which concrete classes play which role
    P = np.zeros((K, C))
    if kind == "label-skew-1":
        if 2 * K > C:
            raise ValueError(f"clusters must be at most {C // 2} for label-skew-1 (two own classes each), got {K}")
        for c in range(K):
            P[c, order[2 * c:2 * c + 2]] = 0.5
    elif kind == "label-skew-2":
        U, V = (2, 1) if C == 4 else (4, 2)
        if V + K * (U - V) > C:
            raise ValueError(f"clusters must be at most {(C - V) // (U - V)} for label-skew-2 "
                             f"(U={U} classes, V={V} shared), got {K}")
        for c in range(K):
            own = order[V + c * (U - V):V + (c + 1) * (U - V)]
            P[c, np.concatenate([order[:V], own])] = 1.0 / U
    elif kind == "label-skew-3":
        if K != 5 or C < 4:
            raise ValueError(f"clusters must be 5 for label-skew-3 (CLoVE App. C.1.2), got {K}")
        P[:] = 1.0
        for c in range(4):
            P[c, order[c]] = 0.0
    elif kind == "label-skew-4":
        if K > C:
            raise ValueError(f"clusters must be at most {C} for label-skew-4 (a dominant class each), got {K}")
        P[:] = (1.0 / 3.0) / C
        P[np.arange(K), order[:K]] += 2.0 / 3.0
    elif kind == "one-class":
        if K > C:
            raise ValueError(f"clusters must be at most {C} for one-class (a class each), got {K}")
        P[np.arange(K), order[:K]] = 1.0
    elif kind == "dirichlet":
        P = rng.dirichlet(np.full(C, alpha), size=K)
    else:  # concept-shift, feature-skew: all classes
        P[:] = 1.0 / C
    P = P[clusters]
    if kind == "label-skew-3":  # per client Dirichlet(0.5) proportions over its allowed classes
        allowed = P > 0
        P = np.where(allowed, rng.gamma(0.5, size=P.shape), 0.0)
        P /= P.sum(1, keepdims=True)
    return P / P.sum(1, keepdims=True)


def _by_class(X, y, Xt, yt, probs, n, n_test, rng, kind) -> Partition:
    """Draw every client's samples class by class, without replacement within each pool."""
    nt = n if n_test is None else check_int("n_test", n_test, low=1)
    train = _draw(y, probs, n, rng, "training", kind)
    test = _draw(yt, probs, nt, rng, "test", kind)
    return Partition(X[train], y[train], Xt[test], yt[test], np.zeros(len(probs), dtype=np.int64))


def _draw(labels, probs, n, rng, which, kind) -> np.ndarray:
    m, C = probs.shape
    pools = [rng.permutation(np.flatnonzero(labels == k)) for k in range(C)]
    counts = np.stack([rng.multinomial(n, p) for p in probs])  # (m, C); one-time data preparation
    need = counts.sum(0)
    short = np.flatnonzero(need > np.array([len(p) for p in pools]))
    if len(short):
        k = int(short[0])
        raise PoolTooSmallError(f"{kind}: the {which} pool has {len(pools[k])} samples of class {k} but the clients "
                                f"need {need[k]}; use fewer clients or a smaller n_per_client / n_test",
                                len(pools[k]), int(need[k]))
    out = np.empty((m, n), dtype=np.int64)
    start = np.zeros(C, dtype=np.int64)
    for i in range(m):  # data preparation, once per run
        picks = [pools[k][start[k]:start[k] + counts[i, k]] for k in range(C)]
        start += counts[i]
        out[i] = rng.permutation(np.concatenate(picks))
    return out


# ---------------------------------------------------------------- the shifts
def _apply_shift(kind: str, part: Partition, K: int, C: int, rng) -> None:
    """Transform inputs (rotation, inversion) or labels (concept shift) cluster by cluster."""
    for c in range(K):  # loop over clusters
        rows = part.clusters == c
        if kind in ("rotated", "feature-skew"):
            turns = c * (4 // K) if kind == "rotated" else c % 4
            part.X[rows] = np.rot90(part.X[rows], k=turns, axes=(-2, -1))
            part.X_test[rows] = np.rot90(part.X_test[rows], k=turns, axes=(-2, -1))
        elif kind == "inverted" and c == 1:
            part.X[rows] = 1.0 - part.X[rows]
            part.X_test[rows] = 1.0 - part.X_test[rows]
    if kind == "concept-shift":
        pairs = rng.permutation(C)[:2 * (C // 2)].reshape(-1, 2)
        combos = list(itertools.combinations(range(len(pairs)), 2))
        if K > len(combos):
            raise ValueError(f"clusters must be at most {len(combos)} for concept-shift (two label swaps each), "
                             f"got {K}")
        chosen = [combos[i] for i in rng.permutation(len(combos))[:K]]
        for c, (a, b) in enumerate(chosen):
            perm = np.arange(C)
            for p in (pairs[a], pairs[b]):
                perm[p[0]], perm[p[1]] = p[1], p[0]
            rows = part.clusters == c
            part.y[rows] = perm[part.y[rows]]
            part.y_test[rows] = perm[part.y_test[rows]]
