"""FedSoft -- soft clustered federated learning with proximal local updating (Ruan & Joe-Wong, AAAI 2022).

Every client's data is a mixture of the ``S`` cluster distributions.  The server keeps ``S`` centres
``c_s``; every client keeps its own model ``w_k`` across rounds.  Each round (Ruan & Joe-Wong Alg. 1):

1. every ``estimation_interval`` rounds each client estimates its importance weights
   ``u_ks = n_ks / n_k``, the fraction of its samples on which centre ``s`` has the smallest loss
   (Sec. 4, Eq. (5)); a zero count is replaced by the smoother ``sigma`` (so every centre keeps some pull);
2. the server's aggregation weights are ``v_sk = u_ks n_k / sum_k' u_k's n_k'`` (Eq. (6));
3. clients solve the proximal problem ``min_w f_k(w) + (lambda/2) sum_s u_ks ||w - c_s||^2`` (Eq. (4)) by
   ``local_steps`` gradient steps from their current ``w_k``;
4. ``c_s = sum_k v_sk w_k`` (full participation) or, with client selection, the plain mean of
   ``ceil(participation m)`` clients drawn without replacement with probabilities ``v_s`` (Alg. 1, line 8:
   an unbiased estimate of the same sum).

A client's cluster (for SR-FCA's "cluster model of the client" scoring, Sec. 5) is ``argmax_s u_ks`` of a
final estimation.  Follows the authors' code (github ycruan/FedSoft, ``servers.py``/``clients.py``): the
smoother replaces only zero counts, the cluster models start from independent initialisations and the
clients' models from one common initialisation.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_random_state
from .backend import ModelBackend, Models
from .common import default_scheme, initial_models
from .params import POSITIVE, Estimator, Int, Real, shared
from .result import FitResult, History, Monitor

__all__ = ["FedSoft", "importance_weights", "proximal_local_update"]


def proximal_local_update(backend: ModelBackend, start: Models, anchors: Models, mu: np.ndarray, steps: int,
                          lr: float, clients: np.ndarray | None = None) -> Models:
    """``steps`` gradient steps of ``f_i(w) + (mu_i/2) ||w - a_i||^2`` from ``start[i]`` for every selected client.

    The proximal local objective of FedSoft (Eq. (4): ``mu_i = lambda sum_s u_is`` and ``a_i`` the
    ``u``-weighted mean of the centres, which has the same gradient) and of FedProx/FeSEM.  Composed from
    backend operations, one step at a time: ``w <- (w - lr grad f_i(w)) - lr mu_i (w - a_i)``.  Exact for
    (minibatch) gradient descent.  With the torch backend's Adam the proximal pull is a decoupled step after each
    Adam step, and the optimiser's moments, step count and minibatch order carry over from step to step (the
    backend's ``state``; a fresh optimiser at every step would make each step ``lr sign(grad)``).
    """
    c = int(start.shape[0])
    rows = np.arange(c)
    mu = np.broadcast_to(np.asarray(mu, dtype=np.float64), (c,))
    if not np.any(mu):
        return backend.local_update(start, rows, steps, lr, clients)
    W = start
    # one optimiser run over the steps where the backend can carry it (Adam's moments; SGD has no state)
    carry = {"state": {}} if getattr(backend, "carries_local_state", False) else {}
    for _ in range(steps):  # loop over local steps; every client moves at once
        half = backend.local_update(W, rows, 1, lr, clients, **carry)
        W = backend.step(half, W - anchors, lr * mu)
    return W


def importance_weights(fractions: np.ndarray, smoother: float) -> np.ndarray:
    """FedSoft's ``u_ks`` (Eq. (5)) from the best-model fractions, zero entries replaced by ``smoother``."""
    u = np.asarray(fractions, dtype=np.float64)
    return np.where(u > 0, u, smoother)


class FedSoft(Estimator):
    """FedSoft (Ruan & Joe-Wong 2022, Alg. 1): soft cluster membership, proximal local updates.

    Parameters
    ----------
    n_clusters : S, the number of cluster centres.
    prox : lambda, the weight of the proximal term (>= 0; their experiments: 0.1 - 1).
    smoother : sigma, the importance weight given to a centre that wins no sample, in [0, 1) (their code:
        ``count_smoother``, 1e-4).
    estimation_interval : re-estimate the importance weights every this many rounds (their tau; >= 1).
    n_rounds, step_size, local_steps : rounds, the local step size and steps.
    participation : fraction of clients selected per centre, in (0, 1]; 1 = no selection.
    init : the centres' initialisation (default: independent draws of the backend's scheme) or ``(S, P)``.
    random_state, monitor : as in :class:`~synth.algorithms.ifca.IFCA`.

    Attributes
    ----------
    labels_ (``argmax_s u_ks``), models_ (the centres), n_clusters_, history_ (per round: the importance-based
    clustering and the mean of ``max_s u_ks``), result_ (``extra``: ``importance`` ``(m, S)``, ``client_models``).
    """

    _parameter_constraints = {
        **shared("n_clusters", "prox", "n_rounds", "local_steps", "participation", "init", "random_state",
                 "monitor"),
        "smoother": [Real(0.0, 1.0, closed="left")],
        "estimation_interval": [Int(1, None)],
        "step_size": [POSITIVE],
    }

    def __init__(self, n_clusters: int = 2, prox: float = 0.1, smoother: float = 1e-4, estimation_interval: int = 1,
                 n_rounds: int = 100, step_size: float = 0.1, local_steps: int = 10, participation: float = 1.0,
                 init="different", random_state=None, monitor: Monitor | None = None):
        self.n_clusters = n_clusters
        self.prox = prox
        self.smoother = smoother
        self.estimation_interval = estimation_interval
        self.n_rounds = n_rounds
        self.step_size = step_size
        self.local_steps = local_steps
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor

    def fit(self, backend: ModelBackend) -> FedSoft:
        m = backend.n_clients
        v = self._validate_params(backend)
        S, lam, sigma, every, lr = v["n_clusters"], v["prox"], v["smoother"], v["estimation_interval"], v["step_size"]
        local_steps, participation = v["local_steps"], v["participation"]
        rng = check_random_state(self.random_state)
        scheme = default_scheme(backend)
        init = scheme if isinstance(self.init, str) and self.init == "different" else self.init
        centres = backend.from_numpy(initial_models(backend, init, 1, S, rng)[0])
        # one common start for every client's own model (their Client.attach_to_server)
        W = backend.from_numpy(np.repeat(initial_models(backend, scheme, 1, 1, rng)[0], m, axis=0))
        n = backend.n_samples.astype(np.float64)
        history = History()
        u = None
        for t in range(v["n_rounds"]):
            id_view, grad_view = backend.at_round(t)
            if u is None or t % every == 0:
                u = importance_weights(id_view.best_model_fractions(centres), sigma)
            V = u * n[:, None]
            V = V / V.sum(0, keepdims=True)  # (m, S): column s holds v_sk
            total = u.sum(1)
            anchors = backend.combine((u / total[:, None]).T, centres)  # row k: sum_s u_ks c_s / sum_s u_ks
            if participation >= 1.0:
                W = proximal_local_update(grad_view, W, anchors, lam * total, local_steps, lr)
                A = V
            else:
                size = max(1, int(np.ceil(participation * m)))
                A = np.zeros((m, S))
                for s in range(S):  # loop over centres: each draws its clients by v_s (Alg. 1, line 8)
                    # with smoother 0 a centre may have fewer clients of positive weight than the sample size
                    pick = rng.choice(m, size=min(size, int(np.count_nonzero(V[:, s]))), replace=False, p=V[:, s])
                    A[pick, s] = 1.0 / len(pick)
                sel = np.flatnonzero(A.sum(1) > 0)
                trained = proximal_local_update(grad_view, backend.take(W, sel), backend.take(anchors, sel),
                                                lam * total[sel], local_steps, lr, sel)
                keep = np.setdiff1d(np.arange(m), sel)
                order = np.argsort(np.concatenate([sel, keep]))
                W = backend.take(backend.concat([trained, backend.take(W, keep)]), order)
            centres = backend.combine(A, W)
            labels = u.argmax(1).astype(np.int64)
            extra = {} if self.monitor is None else self.monitor(t, backend.to_numpy(centres), labels.copy())
            history.record(t, labels, max_importance=float((u / total[:, None]).max(1).mean()), **extra)

        u = importance_weights(backend.best_model_fractions(centres), sigma)
        labels = u.argmax(1).astype(np.int64)
        models_np = backend.to_numpy(centres)
        self.result_ = FitResult(labels, models_np, int(len(np.unique(labels))), history, rounds=self.n_rounds,
                                 extra={"importance": u, "client_models": backend.to_numpy(W)})
        self.labels_, self.models_ = labels, models_np
        self.n_clusters_, self.history_ = self.result_.n_clusters, history
        return self
