"""SR-FCA -- Successive Refine Federated Clustering Algorithm (Vardhan, Ghosh, Mazumdar; SR-FCA Alg. 1-4).

``C_0 = ONE_SHOT(lambda, t)``, then ``C_r = REFINE(C_{r-1}, lambda)`` for
``r = 1..R``, where one REFINE is

1. TrimmedMeanGD (Alg. 3): one model per cluster of ``C_{r-1}``, trained by
   projected gradient descent whose direction is the coordinatewise
   ``TrMean_beta`` (Def. 3.2) of the cluster's client gradients;
2. RECLUSTER (Alg. 2): every client to its nearest cluster model;
3. MERGE (Alg. 4): clusters whose models are within ``lambda`` are joined
   (connected components); the merged model is the average of its parts.

The number of clusters is never an input: it is what ONE_SHOT and MERGE find.

``variant="public-code"`` runs SR-FCA as its public code (harshv834/sr-fca@a1b418f, the code behind the paper's
tables) runs it instead of as Alg. 1-4 are written; every difference is listed in :class:`SRFCA`'s docstring.
The pure graph steps (:func:`one_shot`, :func:`recluster`, :func:`merge`)
work on distance matrices; :class:`SRFCA` computes those distances through a
:class:`~synth.algorithms.backend.ModelBackend`, either ``l2`` between
models (Sec. 4) or the cross-cluster loss of Def. 5.1 (Sec. 5).
"""

from __future__ import annotations

import numpy as np

from ..validation import check_array, check_int, check_random_state, check_real
from .backend import ModelBackend, Models
from .common import assignment_weights, default_scheme
from .params import POSITIVE, Array, Boolean, Estimator, Int, Options, Real, shared
from .result import FitResult, History, Monitor

__all__ = [
    "SRFCA",
    "auto_threshold",
    "cluster_distances",
    "client_cluster_distances",
    "client_distances",
    "distance_quantiles",
    "local_models",
    "merge",
    "merge_weights",
    "one_shot",
    "pivot_clusters",
    "recluster",
    "trimmed_mean_gd",
]

DISTS = ("l2", "cross")
VARIANTS = ("paper", "public-code")


# ---------------------------------------------------------------- graph steps (pure)
def _components(adjacency: np.ndarray, weight: np.ndarray, min_size: int) -> np.ndarray:
    """Connected components of an undirected graph, kept when their total ``weight`` is ``>= min_size``.

    Kept components are numbered 0..C-1 in the order of their smallest node;
    nodes of dropped components (and nodes of weight 0, which are not in the
    graph at all) get -1.
    """
    n = adjacency.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    from scipy.sparse import csr_matrix  # imported where used (start-up time)
    from scipy.sparse.csgraph import connected_components

    _, comp = connected_components(csr_matrix(adjacency), directed=False)
    size = np.bincount(comp, weights=weight)
    keep = size >= min_size
    # np.unique's return_index is each component's smallest node, so this orders by smallest member
    comps, first = np.unique(comp, return_index=True)
    kept = comps[keep[comps]]
    order = kept[np.argsort(first[keep[comps]], kind="stable")]
    relabel = np.full(len(size), -1, dtype=np.int64)
    relabel[order] = np.arange(len(order))
    out = relabel[comp]
    out[weight <= 0] = -1
    return out


def _check_square(name: str, value) -> np.ndarray:
    arr = check_array(name, value, ndim=2, finite=False)
    if arr.shape[0] != arr.shape[1]:
        raise ValueError(f"{name} must be a square (n, n) matrix, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise ValueError(f"{name} must not contain NaN")
    return arr


def one_shot(dist: np.ndarray, threshold: float, min_size: int) -> np.ndarray:
    """ONE_SHOT's clustering step (SR-FCA Alg. 1): components of ``{(i, j) : dist(w_i, w_j) <= lambda}``.

    ``dist`` is the ``(m, m)`` matrix of distances between the clients' local
    models.  An edge joins ``i != j`` when ``dist[i, j] <= threshold`` (or
    ``dist[j, i]``: the graph is undirected).  Connected components with at
    least ``min_size`` (``t``) clients become clusters ``0..C-1``, numbered in
    the order of their smallest client.  Clients in smaller components get
    ``-1``: the paper keeps only components of size ``>= t`` and leaves the
    other clients to the next REFINE, whose RECLUSTER assigns every client to
    its nearest cluster model.
    """
    D = _check_square("dist", dist)
    threshold = check_real("threshold", threshold, low=0.0, low_inclusive=False)
    m = D.shape[0]
    min_size = check_int("min_size", min_size, low=1, high=max(m, 1))
    adjacency = (D <= threshold) | (D.T <= threshold)
    np.fill_diagonal(adjacency, False)
    return _components(adjacency, np.ones(m), min_size)


def pivot_clusters(adjacency: np.ndarray, rng: np.random.Generator, keep_above: int) -> np.ndarray:
    """The threshold graph's clusters as SR-FCA's public code forms them (sr-fca@a1b418f src/utils.py:276-290).

    Repeatedly a pivot drawn uniformly from the nodes left takes itself and its direct neighbours among them
    (not its connected component: a neighbour's neighbours may start clusters of their own); clusters of more
    than ``keep_above`` nodes are kept (ONE_SHOT passes ``t``, so ``t = 2`` keeps clusters of at least 3 clients;
    MERGE passes 0), numbered in the order they were formed; nodes of dropped clusters get -1.
    """
    A = _check_square("adjacency", np.asarray(adjacency, dtype=float)) != 0
    keep_above = check_int("keep_above", keep_above, low=0)
    n = A.shape[0]
    left = np.ones(n, dtype=bool)
    labels = np.full(n, -1, dtype=np.int64)
    kept = 0
    while left.any():  # one pass per cluster formed, each over all nodes at once
        pivot = int(rng.choice(np.flatnonzero(left)))
        members = left & A[pivot]
        members[pivot] = True
        left &= ~members
        if int(members.sum()) > keep_above:
            labels[members] = kept
            kept += 1
    return labels


def recluster(dist_to_clusters: np.ndarray) -> np.ndarray:
    """RECLUSTER (SR-FCA Alg. 2): ``C'(i) = argmin_c dist(w_i, omega_c)`` for a ``(m, C)`` distance matrix.

    Ties go to the lowest cluster id; NaN distances count as ``+inf``.
    """
    D = check_array("dist_to_clusters", dist_to_clusters, ndim=2, finite=False)
    if D.shape[1] == 0:
        raise ValueError("dist_to_clusters must have at least one cluster column, got shape "
                         f"{D.shape}")
    return np.nan_to_num(D, nan=np.inf).argmin(1).astype(np.int64)


def merge(cluster_dist: np.ndarray, threshold: float, min_size: int, cluster_sizes: np.ndarray) -> np.ndarray:
    """MERGE's graph step (SR-FCA Alg. 4): each cluster's merged-cluster id, or -1.

    Nodes are the clusters of ``C'_r`` with an edge where
    ``cluster_dist[c, c'] <= threshold``; every connected component whose
    clusters hold at least ``min_size`` (``t``) *clients in total* becomes one
    merged cluster (ids ``0..C-1`` in the order of their smallest cluster id).

    Reading of Alg. 4: it asks for "connected components of size >= t" with
    the same ``t`` as ONE_SHOT, where ``t`` counts users ("we only keep the
    clusters which have at least t users", Sec. 3.1; ``t <= c_min``, Remark
    4.2).  Counting *clusters* instead would delete every correct, unsplit
    cluster when ``t >= 2`` (the paper's experiments use ``t = 2``), so the
    size of a component is the number of clients in it.  Clusters with
    ``cluster_sizes == 0`` are not in ``rg(C'_r)``: they are no node and get -1.
    """
    D = _check_square("cluster_dist", cluster_dist)
    threshold = check_real("threshold", threshold, low=0.0, low_inclusive=False)
    sizes = check_array("cluster_sizes", cluster_sizes, ndim=1, shape=(D.shape[0],), nonnegative=True)
    total = int(round(float(sizes.sum())))
    min_size = check_int("min_size", min_size, low=1, high=max(total, 1))
    present = sizes > 0
    adjacency = (D <= threshold) | (D.T <= threshold)
    adjacency &= present[:, None] & present[None, :]
    np.fill_diagonal(adjacency, False)
    return _components(adjacency, sizes, min_size)


def merge_weights(merged_id: np.ndarray) -> np.ndarray:
    """SR-FCA Alg. 4: the merged model is the plain average of its component clusters' models, as ``(C, C')``
    weights for ``combine`` (``merged_id[c]`` is cluster ``c``'s merged cluster, -1 for one dropped)."""
    merged_id = np.asarray(merged_id, dtype=np.int64)
    C_new = int(merged_id.max(initial=-1)) + 1
    A = np.zeros((len(merged_id), C_new))
    ok = merged_id >= 0
    A[np.flatnonzero(ok), merged_id[ok]] = 1.0
    return A / np.maximum(A.sum(0, keepdims=True), 1.0)


def local_models(backend: ModelBackend, method: str, steps: int, lr: float) -> Models:
    """ONE_SHOT's local models ``w_{i,T}``: exact ERM or ``T`` local GD steps from 0 (SR-FCA Alg. 1)."""
    return backend.local_models(method, steps, lr)


def _losses_of_present(backend: ModelBackend, local: Models, absent: np.ndarray) -> np.ndarray:
    """``f_i(w_j)`` of the local models that arrived (the columns of absent ones NaN: their models are not sent)."""
    if not absent.any():
        return backend.losses(local)
    L = np.full((len(absent), len(absent)), np.nan)
    L[:, ~absent] = backend.losses(backend.take(local, np.flatnonzero(~absent)))
    return L


def _threshold_graph(dist: np.ndarray, threshold: float) -> np.ndarray:
    """The undirected graph ``dist <= threshold`` without self-loops."""
    A = (dist <= threshold) | (dist.T <= threshold)
    np.fill_diagonal(A, False)
    return A


# ------------------------------------------------------------------ distances

def client_distances(backend: ModelBackend, local: Models, dist: str, losses: np.ndarray | None = None) -> np.ndarray:
    """``(m, m)`` distances between the clients' local models: ``l2`` or Def. 5.1's ``(f_i(w_j) + f_j(w_i)) / 2``.

    ``losses`` may pass ``f_i(w_j)`` (``backend.losses(local)``) when already computed.
    """
    if dist == "l2":
        return backend.distances(local, local)
    L = backend.losses(local) if losses is None else losses
    return 0.5 * (L + L.T)


def client_cluster_distances(backend: ModelBackend, local: Models, models: Models, labels: np.ndarray,
                             dist: str, local_losses: np.ndarray | None = None,
                             model_losses: np.ndarray | None = None) -> np.ndarray:
    """``(m, C)`` distances of every client to every cluster model (RECLUSTER, SR-FCA Alg. 2 and Sec. 5).

    ``l2``: ``||w_i - omega_c||``.  ``cross``: Def. 5.1 with client ``i``'s model
    and loss replaced by the cluster's: ``(f_c(w_j) + f_j(omega_c)) / 2``, where
    the empirical cluster loss ``f_c`` is the ``n_i``-weighted average of the
    losses of the clients of cluster ``c`` in ``labels`` (the clustering the
    cluster models were trained on).  ``local_losses`` (``f_i(w_j)``) and
    ``model_losses`` (``f_i(omega_c)``) may be passed when already computed.
    """
    if dist == "l2":
        return backend.distances(local, models)
    C = int(labels.max()) + 1 if (labels >= 0).any() else 0
    A = assignment_weights(labels, C, backend.n_samples)  # (m, C): f_c = A[:, c] @ f_.
    L_local = backend.losses(local) if local_losses is None else local_losses  # f_i(w_j)
    f_c_at_local = A.T @ L_local  # (C, m): f_c(w_j)
    f_j_at_cluster = backend.losses(models) if model_losses is None else model_losses  # (m, C): f_j(omega_c)
    return 0.5 * (f_c_at_local.T + f_j_at_cluster)


def cluster_distances(backend: ModelBackend, models: Models, labels: np.ndarray, dist: str,
                      model_losses: np.ndarray | None = None) -> np.ndarray:
    """``(C, C)`` distances between cluster models (MERGE, SR-FCA Alg. 4 and Sec. 5).

    ``l2``: ``||omega_c - omega_c'||``.  ``cross``: ``(f_c(omega_c') + f_c'(omega_c)) / 2``
    with ``f_c`` the ``n_i``-weighted loss of the clients that ``labels`` puts
    in cluster ``c``; rows of empty clusters are ``+inf`` (they are no node).
    ``model_losses`` (``f_i(omega_c)``) may be passed when already computed.
    """
    if dist == "l2":
        return backend.distances(models, models)
    C = int(models.shape[0])
    A = assignment_weights(labels, C, backend.n_samples)  # (m, C)
    M = A.T @ (backend.losses(models) if model_losses is None else model_losses)  # M[c, c'] = f_c(omega_c')
    D = 0.5 * (M + M.T)
    empty = A.sum(0) == 0
    D[empty, :] = np.inf
    D[:, empty] = np.inf
    return D


# -------------------------------------------------------------- TrimmedMeanGD
def trimmed_mean_gd(backend: ModelBackend, labels: np.ndarray, n_clusters: int, beta: float, steps: int,
                    lr: float, start: Models, center: Models | None = None,
                    radius: float | None = None) -> Models:
    """TrimmedMeanGD (SR-FCA Alg. 3) for all clusters at once.

    ``omega_{c,t+1} = proj_W(omega_{c,t} - lr * TrMean_beta({grad f_i(omega_{c,t}) : C(i) = c}))``
    for ``t < steps``, from ``start`` (``(n_clusters, P)``, Alg. 3's ``w_0``
    per cluster).  ``W`` is the ball of radius ``radius`` around ``center``
    (no projection when ``radius`` is ``None``).  Clients with label -1 take
    no part.  Every cluster ``0..n_clusters-1`` must have a client.
    """
    assigned = np.flatnonzero(labels >= 0)
    lab = labels[assigned]
    clients = None if len(assigned) == len(labels) else assigned
    models = start
    lr_vec = np.full(n_clusters, lr)
    for _ in range(steps):  # loop over GD steps; clients and clusters are vectorised inside the backend
        G = backend.client_gradients(models, lab, clients)
        lost = getattr(backend, "lost", None)
        if lost:  # clients lost in this step (nets.flower) leave its trimmed mean
            g = _trimmed_mean_of_answers(backend, G, lab, ~np.isin(assigned, sorted(lost)), n_clusters, beta)
        else:
            g = backend.trimmed_mean(G, lab, n_clusters, beta)
        models = backend.step(models, g, lr_vec)
        if radius is not None:
            models = backend.project(models, center, radius)
    return models


# ---------------------------------------------------------------------- SRFCA
class SRFCA(Estimator):
    """Successive Refine Federated Clustering Algorithm (SR-FCA Alg. 1-4).

    Parameters
    ----------
    threshold : lambda > 0, the distance threshold of ONE_SHOT and MERGE
        (Lemma 4.6: best at ``(eps1 + eps2) / 2`` for ``l2``), or ``"auto"``: :func:`auto_threshold` of ONE_SHOT's
        pairwise distances (``threshold_`` after the fit; ``distance_quantiles_`` shows the distances).
    min_size : t >= 1, the least number of clients of a kept cluster
        (Remark 4.2 asks ``t <= c_min``; the experiments use ``t = 2``).
    beta : trimming level of ``TrMean_beta``, in ``[0, 1/2)`` (Def. 3.2).
    n_refine : R >= 0, the number of REFINE steps.
    local : ``"erm"`` (exact local ERM) or ``"gd"`` (``local_train_steps`` GD
        steps of size ``local_step_size`` from 0) for ONE_SHOT's ``w_{i,T}``.
    trmean_steps, trmean_step_size : T and eta of TrimmedMeanGD (Alg. 3).
    diameter : D, the diameter of ``W`` (a ball around ``center``); ``None``
        means ``W = R^P`` (no projection).
    start : ``(P,)`` Alg. 3's common start ``w_0`` (default: as ``center`` says).
    center : ``(P,)`` centre of ``W`` (default 0) and, when given (and ``start`` is not), Alg. 3's
        common start ``w_0``; without it ``w_0`` is one draw of the backend's
        default initialisation (Bernoulli for the GLMs, the module's own
        init for networks, where an all-zero start would be degenerate).
    dist : ``"l2"`` (Sec. 4) or ``"cross"`` (cross-cluster loss, Def. 5.1).
    resample : Thm 4.11: before REFINE ``r`` use the backend's round-``r``
        identity view (fresh samples under ``regime="fresh"``) and recompute
        the local models on it; with fixed data the view is the data itself.
    random_state : seed of ``w_0`` when ``center`` is not given (the only
        random draw of SR-FCA; resampled data come from the backend's seed).
    variant : ``"paper"`` (Alg. 1-4 as written; the default) or ``"public-code"``: SR-FCA as its public code
        (sr-fca@a1b418f) runs it for the paper's tables.  There:

        * ONE_SHOT's local models start from one draw of the backend's initialisation *per client*
          (``src/clustering/sr_fca.py``:23-26, one ``ClientTrainer`` each) and train with the backend's optimiser
          (the code's Adam, batch 50, is the backend's configuration, not the estimator's);
        * the threshold graph is clustered by :func:`pivot_clusters` (random pivot and its direct neighbours,
          clusters of more than ``t`` clients; ``src/utils.py``:276-290), not by connected components;
        * each REFINE trains every cluster from a *fresh* draw of the initialisation
          (``sr_fca.py``:104-119, a new ``ClusterTrainer``) for ``trmean_steps`` rounds; a round samples
          ``clients_per_round`` clients of the cluster without replacement (all when it has fewer), which train
          *one after another* on the cluster model's own tensors, ``refine_local_steps`` optimiser steps each (a
          fresh optimiser per client), and the cluster model becomes the coordinatewise trimmed mean of the
          weights each ended with, kept positions ``int(beta J)`` .. ``int((1 - beta) J)`` (``src/trainers.py``:
          190-193, 354-368, 435-470; see ``_code_refine_models``);
        * RECLUSTER drops clusters of fewer than ``t`` clients (``sr_fca.py``:175-199), and MERGE then scores
          merged cluster ``j`` with the model trained for cluster ``j`` *before* that renumbering (the code
          renumbers ``cluster_map`` but not ``cluster_trainers``, ``sr_fca.py``:193-199 and 204-206); MERGE
          pivot-clusters the clusters (threshold ``lambda``, every cluster kept) and joins their clients without
          averaging models (``sr_fca.py``:225-235): the next REFINE starts afresh anyway;
        * the code reports the accuracy of the last REFINE's models on the clients they were trained on, before
          that REFINE's RECLUSTER and MERGE, leaving unclustered clients out (``sr_fca.py``:60, 104-119):
          ``result_.extra["scored_labels"]`` and ``["scored_models"]`` hold that clustering and those models.
          ``labels_`` is still the final clustering ``C_R`` (clients without a cluster put with their nearest
          final model) and ``models_`` its models: merged parts averaged, the toolkit's addition, since the
          code has no model for a merged cluster.
    clients_per_round : clients of a cluster sampled per REFINE round (``"public-code"`` only; the code's 10).
    refine_local_steps : optimiser steps per sampled client and REFINE round (``"public-code"`` only; the
        code's 5).
    monitor : optional ``monitor(r, models (C, P), labels (m,)) -> dict``
        called on ``C_0`` (models: the ``n_i``-weighted means of each
        cluster's local models) and on every ``C_r`` (models: MERGE's merged
        models); its values go into the history.

    Lost clients (a backend with a ``lost`` attribute, which names the clients that did not answer its last call:
    ``nets.flower``'s; variant ``"paper"``): a client whose local model did not arrive, or lost in the cross losses,
    is no node of ONE_SHOT's graph, and with ``dist="l2"`` its local model is asked for again before each REFINE;
    one lost in a TrimmedMeanGD step leaves that step's trimmed mean (a cluster none of whose clients answered keeps
    its model for the step); one lost in RECLUSTER keeps its cluster of ``C_{r-1}`` and MERGE's cluster losses
    average over the clients that answered; one lost in the last placement stays unassigned.  In-process backends
    lose no client and take none of these paths.

    Attributes
    ----------
    labels_ : ``(m,)`` final clustering: ``C_R``, where clients that the last
        MERGE left without a cluster (-1) are put with their nearest final
        cluster model (one RECLUSTER with those models, no training).
        ``result_.extra["refine_labels"]`` keeps ``C_R`` as Alg. 1 returns it.
    models_ : ``(C, P)`` the final cluster models (after ``R = 0``: the
        ``n_i``-weighted means of the local models of each ONE_SHOT cluster).
    n_clusters_ : C, found by the algorithm.
    history_ : ``C_0`` at round 0 and ``C_r`` at round ``r`` (``-1`` =
        unassigned), with ``n_clusters`` and ``unassigned`` per step and the
        monitor's values.
    result_ : :class:`~synth.algorithms.result.FitResult`; ``extra`` has
        ``one_shot_labels`` (C_0), ``refine_labels`` (C_R),
        ``recluster_labels`` (``C'_r`` of every REFINE), ``local_models``
        (the last ``w_i`` used, in the backend's array type: no copy, as it
        may be large for networks) and ``status`` (``"ok"`` or why no
        cluster survived).
    """

    _parameter_constraints = {
        **shared("threshold", "min_size", "local", "local_train_steps", "local_step_size", "dist", "random_state",
                 "monitor"),
        "threshold": [POSITIVE, Options("auto")],
        "start": [None, Array(1)],
        "beta": [Real(0.0, 0.5, closed="left")],
        "n_refine": [Int(0, None)],
        "trmean_steps": [Int(1, None)],
        "trmean_step_size": [POSITIVE],
        "diameter": [None, POSITIVE],
        "center": [None, Array(1)],
        "resample": [Boolean()],
        "variant": [Options(*VARIANTS)],
        "clients_per_round": [Int(1, None)],
        "refine_local_steps": [Int(1, None)],
    }

    def __init__(self, threshold: float, min_size: int = 2, beta: float = 0.1, n_refine: int = 2,
                 local: str = "erm", local_train_steps: int = 100, local_step_size: float = 0.1,
                 trmean_steps: int = 50, trmean_step_size: float = 0.1, diameter: float | None = None,
                 center=None, dist: str = "l2", resample: bool = False, variant: str = "paper",
                 clients_per_round: int = 10, refine_local_steps: int = 5, random_state=None,
                 monitor: Monitor | None = None, start=None):
        self.threshold = threshold
        self.start = start
        self.min_size = min_size
        self.beta = beta
        self.n_refine = n_refine
        self.local = local
        self.local_train_steps = local_train_steps
        self.local_step_size = local_step_size
        self.trmean_steps = trmean_steps
        self.trmean_step_size = trmean_step_size
        self.diameter = diameter
        self.center = center
        self.dist = dist
        self.resample = resample
        self.variant = variant
        self.clients_per_round = clients_per_round
        self.refine_local_steps = refine_local_steps
        self.random_state = random_state
        self.monitor = monitor

    def _validate(self, backend: ModelBackend) -> dict:
        P = backend.n_params
        v = self._validate_params(backend)
        v["radius"] = None if v["diameter"] is None else 0.5 * v["diameter"]
        v["center"] = np.zeros(P) if self.center is None else check_array("center", self.center, ndim=1,
                                                                          shape=(P,))
        rng = check_random_state(self.random_state)
        if self.start is not None:
            v["w0"] = check_array("start", self.start, ndim=1, shape=(P,))
        elif self.center is None:
            v["w0"] = backend.to_numpy(backend.init_models(1, default_scheme(backend), rng))[0]
        else:
            v["w0"] = v["center"]
        if v["threshold"] == "auto" and v["variant"] != "paper":
            raise ValueError("threshold='auto' is defined for variant='paper' only")
        v["rng"] = rng
        v["resumable"] = hasattr(backend, "lost")  # a backend that may lose clients (nets.flower): SR-FCA resumes
        if v["variant"] == "public-code" and self.resample:
            raise ValueError("resample=True (Thm 4.11) is defined for variant='paper' only; the public code never "
                             "resamples")
        return v

    def fit(self, backend: ModelBackend) -> SRFCA:
        v = self._validate(backend)
        if v["variant"] == "public-code":
            return self._fit_public_code(backend, v)
        lam, t, dist = v["threshold"], v["min_size"], v["dist"]
        center_b = backend.from_numpy(v["center"][None])
        history = History()
        status = "ok"

        # ONE_SHOT
        local = local_models(backend, v["local"], v["local_train_steps"], v["local_step_size"])
        # a backend that may lose clients (nets.flower): a client whose local model did not arrive, or lost in the
        # cross losses, is no node of ONE_SHOT's graph (distance inf); with l2 it is asked for it again before each
        # REFINE, a client lost in RECLUSTER keeps its cluster, one lost in a TrimmedMeanGD step leaves that step
        absent = np.isin(np.arange(backend.n_clients), sorted(getattr(backend, "lost", ())))
        local_losses = None
        if dist == "cross":
            local_losses = _losses_of_present(backend, local, absent)
        D = client_distances(backend, local, dist, local_losses)
        ok = ~np.isnan(np.diag(D))  # the clients whose distances arrived (all, in process)
        self.distance_quantiles_ = distance_quantiles(D[np.ix_(ok, ok)])
        if lam == "auto":  # the largest gap of the sorted pairwise distances; MERGE uses the same number
            lam = v["threshold"] = auto_threshold(D[np.ix_(ok, ok)])
        self.threshold_ = lam
        labels = one_shot(np.nan_to_num(D, nan=np.inf) if v["resumable"] else D, lam, t)
        one_shot_labels = labels.copy()
        models = self._cluster_means(backend, local, labels, absent)
        self._record(history, 0, models, labels, backend)
        recluster_history = []
        view = backend

        for r in range(1, v["n_refine"] + 1):
            if labels.max(initial=-1) < 0:
                status = f"no cluster left before REFINE {r} (no component of >= min_size={t} clients)"
                break
            view = backend.at_round(r)[0] if self.resample else backend
            if self.resample and view is not backend:
                # Thm 4.11: fresh samples, and the local models recomputed on them as in ONE_SHOT
                local = local_models(view, v["local"], v["local_train_steps"], v["local_step_size"])
                local_losses = view.losses(local) if dist == "cross" else None
            elif absent.any() and dist == "l2":  # the local models that did not arrive, asked again
                ask = np.flatnonzero(absent)
                rows = view.local_models(v["local"], v["local_train_steps"], v["local_step_size"], clients=ask)
                got = ask[~np.isin(ask, sorted(view.lost))]
                where = np.arange(len(absent))
                where[got] = len(absent) + np.flatnonzero(np.isin(ask, got))  # the new rows, after the old ones
                local = view.take(view.concat([local, rows]), where)
                absent[got] = False
            labels, models, reclustered = self._refine(view, local, local_losses, labels, v, center_b)
            recluster_history.append(reclustered)
            self._record(history, r, models, labels, backend)

        # the data and local models of the last REFINE (fresh ones when resampling)
        return self._finish(view, local, local_losses, labels, models, history, v, status,
                            f"no cluster of >= min_size={t} clients (threshold={lam} too small or min_size too large)",
                            {"one_shot_labels": one_shot_labels, "recluster_labels": recluster_history})

    def _finish(self, view, local, local_losses, labels, models, history, v, status, why_empty, extra) -> SRFCA:
        """``C_R`` as Alg. 1 returns it, each client it leaves without a cluster put with its nearest final model
        (one RECLUSTER, no training), and the result."""
        refine_labels, final = labels.copy(), labels
        if labels.max(initial=-1) < 0:
            status = why_empty if status == "ok" else status
            models_np = np.zeros((0, view.n_params))
        else:
            if (labels < 0).any():
                if v["resumable"] and local_losses is not None:
                    local_losses = np.where((labels < 0)[:, None], 0.0, local_losses)
                D = client_cluster_distances(view, local, models, labels, v["dist"], local_losses)
                nearest = np.where(np.isnan(D).any(1), -1, recluster(D)) if v["resumable"] else recluster(D)
                final = np.where(labels >= 0, labels, nearest)
            models_np = view.to_numpy(models)
        # communication rounds: ONE_SHOT's upload of the local models, then every REFINE's rounds
        rounds = 1 + v["trmean_steps"] * (len(history) - 1)
        n_found = int(models_np.shape[0])
        self.result_ = FitResult(labels=final, models=models_np, n_clusters=n_found, history=history, rounds=rounds,
                                 extra={"refine_labels": refine_labels, "local_models": local, "status": status,
                                        **extra})
        self.labels_, self.models_, self.n_clusters_, self.history_ = final, models_np, n_found, history
        return self

    # -- the public code's SR-FCA (variant="public-code") ------------------------------
    def _fit_public_code(self, backend: ModelBackend, v: dict) -> SRFCA:
        """SR-FCA as sr-fca@a1b418f runs it (the differences are listed in the class docstring)."""
        lam, t, dist, rng = v["threshold"], v["min_size"], v["dist"], v["rng"]
        scheme = default_scheme(backend)
        history = History()
        status = "ok"
        starts = backend.to_numpy(backend.init_models(backend.n_clients, scheme, rng))
        local = backend.local_models(v["local"], v["local_train_steps"], v["local_step_size"], init=starts)
        local_losses = backend.losses(local) if dist == "cross" else None
        D = client_distances(backend, local, dist, local_losses)
        self.distance_quantiles_, self.threshold_ = distance_quantiles(D), lam  # as the paper variant reports them
        labels = pivot_clusters(_threshold_graph(D, lam), rng, t)
        one_shot_labels = labels.copy()
        models = self._cluster_means(backend, local, labels)
        self._record(history, 0, models, labels, backend)
        scored_labels, scored_models, recluster_history = labels.copy(), models, []
        for r in range(1, v["n_refine"] + 1):
            if labels.max(initial=-1) < 0:
                status = f"no cluster left before REFINE {r} (no cluster of more than min_size={t} clients)"
                break
            C = int(labels.max()) + 1
            omega = self._code_refine_models(backend, labels, C, v, scheme, rng)
            scored_labels, scored_models = labels.copy(), omega
            L_omega = backend.losses(omega) if dist == "cross" else None
            reclustered = recluster(client_cluster_distances(backend, local, omega, labels, dist, local_losses,
                                                             L_omega))
            # clusters of fewer than t clients are dropped and the rest renumbered; the models keep their old
            # numbers, so MERGE scores new cluster j with old cluster j's model (sr_fca.py:193-199, 204-206)
            sizes = np.bincount(reclustered, minlength=C)
            kept = sizes >= t
            renumber = np.where(kept, np.cumsum(kept) - 1, -1)
            reclustered = renumber[reclustered]
            recluster_history.append(reclustered.copy())
            C_kept = int(kept.sum())
            if C_kept == 0:
                labels = reclustered
                models = backend.from_numpy(np.zeros((0, backend.n_params)))
                self._record(history, r, models, labels, backend)
                status = f"no cluster of >= min_size={t} clients after RECLUSTER {r}"
                break
            merge_models = backend.take(omega, np.arange(C_kept))
            L_merge = None if L_omega is None else L_omega[:, :C_kept]
            merged_id = pivot_clusters(
                _threshold_graph(cluster_distances(backend, merge_models, reclustered, dist, L_merge), lam), rng, 0)
            labels = np.where(reclustered >= 0, merged_id[np.maximum(reclustered, 0)], -1)
            models = backend.combine(merge_weights(merged_id), merge_models)
            self._record(history, r, models, labels, backend)

        return self._finish(backend, local, local_losses, labels, models, history, v, status,
                            f"no cluster of more than min_size={t} clients (threshold={lam} too small)",
                            {"one_shot_labels": one_shot_labels, "recluster_labels": recluster_history,
                             "scored_labels": scored_labels, "scored_models": backend.to_numpy(scored_models)})

    def _code_refine_models(self, backend, labels, C, v, scheme, rng):
        """One REFINE's cluster models as the public code trains them: a fresh model per cluster; each round
        ``clients_per_round`` sampled clients per cluster train *one after another* from the cluster's current
        weights (``refine_local_steps`` optimiser steps each, a fresh optimiser per client), and the cluster model
        becomes the public code's trimmed mean of the weights each client ended with.

        One after another: ``send_to_clients`` hands every sampled client the cluster model's own tensors
        (``load_wts_from_dict`` sets ``param.data = wts[name]``, sr-fca@a1b418f src/trainers.py:190-193, 435-438),
        the clients train in turn (:367-368) with in-place optimiser steps, so each continues from where the
        previous one stopped; each client's ``model.cpu()`` at the end of its training (:303) copies its weights
        off the GPU, so ``average_model`` (:441-470) trims over the points of that one trajectory.  (On a machine
        without a GPU ``.cpu()`` copies nothing and the code would average the last point alone.)"""
        omega = backend.init_models(C, scheme, rng)
        q, beta = v["clients_per_round"], v["beta"]
        members = np.flatnonzero(labels >= 0)
        sizes = np.bincount(labels[members], minlength=C)
        for _ in range(v["trmean_steps"]):  # loop over rounds; clusters are vectorised in the backend
            # q clients of each cluster without replacement (the q smallest of one uniform key per client), in turn
            key = rng.random(len(members))
            order = np.lexsort((key, labels[members]))
            lab_sorted = labels[members][order]
            turn = np.arange(len(order)) - np.searchsorted(lab_sorted, lab_sorted, side="left")
            keep = turn < q
            chosen, lab, turn = members[order[keep]], lab_sorted[keep], turn[keep]
            current, ends, end_labels = omega, [], []
            for k in range(int(min(q, sizes.max(initial=0)))):  # the k-th client of every cluster at once
                at = turn == k
                W = backend.local_update(current, lab[at], v["refine_local_steps"], v["trmean_step_size"],
                                         clients=chosen[at])
                moved = np.zeros((int(at.sum()), C))
                moved[np.arange(int(at.sum())), lab[at]] = 1.0
                stay = np.diag(1.0 - moved.sum(0))  # clusters with no k-th client keep their weights
                current = backend.combine(moved, W) + backend.combine(stay, current)
                ends.append(W)
                end_labels.append(lab[at])
            omega = backend.trimmed_mean(backend.concat(ends), np.concatenate(end_labels), C, beta,
                                         rule="public-code")
        return omega

    # -- one REFINE step (Alg. 1) ------------------------------------------------
    def _refine(self, view, local, local_losses, labels, v, center_b):
        """TrimmedMeanGD on ``C_{r-1}`` -> RECLUSTER -> MERGE; returns ``(C_r, merged models, C'_r)``."""
        dist, lam, t = v["dist"], v["threshold"], v["min_size"]
        C = int(labels.max()) + 1
        start = view.from_numpy(np.repeat(v["w0"][None], C, axis=0))
        omega = trimmed_mean_gd(view, labels, C, v["beta"], v["trmean_steps"], v["trmean_step_size"], start,
                                center_b if v["radius"] is not None else None, v["radius"])
        L_omega = view.losses(omega) if dist == "cross" else None  # f_i(omega_c), shared by both steps
        if v["resumable"] and local_losses is not None:  # unassigned clients' rows weigh 0: no NaN of theirs counts
            local_losses = np.where((labels < 0)[:, None], 0.0, local_losses)
        # RECLUSTER: every client (also the ones ONE_SHOT or MERGE left out) to its nearest cluster
        D = client_cluster_distances(view, local, omega, labels, dist, local_losses, L_omega)
        reclustered, merging = recluster(D), None
        if v["resumable"]:  # a client lost here (or without its local model) keeps its cluster of C_{r-1}
            gone = np.isnan(D).any(1)
            reclustered = np.where(gone, labels, reclustered)
            merging = np.where(gone, -1, reclustered)  # MERGE's cluster losses f_c: the clients that answered
            L_omega = None if L_omega is None else np.where(gone[:, None], 0.0, L_omega)
        sizes = np.bincount(reclustered[reclustered >= 0], minlength=C).astype(np.float64)
        merged_id = merge(cluster_distances(view, omega, reclustered if merging is None else merging, dist, L_omega),
                          lam, t, sizes)
        new_labels = np.where(reclustered >= 0, merged_id[np.maximum(reclustered, 0)], -1)
        C_new = int(merged_id.max(initial=-1)) + 1
        if C_new == 0:
            return new_labels, view.from_numpy(np.zeros((0, view.n_params))), reclustered
        return new_labels, view.combine(merge_weights(merged_id), omega), reclustered

    def _cluster_means(self, backend, local, labels, absent: np.ndarray | None = None):
        C = int(labels.max(initial=-1)) + 1
        if C == 0:
            return backend.from_numpy(np.zeros((0, backend.n_params)))
        if absent is not None and absent.any():  # an absent local model's row (NaN) has weight 0: leave it out
            idx = np.flatnonzero(labels >= 0)
            return backend.combine(assignment_weights(labels[idx], C, np.asarray(backend.n_samples)[idx]),
                                   backend.take(local, idx))
        return backend.combine(assignment_weights(labels, C, backend.n_samples), local)

    def _record(self, history, r, models, labels, backend) -> None:
        extra = {}
        if self.monitor is not None:
            extra = self.monitor(r, backend.to_numpy(models), labels.copy())
        history.record(r, labels, n_clusters=int(labels.max(initial=-1)) + 1,
                       unassigned=int((labels < 0).sum()), **extra)


def _trimmed_mean_of_answers(backend: ModelBackend, G: Models, labels: np.ndarray, answered: np.ndarray,
                             n_clusters: int, beta: float) -> Models:
    """``TrMean_beta`` of each cluster's answered gradients; a cluster none of whose clients answered gets no
    direction (its model stays where it is for this step)."""
    present = np.unique(labels[answered])
    zeros = backend.from_numpy(np.zeros((1, backend.n_params)))
    if not len(present):
        return backend.take(zeros, np.zeros(n_clusters, dtype=np.int64))
    g = backend.trimmed_mean(backend.take(G, np.flatnonzero(answered)), np.searchsorted(present, labels[answered]),
                             len(present), beta)
    where = np.full(n_clusters, len(present))  # row len(present) of the stack below: no direction
    where[present] = np.arange(len(present))
    return backend.take(backend.concat([g, zeros]), where)


# ---------------------------------------------------------------- threshold from the distances
# the quantiles of ONE_SHOT's pairwise distances that a run reports (the distribution a threshold cuts)
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)
QUANTILE_NAMES = ("min", "10%", "25%", "median", "75%", "90%", "max")
AUTO_MIN_RATIO = 2.0  # SR-FCA's threshold="auto": the smallest ratio of neighbouring sorted distances that is a gap


def distance_quantiles(D: np.ndarray) -> list[float]:
    """The :data:`QUANTILES` of the distances between distinct clients (``D``'s upper triangle); [] for fewer
    than two clients."""
    D = np.asarray(D, dtype=np.float64)
    if D.ndim != 2 or len(D) < 2:
        return []
    upper = D[np.triu_indices(len(D), 1)]
    upper = upper[np.isfinite(upper)]
    return [float(q) for q in np.quantile(upper, QUANTILES)] if len(upper) else []


def auto_threshold(D: np.ndarray) -> float:
    """SR-FCA's ``threshold="auto"``: a cut at the largest gap of the sorted pairwise distances ``D`` (upper
    triangle, finite values).

    The gap is the largest ratio ``b / a`` of neighbours ``a < b`` among the positive distances, and the threshold
    their geometric mean ``sqrt(a * b)``; a ratio below :data:`AUTO_MIN_RATIO` (2) is no gap.  Without one, zero
    distances (identical local models) against positive ones are the gap (threshold: half the smallest positive
    distance), and otherwise the clients are one group (threshold: the largest distance, every pair joined).
    """
    D = np.asarray(D, dtype=np.float64)
    d = D[np.triu_indices(len(D), 1)] if D.ndim == 2 else np.zeros(0)
    d = np.sort(d[np.isfinite(d)])
    positive = d[d > 0]
    if len(positive) >= 2:
        ratios = positive[1:] / positive[:-1]
        i = int(ratios.argmax())
        if ratios[i] >= AUTO_MIN_RATIO:
            return float(np.sqrt(positive[i] * positive[i + 1]))
    if len(positive) and len(positive) < len(d):
        return float(positive[0] / 2)
    return float(positive[-1]) if len(positive) else float(np.finfo(np.float64).tiny)
