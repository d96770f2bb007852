"""CLoVE -- Clustering of Loss Vector Embeddings (Bhatia et al., CLoVE Alg. 1).

Every round each participating client evaluates all models and sends its
loss vector ``L^i = (f_i(theta_1), ..., f_i(theta_K))``; the server clusters
the loss vectors (k-means or agglomerative), maps client clusters to models
by a min-cost bipartite matching (cost = summed losses of a cluster's clients
on a model) and trains each model on its clients by ``n_i``-weighted model
averaging (option I) or gradient averaging (option II).

Beyond Alg. 1 this module offers the paper's ablations and robustness
experiments -- square-root loss vectors (SLV, Sec. 4), agglomerative
clustering and "no matching" (Sec. 5.3), identical/different initial models
and random/evaluation-based first-round assignment (Fig. 2) -- and an
unknown-K mode (not in the paper) that keeps ``max_clusters`` models and
picks the number of client clusters each round by the silhouette score.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from threadpoolctl import ThreadpoolController

from ..validation import check_array, check_int, check_random_state
from .backend import ModelBackend
from .common import answered, apply_round, assignment_weights, default_scheme, initial_models, participants
from .params import POSITIVE, Boolean, Estimator, Int, Options, shared
from .result import FitResult, History, Monitor

__all__ = ["CLoVE", "cluster_vectors", "loss_vectors", "match_clusters", "order_by_smallest_client", "used_models"]

CLUSTERINGS = ("kmeans", "agglomerative")
FIRST_ROUNDS = ("random", "evaluation")


def loss_vectors(losses: np.ndarray, sqrt: bool) -> np.ndarray:
    """The clients' embeddings: loss vectors (LV, Alg. 1 line 7) or square-root loss vectors (SLV, Sec. 4).

    ``losses`` is ``(c, K)``, ``losses[i, j] = f_i(theta_j)``; returns the
    same shape.  SLV uses ``sqrt(f_i(theta_j))`` (losses are non-negative;
    tiny negative rounding errors are clipped to 0).
    """
    L = check_array("losses", losses, ndim=2)
    if not isinstance(sqrt, (bool, np.bool_)):
        raise TypeError(f"sqrt must be True or False, got {sqrt!r}")
    return np.sqrt(np.maximum(L, 0.0)) if sqrt else L.copy()


def match_clusters(cluster_labels: np.ndarray, losses: np.ndarray, n_clusters: int) -> np.ndarray:
    """Min-cost bipartite matching of client clusters to models (CLoVE Alg. 1 line 10).

    ``cluster_labels`` ``(c,)`` in ``0..n_clusters-1``, ``losses`` ``(c, K)``
    with ``K >= n_clusters`` models.  The cost of giving cluster ``a`` model
    ``j`` is ``sum_{i in a} losses[i, j]``; the matching minimises the total
    cost over one-to-one assignments (``scipy.optimize.linear_sum_assignment``).
    Returns ``model`` of shape ``(n_clusters,)``: cluster ``a`` gets model
    ``model[a]`` (so client ``i`` gets ``model[cluster_labels[i]]``).
    """
    L = check_array("losses", losses, ndim=2)
    n_clusters = check_int("n_clusters", n_clusters, low=1, high=L.shape[1])
    labels = check_array("cluster_labels", cluster_labels, ndim=1, shape=(L.shape[0],), dtype=np.int64)
    if len(labels) and (labels.min() < 0 or labels.max() >= n_clusters):
        raise ValueError(f"cluster_labels must be in [0, {n_clusters - 1}], got range "
                         f"[{labels.min()}, {labels.max()}]")
    cost = np.zeros((n_clusters, L.shape[1]))
    np.add.at(cost, labels, L)
    from scipy.optimize import linear_sum_assignment  # imported where used (start-up time)

    rows, cols = linear_sum_assignment(cost)
    model = np.empty(n_clusters, dtype=np.int64)
    model[rows] = cols
    return model


def order_by_smallest_client(cluster_labels: np.ndarray, n_clusters: int) -> np.ndarray:
    """The "no matching" ablation (CLoVE Sec. 5.3): clusters ordered by smallest client id get models 0, 1, ...

    Returns ``model`` ``(n_clusters,)`` as :func:`match_clusters` does
    (empty clusters come last).
    """
    labels = np.asarray(cluster_labels, dtype=np.int64)
    first = np.full(n_clusters, np.iinfo(np.int64).max)
    np.minimum.at(first, labels, np.arange(len(labels)))
    model = np.empty(n_clusters, dtype=np.int64)
    model[np.argsort(first, kind="stable")] = np.arange(n_clusters)
    return model


def cluster_vectors(vectors: np.ndarray, k: int, method: str, seed: int, n_init: int = 10) -> np.ndarray:
    """CLoVE Alg. 1 line 9 / Sec. 5.3: cluster the loss vectors into ``k`` groups, k-means or (Ward) agglomerative."""
    if k == 1:
        return np.zeros(len(vectors), dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering, KMeans  # imported where used (start-up time)
    from sklearn.exceptions import ConvergenceWarning

    # one OpenMP thread: on a few dozen points thread start-up dominates (about 10x slower on a busy machine),
    # and the result is then the same on every machine
    with warnings.catch_warnings(), _one_openmp_thread():
        # identical loss vectors (e.g. identical models) give fewer distinct points than k; that is data, not a bug
        warnings.simplefilter("ignore", ConvergenceWarning)
        if method == "kmeans":
            return KMeans(n_clusters=k, n_init=n_init, random_state=seed).fit_predict(vectors).astype(np.int64)
        return AgglomerativeClustering(n_clusters=k).fit_predict(vectors).astype(np.int64)


_OPENMP: dict = {}


def _one_openmp_thread():
    """``threadpool_limits(1, user_api="openmp")`` through one controller per process: building a limiter scans every
    loaded library (3-6 ms with torch loaded), and CLoVE clusters every round."""
    if _OPENMP.get("pid") != os.getpid():
        _OPENMP.update(pid=os.getpid(), controller=ThreadpoolController())
    return _OPENMP["controller"].limit(limits=1, user_api="openmp")


def used_models(assign: np.ndarray, n_models: int) -> np.ndarray | None:
    """CLoVE's unknown-K pruning: the models some client cluster was matched to, in order (None when all are)."""
    used = np.unique(assign)
    return None if len(used) == n_models else used


class CLoVE(Estimator):
    """Clustering of Loss Vector Embeddings (CLoVE Alg. 1).

    Parameters
    ----------
    n_clusters : K, the number of models and of client clusters; ``None`` =
        unknown K (not in the paper): start with ``max_clusters`` models; each
        round the number of client clusters is the ``k`` in ``[2, number of
        models]`` with the best silhouette score of the loss-vector clustering
        (ties: smallest k; silhouette is undefined for k = 1, so this mode
        always splits), and in rounds where every client takes part the
        models matched to no client cluster are dropped for good.
    max_clusters : the number of models unknown-K mode starts with.
    sqrt_loss : cluster square-root loss vectors (SLV, Sec. 4) instead of losses.
    clustering : ``"kmeans"`` (Alg. 1) or ``"agglomerative"`` (Sec. 5.3, Ward).
    matching : ``True``: min-cost bipartite matching; ``False``: the "no
        matching" ablation (cluster ordered k-th by smallest client id gets model k).
    averaging : ``"model"`` (option I, ``local_steps`` local GD steps) or
        ``"gradient"`` (option II); both weight client ``i`` by ``n_i``.
    init : ``"same"`` (all models one draw, Fig. 2 init:s), ``"different"``
        (independent draws of the backend's default scheme, init:d), any
        scheme the backend knows, or an array ``(K, P)``.
    first_round : ``"evaluation"`` (cluster loss vectors, as every round) or
        ``"random"`` (clients assigned to models uniformly at random in round 0) -- Fig. 2.
    n_rounds, step_size, local_steps, participation : T, gamma, tau, |M^(t)|/M.
    kmeans_n_init : k-means restarts per clustering step.
    random_state, monitor : as in :class:`~synth.algorithms.ifca.IFCA`.

    Attributes
    ----------
    labels_ : the model of every client from one more clustering step on the
        final models (all clients); ``models_`` the models (unknown K: only
        the models some client uses, relabelled ``0..C-1``); ``n_clusters_``
        the number of models in use; ``history_`` the per-round assignment
        (``-1`` = not participating) with the objective ``loss`` and ``k``
        (client clusters formed that round); ``result_``.
    """

    _parameter_constraints = {
        **shared("averaging", "init", "n_rounds", "local_steps", "participation", "kmeans_n_init", "random_state",
                 "monitor"),
        "n_clusters": [None, Int(1, "n_clients")],  # None: unknown K (silhouette)
        "max_clusters": [Int()],  # an integer; its range [2, m - 1] is checked at fit in unknown-K mode, which reads it
        "sqrt_loss": [Boolean()],
        "clustering": [Options(*CLUSTERINGS)],
        "matching": [Boolean()],
        "first_round": [Options(*FIRST_ROUNDS)],
        "step_size": [POSITIVE],  # one gamma (no restarts over step sizes)
    }

    def __init__(self, n_clusters: int | None = 2, max_clusters: int = 8, sqrt_loss: bool = False,
                 clustering: str = "kmeans", matching: bool = True, averaging: str = "model", init="different",
                 first_round: str = "evaluation", n_rounds: int = 100, step_size: float = 0.1,
                 local_steps: int = 10, participation: float = 1.0, kmeans_n_init: int = 10, random_state=None,
                 monitor: Monitor | None = None):
        self.n_clusters = n_clusters
        self.max_clusters = max_clusters
        self.sqrt_loss = sqrt_loss
        self.clustering = clustering
        self.matching = matching
        self.averaging = averaging
        self.init = init
        self.first_round = first_round
        self.n_rounds = n_rounds
        self.step_size = step_size
        self.local_steps = local_steps
        self.participation = participation
        self.kmeans_n_init = kmeans_n_init
        self.random_state = random_state
        self.monitor = monitor

    def _validate(self, backend: ModelBackend) -> int:
        m = backend.n_clients
        v = self._validate_params(backend)
        if v["n_clusters"] is not None:
            return v["n_clusters"]
        n_models = check_int("max_clusters", self.max_clusters, low=2, high=max(m - 1, 2))
        if m < 3:
            raise ValueError(f"unknown-K mode (n_clusters=None) needs at least 3 clients for the "
                             f"silhouette score, got {m}")
        return n_models

    def fit(self, backend: ModelBackend) -> CLoVE:
        n_models = self._validate(backend)
        rng = check_random_state(self.random_state)
        init = default_scheme(backend) if isinstance(self.init, str) and self.init == "different" else self.init
        models = backend.from_numpy(initial_models(backend, init, 1, n_models, rng)[0])
        m = backend.n_clients
        history = History()

        for t in range(self.n_rounds):
            id_view, grad_view = backend.at_round(t)
            clients = participants(rng, m, self.participation)
            L = id_view.losses(models, clients)  # (c, K): the loss vectors
            clients, L = answered(id_view, clients, L)  # lost clients leave M^(t)
            if len(L) == 0:  # no client answered (nets.flower): the round changes nothing
                history.record(t, np.full(m, -1, dtype=np.int64), loss=np.nan, k=0, n_models=n_models)
                continue
            if t == 0 and self.first_round == "random":
                assign, k = rng.integers(n_models, size=len(L)), n_models
            else:
                assign, k = self._assign(L, rng)
            n = backend.n_samples if clients is None else backend.n_samples[clients]
            W = assignment_weights(assign, n_models, n)  # n_i-weighted within each model (Alg. 1 lines 25-26)
            models = apply_round(grad_view, models, W, np.full(n_models, float(self.step_size)), self.averaging,
                                 self.local_steps, clients)
            labels = np.full(m, -1, dtype=np.int64)
            labels[slice(None) if clients is None else clients] = assign
            extra = {} if self.monitor is None else self.monitor(t, backend.to_numpy(models), labels.copy())
            history.record(t, labels, loss=float(np.take_along_axis(L, assign[:, None], 1).mean()), k=k,
                           n_models=n_models, **extra)
            if self.n_clusters is None and clients is None:
                models, n_models = self._prune(backend, models, assign, n_models)

        present, L = answered(backend, None, backend.losses(models))  # clients lost here stay unlabelled (-1)
        assign, _ = self._assign(L, rng)
        labels = np.full(m, -1, dtype=np.int64)
        labels[slice(None) if present is None else present] = assign
        models_np = backend.to_numpy(models)
        if self.n_clusters is None:
            used, labels[labels >= 0] = np.unique(labels[labels >= 0], return_inverse=True)
            models_np = models_np[used]
        self.result_ = FitResult(labels=labels, models=models_np, n_clusters=int(len(np.unique(labels[labels >= 0]))),
                                 history=history, rounds=self.n_rounds, extra={"n_models": n_models})
        self.labels_, self.models_ = labels, models_np
        self.n_clusters_, self.history_ = self.result_.n_clusters, history
        return self

    def _prune(self, backend, models, assign, n_models):
        """Unknown K: drop the models no client cluster was matched to.

        An idle model's loss coordinate carries no cluster information but
        its full sampling noise, which would blur every later embedding.
        Only rounds with every client taking part prune, since with partial
        participation a cluster may merely be absent from the round.
        """
        used = used_models(assign, n_models)
        if used is None:
            return models, n_models
        return backend.take(models, used), len(used)

    def _assign(self, L: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, int]:
        """The server's clustering step (Alg. 1 lines 9-10): each client's model and the number of client clusters."""
        V = loss_vectors(L, bool(self.sqrt_loss))
        seed = int(rng.integers(2**31 - 1))
        if self.n_clusters is None:
            clusters, k = self._select_k(V, seed)
        else:
            k = min(int(self.n_clusters), len(V))  # fewer participants than clusters: some models idle
            clusters = cluster_vectors(V, k, self.clustering, seed, self.kmeans_n_init)
        model = match_clusters(clusters, L, k) if self.matching else order_by_smallest_client(clusters, k)
        return model[clusters], k

    def _select_k(self, V: np.ndarray, seed: int) -> tuple[np.ndarray, int]:
        """Unknown K: the clustering with the best silhouette score over ``k = 2..`` (number of live models)."""
        best, best_score = np.zeros(len(V), dtype=np.int64), -np.inf
        k_best = 1
        for k in range(2, min(V.shape[1], len(V) - 1) + 1):  # loop over candidate k (at most one per model)
            labels = cluster_vectors(V, k, self.clustering, seed, self.kmeans_n_init)
            n_found = len(np.unique(labels))
            if n_found < 2 or n_found > len(V) - 1:
                continue  # silhouette undefined (duplicate vectors collapsed the clustering)
            from sklearn.metrics import silhouette_score  # imported where used (start-up time)

            score = silhouette_score(V, labels)
            if score > best_score + 1e-12:
                best, best_score, k_best = labels, score, k
        if k_best > 1:
            # k-means may leave clusters empty on duplicate points; compact ids so they fit the models
            _, best = np.unique(best, return_inverse=True)
            k_best = int(best.max()) + 1
        return best.astype(np.int64), k_best
