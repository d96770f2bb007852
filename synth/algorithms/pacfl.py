"""PACFL -- principal angles between client data subspaces (Vahidian et al., "Efficient Distribution Similarity
Identification in Clustered Federated Learning via Principal Angles between Client Data Subspaces", AAAI 2023).

One shot, before any training (Vahidian et al. Sec. 3, Alg. 1): every client computes a truncated SVD of its
data matrix and sends the ``p`` leading (right) singular vectors ``U_i`` (``D x p``, an orthonormal basis
of its data subspace).  The server forms the proximity matrix of principal angles,
``cos theta_r(U_i, U_j) = sigma_r(U_i^T U_j)`` (Sec. 3, Eq. (1)), either the smallest angle ``theta_1``
(``proximity="smallest"``, their Eq. (2)) or the sum of all ``p`` angles (``"sum"``, the trace form), in
degrees, and cuts an average-linkage hierarchical clustering (HC) of it at the threshold ``beta``
(``distance_threshold``; or at ``n_clusters`` clusters when no threshold is given).  Each cluster then trains its own
model by FedAvg.

On the synthetic GLM backend a data point is ``(x, y)``, so the subspaces carry the regression vector (the
second moment of ``(x, y)`` has ``(theta, |theta|^2)`` in its leading directions): PACFL applies there too.

The authors' code (github MMorafah/PACFL, ``main_pacfl.py`` and ``src/clustering/hierarchical_clustering.py``,
the code CLoVE ran) differs in three ways, each offered here beside the paper's form:

* ``subspace="per_class"``: one truncated SVD *per class* of a client's data (the ``n_basis`` leading left
  singular vectors of each class's ``D x n_k`` data matrix, ``min(p, n_k)`` of them), stacked into one basis
  (``np.hstack(U_temp)``); under label skew two clients sharing no class then have different bases even where
  their pooled data would not.  ``"client"`` (default) is the paper's one SVD of all of a client's data.
* ``proximity="pairwise"``: ``calculating_adjacency``'s ``min(arccos(clip(U_i^T U_j)))`` over the *entries* of
  ``U_i^T U_j``, the smallest angle between two basis vectors, signed (a singular vector and its negative give
  different angles, so it depends on the SVD routine's sign choice; here numpy's LAPACK) and not a principal
  angle.  ``"smallest"`` (default) is the paper's exact smallest principal angle, sign invariant; on a stacked
  basis it is taken between the spans (the basis orthonormalised first).
* ``hc_linkage="weighted"``: the code's ``hierarchical_clustering`` with ``linkage='average'`` replaces two merged
  clusters' rows by their plain mean, ``(A[:, i] + A[:, j]) / 2``, which is WPGMA (scipy's ``"weighted"``), not
  UPGMA (``"average"``).  Its threshold rule merges while the smallest distance is at most ``beta``: here a
  cut of the tree at ``beta`` (scipy's ``fcluster``, criterion ``"distance"``), so the number of clusters is
  the method's choice, not an input.  The code's defaults (``src/utils/options_cluster.py``): ``cluster_alpha``
  (beta) 3.5 degrees, ``n_basis`` (p) 5 per class, ``linkage='average'``.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_int, check_random_state
from .backend import ModelBackend
from .baselines import train_clusters
from .common import default_scheme, initial_models
from .params import POSITIVE, Estimator, Int, Options, shared
from .result import FitResult, History, Monitor

__all__ = ["PACFL", "class_subspaces", "client_subspaces", "hierarchical_labels", "pairwise_angles", "principal_angles"]

PROXIMITIES = ("smallest", "sum", "pairwise")
SUBSPACES = ("client", "per_class")
LINKAGES = ("single", "complete", "average", "weighted")


def client_subspaces(F: np.ndarray, p: int) -> np.ndarray:
    """The ``p`` leading right singular vectors of every client's data matrix: ``(c, D, p)`` (Alg. 1, line 3).

    Zero padding rows do not change them, so all clients are decomposed in one batched SVD.
    """
    _, _, Vt = np.linalg.svd(np.asarray(F, dtype=np.float64), full_matrices=False)
    return np.transpose(Vt[:, :p, :], (0, 2, 1))


def class_subspaces(F: np.ndarray, y: np.ndarray, n: np.ndarray, p: int) -> tuple[np.ndarray, np.ndarray]:
    """The authors' stacked per-class bases: ``(U (c, D, C p), kept (c, C p))`` (``main_pacfl.py``).

    Block ``k`` of ``U[i]`` holds the ``min(p, n_ik)`` leading right singular vectors of the rows of ``F[i]``
    of class ``k`` (the left singular vectors of the code's ``D x n_ik`` matrix); ``kept`` marks the columns
    that exist (zero columns stand for the rest: absent classes, classes with fewer than ``p`` samples).
    One batched SVD over the clients per class (a loop over classes, not clients).
    """
    F = np.asarray(F, dtype=np.float64)
    y = np.asarray(y)
    c, n_max, D = F.shape
    valid = np.arange(n_max)[None, :] < np.asarray(n)[:, None]
    classes = np.unique(y[valid])
    q = min(p, n_max, D)
    blocks, kept = [], []
    for k in classes:
        rows = valid & (y == k)
        _, _, Vt = np.linalg.svd(F * rows[..., None], full_matrices=False)  # zero rows change nothing
        keep = np.arange(q)[None, :] < np.minimum(rows.sum(1), p)[:, None]
        blocks.append(np.transpose(Vt[:, :q, :], (0, 2, 1)) * keep[:, None, :])
        kept.append(keep)
    return np.concatenate(blocks, axis=2), np.concatenate(kept, axis=1)


def pairwise_angles(U: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
    """The authors' ``calculating_adjacency``: ``min(arccos(clip(U_i^T U_j, -1, 1)))`` over the entries, in
    degrees ``(c, c)``, columns not ``kept`` left out (signed: see the module docstring)."""
    G = np.einsum("adp,bdq->abpq", U, U)
    if kept is not None:
        pair = kept[:, None, :, None] & kept[None, :, None, :]
        G = np.where(pair, G, -1.0)
    return np.degrees(np.arccos(np.clip(G.max(axis=(2, 3)), -1.0, 1.0)))


def _orthonormal(U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An orthonormal basis of the span of each ``U[i]`` ``(c, D, q)`` (zero columns past its rank) and the ranks."""
    Q, s, _ = np.linalg.svd(U, full_matrices=False)
    tol = s.max(axis=1, keepdims=True) * max(U.shape[1], U.shape[2]) * np.finfo(np.float64).eps
    keep = s > tol
    return Q * keep[:, None, :], keep.sum(1)


def principal_angles(U: np.ndarray, V: np.ndarray | None = None) -> np.ndarray:
    """All principal angles (degrees, ascending) between the subspaces of ``U (c, D, p)`` and ``V (c', D, p)``.

    ``cos theta_r = sigma_r(U_i^T U_j)`` (Vahidian et al. Eq. (1), Bjoerck & Golub 1973): ``(c, c', p)``.
    """
    V = U if V is None else V
    G = np.einsum("adp,bdq->abpq", U, V)
    s = np.linalg.svd(G, compute_uv=False)  # descending cosines
    return np.degrees(np.arccos(np.clip(s, -1.0, 1.0)))


def hierarchical_labels(A: np.ndarray, linkage: str, threshold: float | None, n_clusters: int | None) -> np.ndarray:
    """Labels ``0..C-1`` (in order of first appearance) of the HC of the distance matrix ``A``: the tree cut at
    ``threshold`` (clusters whose merge height is at most it; the code's ``A > thresh`` stop) or, without
    one, at ``n_clusters`` clusters."""
    m = len(A)
    if m == 1 or (threshold is None and n_clusters == 1):
        return np.zeros(m, dtype=np.int64)
    # imported where used: keeps start-up fast
    from scipy.cluster.hierarchy import fcluster
    from scipy.cluster.hierarchy import linkage as tree
    from scipy.spatial.distance import squareform

    Z = tree(squareform(A, checks=False), method=linkage)
    raw = fcluster(Z, threshold, "distance") if threshold is not None else fcluster(Z, n_clusters, "maxclust")
    return _first_seen(raw)


def _first_seen(raw: np.ndarray) -> np.ndarray:
    _, first, inverse = np.unique(raw, return_index=True, return_inverse=True)
    order = np.argsort(np.argsort(first))
    return order[inverse].astype(np.int64)


class PACFL(Estimator):
    """PACFL (Vahidian et al. 2023, Alg. 1): HC on principal angles of client data subspaces, FedAvg per cluster.

    Parameters
    ----------
    n_subspace : p, singular vectors per client (the paper uses 3-5), or per class with
        ``subspace="per_class"`` (the code's ``n_basis``, default 5).
    distance_threshold : beta, the HC distance threshold in degrees (> 0; scikit-learn's name): the method's
        rule, which chooses the number of clusters (the code: 3.5); ``None``: cut at ``n_clusters`` clusters.
    n_clusters : the number of clusters when ``distance_threshold`` is ``None``.
    proximity : ``"smallest"`` (smallest principal angle, the paper's Eq. (2)), ``"sum"`` of the principal
        angles (``min(rank_i, rank_j)`` of them), or ``"pairwise"`` (the authors' entry-wise angle).
    subspace : ``"client"`` (one SVD of all of a client's data, the paper) or ``"per_class"`` (one SVD per class,
        stacked: the authors' code; needs a backend with ``client_labels``, i.e. nets).
    hc_linkage : HC linkage: ``"average"`` (UPGMA, the paper's word), ``"weighted"`` (WPGMA, what the code's
        ``'average'`` computes), ``"complete"``, ``"single"`` (its own name: CFL's shared ``linkage`` is the
        bipartition rule, with another range).
    n_rounds, step_size, averaging, local_steps, participation, init, random_state, monitor : FedAvg inside
        the clusters, as in :class:`~synth.algorithms.kfed.KFED`.

    Attributes
    ----------
    labels_, models_, n_clusters_, history_, result_ (``extra["proximity"]``: the ``(m, m)`` angle matrix).
    """

    _parameter_constraints = {
        **shared("n_rounds", "averaging", "local_steps", "participation", "init", "random_state", "monitor"),
        "n_subspace": [Int(1, None)],  # at most the feature dimension and every client's sample count, at fit
        "distance_threshold": [None, POSITIVE],
        "n_clusters": [None, Int(1, "n_clients")],
        "proximity": [Options(*PROXIMITIES)],
        "subspace": [Options(*SUBSPACES)],
        "hc_linkage": [Options(*LINKAGES)],
        "step_size": [POSITIVE],
    }

    def __init__(self, n_subspace: int = 3, distance_threshold: float | None = None, n_clusters: int | None = 2,
                 proximity: str = "smallest", subspace: str = "client", hc_linkage: str = "average",
                 n_rounds: int = 100, step_size: float = 0.1, averaging: str = "model", local_steps: int = 10,
                 participation: float = 1.0, init="different", random_state=None, monitor: Monitor | None = None):
        self.n_subspace = n_subspace
        self.distance_threshold = distance_threshold
        self.n_clusters = n_clusters
        self.proximity = proximity
        self.subspace = subspace
        self.hc_linkage = hc_linkage
        self.n_rounds = n_rounds
        self.step_size = step_size
        self.averaging = averaging
        self.local_steps = local_steps
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor

    def proximity_matrix(self, backend: ModelBackend) -> np.ndarray:
        """The server's ``(m, m)`` proximity matrix of principal angles in degrees (Alg. 1, lines 5-6)."""
        v = self._validate_params(backend)
        F, n = backend.client_features()
        kind = v["proximity"]
        if v["subspace"] == "client":
            p = check_int("n_subspace", v["n_subspace"], low=1, high=int(min(F.shape[2], n.min())))
            U, kept = client_subspaces(F, p), None
        else:
            if not hasattr(backend, "client_labels"):
                raise ValueError(f"subspace='per_class' needs the clients' class labels, which "
                                 f"{type(backend).__name__} does not give; use subspace='client'")
            p = check_int("n_subspace", v["n_subspace"], low=1, high=int(F.shape[2]))
            U, kept = class_subspaces(F, backend.client_labels(), n, p)
        if kind == "pairwise":
            A = pairwise_angles(U, kept)
        else:
            if kept is not None:  # a stacked basis is not orthonormal: principal angles between the spans
                U, ranks = _orthonormal(U)
            angles = principal_angles(U)
            if kind == "smallest":
                A = angles[..., 0]
            elif kept is None:
                A = angles.sum(-1)
            else:  # the min(rank_i, rank_j) angles between the spans (zero columns add 90-degree angles)
                r = np.minimum(ranks[:, None], ranks[None, :])
                A = np.where(np.arange(angles.shape[-1]) < r[..., None], angles, 0.0).sum(-1)
        A = 0.5 * (A + A.T)
        np.fill_diagonal(A, 0.0)
        return A

    def fit(self, backend: ModelBackend) -> PACFL:
        v = self._validate_params(backend)
        beta, k, linkage = v["distance_threshold"], v["n_clusters"], v["hc_linkage"]
        if beta is None and k is None:
            raise ValueError("PACFL needs distance_threshold (beta > 0, degrees) or n_clusters; got neither")
        rng = check_random_state(self.random_state)
        A = self.proximity_matrix(backend)
        labels = hierarchical_labels(A, linkage, beta, k)
        C = int(labels.max()) + 1
        history = History()
        history.record(0, labels)
        init = default_scheme(backend) if isinstance(self.init, str) and self.init == "different" else self.init
        models = backend.from_numpy(initial_models(backend, init, 1, C, rng)[0])
        models = train_clusters(backend, models, labels, v["n_rounds"], v["step_size"], v["averaging"],
                                v["local_steps"], v["participation"], rng, history, self.monitor, first_round=1)
        models_np = backend.to_numpy(models)
        self.result_ = FitResult(labels, models_np, C, history, rounds=self.n_rounds, extra={"proximity": A})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models_np, C, history
        return self
