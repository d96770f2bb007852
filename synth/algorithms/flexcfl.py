"""FlexCFL -- flexible clustered federated learning (Duan, Liu, Ji, Chen, Liu, Tan, Li, "Flexible Clustered
Federated Learning for Client-Level Data Distribution Shift", IEEE TPDS 33(11), 2022; FedGroup, its
predecessor, is the same grouping).

* **Grouping by decomposed cosine similarity** (Duan et al. Sec. 4.1-4.2): ``alpha K`` randomly chosen
  clients pre-train ``pretrain_steps`` local steps from the auxiliary global model ``w_0`` and send their
  updates ``dw_i``.  The server decomposes the update matrix ``[dw_1 ... dw_n]`` by truncated SVD into ``K``
  directions ``v_1..v_K`` (the ``K`` leading left singular vectors) and embeds client ``i`` as its cosine
  similarities to them, ``EDC_i = (cos(dw_i, v_1), ..., cos(dw_i, v_K))`` (the Euclidean distance of these
  embeddings is their EDC measure, Eq. (8)); k-means on the embeddings forms the ``K`` groups.  A group's
  model and update start as the means of its clients' pre-trained models and updates.
* **Cold start** (Sec. 4.3): every other client (a newcomer) pre-trains from ``w_0`` the same way and joins
  the group whose latest update has the smallest cosine dissimilarity ``(1 - cos)/2`` with its own.
* **Training** (Sec. 4.4): FedAvg inside every group (``local_steps`` steps from the group model,
  ``n_i``-weighted averages), then the inter-group aggregation of the authors' code,
  ``w_g <- (w_g + sum_{h != g} (eta/||w_h||) w_h) / (1 + sum_{h != g} eta/||w_h||)`` (``eta = 0``: none).
* **Client migration** (Sec. 4.5): the paper detects a client's distribution shift from its label histograms
  (Wasserstein distance between rounds) and re-cold-starts it.  The model-backend interface carries no labels
  and the toolkit's federations never shift, so the paper's detector would never fire: ``migration=False``
  (the default) is the paper's behaviour on static data.  ``migration=True`` adds a model-based detector: a
  client whose local update is closer (in cosine dissimilarity) to another group's latest update than to its
  own group's by more than ``migration_margin`` moves to that group.  Once the groups converge their mean
  updates shrink to noise and this detector fires spuriously (``python -m synth run --algo flexcfl --K 2
  --theta sphere --delta 1 --rounds 20 --flexcfl-migration yes``: see tests/test_clustered_extra.py).

The authors' code (github morningD/FlexCFL, ``flearn/trainer/fedgroup.py``, the code CLoVE ran) clusters the
decomposed cosine similarities with k-means, as here, and uses ``alpha = 20`` (``utils/trainer_utils.py``,
``pretrain_scale``).  Its pre-training is ``Client.pretrain(self.init_params, iterations=50)`` at every call
site (the grouping, the random-centre variant and the cold start; the method's own default of 20 is never
used), ``iterations`` being minibatch steps: hence ``pretrain_steps = 50``.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_array, check_random_state
from .backend import ModelBackend, Models
from .common import assignment_weights, default_scheme, initial_models, participants
from .params import POSITIVE, Array, Boolean, Estimator, Int, Real, String, shared
from .result import FitResult, History, Monitor

__all__ = ["FlexCFL", "decomposed_cosine"]


def _norms(backend: ModelBackend, X: Models) -> np.ndarray:
    zero = backend.from_numpy(np.zeros((1, backend.n_params)))
    return backend.distances(X, zero)[:, 0]


def _cosines(backend: ModelBackend, A: Models, B: Models) -> np.ndarray:
    """Cosine similarities ``(len(A), len(B))`` from backend distances (0 for a zero vector)."""
    na, nb = _norms(backend, A), _norms(backend, B)
    D = backend.distances(A, B)
    inner = 0.5 * (na[:, None] ** 2 + nb[None, :] ** 2 - D**2)
    den = na[:, None] * nb[None, :]
    return np.clip(np.where(den > 0, inner / np.where(den > 0, den, 1.0), 0.0), -1.0, 1.0)


def decomposed_cosine(updates: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    """Duan et al. Sec. 4.2: cosine similarities of each update to the ``k`` leading directions of the updates.

    ``updates`` ``(n, P)`` numpy; the directions are the top left singular vectors of ``updates.T``
    (randomised SVD, as the authors' TruncatedSVD).  Returns ``(n, k)``.
    """
    from sklearn.utils.extmath import randomized_svd

    k = min(k, *updates.shape)
    _, _, Vt = randomized_svd(updates, n_components=k, random_state=int(rng.integers(2**31 - 1)))
    norms = np.linalg.norm(updates, axis=1)
    proj = updates @ Vt.T  # the directions are unit vectors
    return proj / np.where(norms > 0, norms, 1.0)[:, None]


class FlexCFL(Estimator):
    """FlexCFL (Duan et al. 2022): EDC grouping, cold start of newcomers, inter-group aggregation, migration.

    Parameters
    ----------
    n_clusters : K, the number of groups.
    alpha : pre-training clients per group for the grouping (``alpha K`` clients, at most all; the code: 20).
    pretrain_steps : local steps of a pre-training (>= 1; the authors' FedGroup trainer calls
        ``Client.pretrain`` with 50 iterations).
    eta : inter-group aggregation rate (>= 0; 0 = none).
    migration : move clients whose update points to another group (model-based; see the module docstring).
    migration_margin : how much closer (in ``(1 - cos)/2``) another group must be, in [0, 1].
    n_rounds, step_size, local_steps, participation : FedAvg inside the groups.
    init : the auxiliary global model ``w_0``: ``"different"`` (the backend's default scheme), a scheme, or an array.
    random_state, monitor : as in :class:`~synth.algorithms.ifca.IFCA`.

    Attributes
    ----------
    labels_, models_, n_clusters_, history_ (per round: the grouping, ``migrations``), result_
    (``extra``: ``clustering_clients`` used for the grouping, ``migrations`` per round).
    """

    _parameter_constraints = {
        **shared("n_clusters", "n_rounds", "local_steps", "participation", "random_state", "monitor"),
        "alpha": [Int(1, None)],
        "pretrain_steps": [Int(1, None)],
        "eta": [Real(0.0, None)],
        "migration": [Boolean()],
        "migration_margin": [Real(0.0, 1.0)],
        "step_size": [POSITIVE],
        "init": [String(), Array((1, 2))],  # the one auxiliary global model w_0
    }

    def __init__(self, n_clusters: int = 2, alpha: int = 20, pretrain_steps: int = 50, eta: float = 0.0,
                 migration: bool = False, migration_margin: float = 0.05, n_rounds: int = 100,
                 step_size: float = 0.1, local_steps: int = 10, participation: float = 1.0, init="different",
                 random_state=None, monitor: Monitor | None = None):
        self.n_clusters = n_clusters
        self.alpha = alpha
        self.pretrain_steps = pretrain_steps
        self.eta = eta
        self.migration = migration
        self.migration_margin = migration_margin
        self.n_rounds = n_rounds
        self.step_size = step_size
        self.local_steps = local_steps
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor

    def fit(self, backend: ModelBackend) -> FlexCFL:
        m = backend.n_clients
        v = self._validate_params(backend)
        K, alpha, pre, eta, margin, lr = (v["n_clusters"], v["alpha"], v["pretrain_steps"], v["eta"],
                                          v["migration_margin"], v["step_size"])
        rng = check_random_state(self.random_state)
        init = default_scheme(backend) if isinstance(self.init, str) and self.init == "different" else self.init
        if not isinstance(init, str):
            init = check_array("init", init, ndim=(1, 2)).reshape(1, -1)
        w0 = backend.from_numpy(initial_models(backend, init, 1, 1, rng)[0])
        # pre-training of every client from the auxiliary global model w0 (the grouping clients' and the
        # newcomers' cold starts both need it; computing all at once keeps one batched pass)
        pre_models = backend.local_update(w0, np.zeros(m, dtype=np.int64), pre, lr)
        pre_updates = backend.step(pre_models, backend.take(w0, np.zeros(m, dtype=np.int64)), np.ones(m))
        chosen = np.sort(rng.choice(m, size=min(alpha * K, m), replace=False))
        emb = decomposed_cosine(backend.to_numpy(backend.take(pre_updates, chosen)), K, rng)
        from sklearn.cluster import KMeans  # imported where used: keeps `python -m synth` start-up fast

        km = KMeans(n_clusters=K, n_init=10, random_state=int(rng.integers(2**31 - 1))).fit(emb)
        labels = np.full(m, -1, dtype=np.int64)
        labels[chosen] = km.labels_
        W = assignment_weights(km.labels_, K, None)
        models = backend.combine(W, backend.take(pre_models, chosen))
        group_updates = backend.combine(W, backend.take(pre_updates, chosen))
        newcomers = np.setdiff1d(np.arange(m), chosen)
        if len(newcomers):  # cold start: the group whose update is most similar
            diss = (1.0 - _cosines(backend, backend.take(pre_updates, newcomers), group_updates)) / 2.0
            labels[newcomers] = diss.argmin(1)

        history, migrations = History(), []
        for t in range(v["n_rounds"]):
            _, grad_view = backend.at_round(t)
            clients = participants(rng, m, v["participation"])
            sel = np.arange(m) if clients is None else clients
            lab = labels[sel]
            local = grad_view.local_update(models, lab, v["local_steps"], lr, clients)
            upd = backend.step(local, backend.take(models, lab), np.ones(len(sel)))  # dw_i
            Wt = assignment_weights(lab, K, backend.n_samples[sel])
            has = (Wt.sum(0) > 0).astype(np.float64)
            new_updates = backend.combine(Wt, upd)
            group_updates = backend.step(group_updates, group_updates - new_updates, has)
            models = backend.step(models, models - backend.combine(Wt, local), has)
            if eta > 0 and K > 1:
                scale = eta / np.maximum(_norms(backend, models), 1e-12)
                Mix = np.tile(scale[:, None], (1, K))
                np.fill_diagonal(Mix, 1.0)
                models = backend.combine(Mix / Mix.sum(0, keepdims=True), models)
            moved = 0
            if v["migration"] and K > 1:
                diss = (1.0 - _cosines(backend, upd, group_updates)) / 2.0
                own = diss[np.arange(len(sel)), lab]
                best = diss.argmin(1)
                go = own - diss[np.arange(len(sel)), best] > margin
                labels[sel[go]] = best[go]
                moved = int(go.sum())
            migrations.append(moved)
            extra = {} if self.monitor is None else self.monitor(t, backend.to_numpy(models), labels.copy())
            history.record(t, labels, migrations=moved, **extra)

        models_np = backend.to_numpy(models)
        self.result_ = FitResult(labels.copy(), models_np, int(len(np.unique(labels))), history,
                                 rounds=self.n_rounds, extra={"clustering_clients": chosen, "migrations": migrations})
        self.labels_, self.models_ = self.result_.labels, models_np
        self.n_clusters_, self.history_ = self.result_.n_clusters, history
        return self
