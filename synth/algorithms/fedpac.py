"""FedPAC -- feature alignment and classifier collaboration (Xu, Tong, Huang, ICLR 2023).

A client's model is a shared feature extractor ``phi`` and a personal linear head ``psi_i``.  Each round
(Alg. 1):

1. *Local training* (Sec. 4, feature alignment): the client first trains its head with the received feature
   extractor frozen (``head_steps``), then the feature extractor with the head frozen on the supervised loss
   plus ``lambda`` times the distance of each representation to the global prototype of its class,
   ``R_i(phi) = (1/n_i) sum ||f_phi(x) - c_y||^2``.
2. *Statistics*: with the received feature extractor, the client's class priors ``p_i(k)``, class-mean
   features ``mu_ik`` and feature variance give ``h_i = (p_i(k) mu_ik)_k`` and the variance term ``V_i``.
   After training, its local prototypes ``c_ik`` (class-mean features).
3. *Server*: the feature extractors are averaged (weights ``n_i``), the global prototypes are the
   count-weighted means ``c_k = sum_i n_ik c_ik / sum_i n_ik``, and each client's new head is a combination
   ``psi_i <- sum_j alpha_ij psi_j`` (Sec. 4, classifier collaboration) with weights from the quadratic
   program

       min_alpha  sum_j alpha_j^2 V_j + || sum_j alpha_j (h_i - h_j) ||^2   s.t.  alpha >= 0, sum_j alpha_j = 1,

   which trades the variance of a combined head (more clients, smaller) against the bias from clients whose
   feature statistics differ from client i's.  It is solved exactly (a non-negative least-squares form, see
   :func:`collaboration_weights`); weights below 1e-3 are set to zero and the rest renormalised, as in the
   authors' code (``get_head_agg_weight``, which solves it with cvxpy and drops eigenvalues below 0.01 when
   the matrix is not numerically positive semi-definite; here the matrix is PSD by construction and is only
   rescaled, with a 1e-12 ridge).

The personalised model of a client is the averaged feature extractor with its combined head.

Where this follows the code: ``V_j = (1/n_j) sum_k [p_j(k) E_k ||f(x)||^2 - p_j(k)^2 ||mu_jk||^2]`` and
``h_j`` as computed by the authors' ``statistics_extraction`` (``methods/fedpac.py``) and PFLlib (the code
CLoVE ran, PFLlib@d832e76 ``clientpac.py:137-187``), with the statistics taken at the received global feature
extractor (``clientpac.py:105-108``), and the alignment term is the mean squared error (averaged over the feature
dimension, ``clientpac.py:72-78``).  The authors' code uses SGD with momentum 0.5 and weight decay 5e-4 and a head
learning rate of 0.1; here both stages use the backend's optimiser, the head at ``head_step_size`` (default:
``step_size``, as PFLlib's one optimiser for both stages).  The QP is solved once per client on the server (a
loop over clients of a small dense problem, not over data).

Against PFLlib (``clientpac.py``, ``serverpac.py``), the code whose numbers CLoVE reports:

* global prototypes: PFLlib averages the clients' prototypes unweighted (``serverpac.py:178-193``), the paper and
  the authors' code (``tools.py`` ``protos_aggregation``) weight them by the class counts; ``prototype_mean``
  offers both (default: ``"counts"``).
* head stage: PFLlib trains the head for one epoch whatever the number of local epochs (``clientpac.py:37-51``);
  ``head_steps`` defaults to ``local_steps``, the same when a round is one epoch (CLoVE's tau = 1).
* the combined head: PFLlib zeroes the weights below 1e-3 and does not renormalise the rest
  (``serverpac.py:166-174, 242``); here, as the authors' ``agg_classifier_weighted_p``, they are renormalised.  A
  head scaled by ``sum alpha <= 1`` scales every logit alike, so the predictions are the same.
* PFLlib's statistics and prototypes pass over a ``drop_last`` loader (``clientbase.py:59``), leaving out
  ``n mod B`` random samples; here all samples count (the same for CLoVE's n = 500, B = 100).
* PFLlib mismatches the combined heads and the clients, a defect of that code: ``Vars``/``Hs`` are in the order of
  ``selected_clients`` (``serverpac.py:40-44``), but ``head_weights[idx]`` is given to ``uploaded_ids[idx]`` and
  zipped with ``uploaded_heads`` (``serverpac.py:153-173``), both in the order of
  ``random.sample(selected_clients, ...)`` (``serverpac.py:129-130``), a random permutation; and ``set_head``
  (``clientpac.py:110-112``) overwrites a client's head in place while ``uploaded_heads`` holds that same module
  (``serverpac.py:148``), so heads combined later in the loop read heads replaced earlier.  The default
  (``head_assignment="matched"``) gives client i the combination ``sum_j alpha_ij psi_j`` of Sec. 4;
  ``head_assignment="pfllib"`` reproduces PFLlib's assignment (:func:`pfllib_head_mix`), since CLoVE's FedPAC
  numbers come from that code (``bench/pfllib_side_by_side.py``: PFLlib with the heads matched gives the toolkit's
  accuracy).
* PFLlib evaluates at the start of a round, before training (``serverpac.py:46-49``), and prints the best round's
  accuracy (``serverpac.py:74-77``); nets scores the final models.

Needs a representation: :mod:`nets` only (see :class:`~synth.algorithms.fedproto.RepresentationBackend`).
"""

from __future__ import annotations

import numpy as np

from ..validation import check_random_state
from .backend import ModelBackend
from .common import DivergenceError, participants
from .fedproto import global_prototypes, require_representation
from .params import POSITIVE, Estimator, Int, Options, shared
from .perfedavg import INIT, scatter_rows, shared_init
from .result import FitResult, History, Monitor

__all__ = ["FedPAC", "collaboration_weights", "feature_statistics", "pfllib_head_mix"]


def feature_statistics(counts: np.ndarray, means: np.ndarray, sq_norms: np.ndarray):
    """FedPAC's ``(V (c,), h (c, C, d))`` from per-client class counts, class means and mean squared norms."""
    n = counts.sum(1)
    p = counts / np.maximum(n, 1.0)[:, None]
    h = p[:, :, None] * means
    V = (p * sq_norms - p ** 2 * (means ** 2).sum(2)).sum(1) / np.maximum(n, 1.0)
    return V, h


def collaboration_weights(V: np.ndarray, h: np.ndarray, tol: float = 1e-3) -> np.ndarray:
    """The combination weights ``alpha`` ``(c, c)`` (row i: client i's head = sum_j alpha_ij psi_j) of FedPAC's
    quadratic program ``min alpha^T (diag(V) + D_i) alpha`` on the simplex, with
    ``D_i[j, l] = <h_i - h_j, h_i - h_l>``; weights below ``tol`` are zeroed and the rest renormalised.

    Solved exactly: with ``Q = L L^T`` positive definite, the KKT conditions of ``min b^T Q b / 2 - 1^T b``,
    ``b >= 0`` are those of the simplex problem at ``alpha = b / 1^T b`` (multiplier ``1 / 1^T b``), and that
    problem is the non-negative least squares ``min ||L^T b - L^{-1} 1||^2`` (scipy's active-set ``nnls``).  A
    ridge of 1e-12 times the largest entry keeps ``Q`` definite where some ``V_j = 0``.
    """
    V = np.asarray(V, dtype=np.float64)
    c = len(V)
    # imported where used: keeps `python -m synth` start-up fast
    from scipy.linalg import solve_triangular
    from scipy.optimize import nnls

    H = np.asarray(h, dtype=np.float64).reshape(c, -1)
    out = np.zeros((c, c))
    for i in range(c):  # one small QP per client on the server (not a data pass)
        delta = H[i][None, :] - H
        Q = np.diag(V) + delta @ delta.T
        Q = 0.5 * (Q + Q.T)
        scale = max(float(np.abs(Q).max()), 1e-300)
        Qs = Q / scale + 1e-12 * np.eye(c)  # the minimiser does not depend on the scale
        a = np.zeros(c)
        try:
            L = np.linalg.cholesky(Qs)
            b, _ = nnls(L.T, solve_triangular(L, np.ones(c), lower=True), maxiter=50 * c)
            a = b / b.sum() if b.sum() > 0 else a
        except (np.linalg.LinAlgError, RuntimeError):
            pass  # no usable solution: handled below
        a[a < tol] = 0.0
        if a.sum() <= 0:  # no usable solution: the client keeps its own head (the code's fallback)
            a = np.zeros(c)
            a[i] = 1.0
        out[i] = a / a.sum()
    return out


def pfllib_head_mix(V: np.ndarray, h: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The heads PFLlib's ``FedPAC.aggregate_and_send_heads`` gives the round's clients, as a matrix ``M`` ``(c, c)``
    (client i's new head = ``sum_j M_ij psi_j`` over the uploaded heads ``psi``), PFLlib@d832e76 ``serverpac.py``.

    The clients are taken in two random orders, ``s`` (``selected_clients``, ``np.random.choice``: ``serverbase.py:
    99``) and ``u`` (``uploaded_ids``, ``random.sample``: ``serverpac.py:129-130``).  The QP weights are solved in
    order ``s`` (``Vars``/``Hs``, ``serverpac.py:40-44, 153``); the ``idx``-th weight vector is applied to client
    ``u[idx]`` over the heads in order ``u`` (``serverpac.py:155-173``), and each new head overwrites its client's
    head in place before the next is combined (``set_head``, ``clientpac.py:110-112``, on the modules that
    ``uploaded_heads`` holds, ``serverpac.py:148``).  Every step is linear in the heads, so ``M`` is the product of
    the steps applied to the identity.  With ``s = u`` and no overwriting it would be ``alpha`` of
    :func:`collaboration_weights` (PFLlib does not renormalise after zeroing weights below 1e-3; this does, which
    scales a head and not its predictions).
    """
    c = len(V)
    s, u = rng.permutation(c), rng.permutation(c)
    alpha = collaboration_weights(np.asarray(V)[s], np.asarray(h)[s])
    M = np.eye(c)
    for idx in range(c):  # in place: later rows read the heads already replaced
        M[u[idx]] = alpha[idx] @ M[u]
    return M


class FedPAC(Estimator):
    """FedPAC (Xu et al., ICLR 2023, Alg. 1): aligned shared feature extractor, collaborating personal heads.

    Parameters
    ----------
    n_rounds : communication rounds.
    local_steps : steps of the feature-extractor stage per round (the code: E epochs, CLoVE: one epoch).
    step_size : local step size of the feature extractor.
    head_steps : steps of the head stage (default: ``local_steps``; PFLlib: one epoch, ``clientpac.py:37-51``).
    head_step_size : step size of the head stage (default: ``step_size``).
    proto_lambda : lambda, weight of the feature alignment term (code and PFLlib: 1.0).
    prototype_mean : ``"counts"`` (the paper's and the authors' count-weighted global prototypes) or
        ``"clients"`` (PFLlib's unweighted mean over the clients holding the class, ``serverpac.py:178-193``).
    head_assignment : ``"matched"`` (client i gets ``sum_j alpha_ij psi_j``, Sec. 4) or ``"pfllib"`` (PFLlib's
        mismatched, in-place assignment, :func:`pfllib_head_mix`).
    participation, init, random_state, monitor, monitor_every : as in
        :class:`~synth.algorithms.perfedavg.PerFedAvg`; the monitor sees the shared model (feature extractor
        and the mean head) ``(1, P)``.

    Attributes
    ----------
    models_ : ``(m, P)`` personalised models; ``prototypes_`` ``(C, d)``; ``combination_weights_`` the last
    round's ``alpha`` ``(c, c)`` over that round's participants; labels_ = ``arange(m)``.
    """

    _parameter_constraints = {
        **shared("n_rounds", "local_steps", "proto_lambda", "prototype_mean", "participation", "random_state",
                 "monitor", "monitor_every"),
        "step_size": [POSITIVE],
        "head_steps": [None, Int(0, None)],
        "head_step_size": [None, POSITIVE],
        "head_assignment": [Options("matched", "pfllib")],
        "init": INIT,
    }

    def __init__(self, n_rounds: int = 100, local_steps: int = 10, step_size: float = 0.01,
                 head_steps: int | None = None, head_step_size: float | None = None, proto_lambda: float = 1.0,
                 prototype_mean: str = "counts", head_assignment: str = "matched", participation: float = 1.0,
                 init=None, random_state=None, monitor: Monitor | None = None, monitor_every: int = 1):
        self.n_rounds = n_rounds
        self.local_steps = local_steps
        self.step_size = step_size
        self.head_steps = head_steps
        self.head_step_size = head_step_size
        self.proto_lambda = proto_lambda
        self.prototype_mean = prototype_mean
        self.head_assignment = head_assignment
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor
        self.monitor_every = monitor_every

    def fit(self, backend: ModelBackend) -> FedPAC:
        v = self._validate_params(backend)
        require_representation(backend, "FedPAC")
        lr, lam, every = v["step_size"], v["proto_lambda"], v["monitor_every"]
        head_lr = lr if v["head_step_size"] is None else v["head_step_size"]
        head_steps = v["local_steps"] if v["head_steps"] is None else v["head_steps"]
        rng = check_random_state(self.random_state)
        m = backend.n_clients
        labels = np.arange(m)
        head = backend.from_numpy(np.asarray(backend.head_mask(), dtype=np.float64)[None])
        models = backend.take(shared_init(backend, self.init, rng), np.zeros(m, dtype=np.int64))
        protos, alpha = None, np.eye(m)
        ns = backend.n_samples.astype(np.float64)
        history = History()
        for t in range(self.n_rounds):
            _, view = backend.at_round(t)
            clients = participants(rng, m, self.participation)
            sel = labels if clients is None else clients
            c = len(sel)
            counts, means, sq = view.class_statistics(models, sel, clients)  # at the received extractor
            V, h = feature_statistics(counts, means, sq)
            new = view.aligned_update(models, sel, head_steps, head_lr, None, 0.0, "head", clients)
            new = view.aligned_update(new, np.arange(c), self.local_steps, lr, protos, lam, "body", clients)
            counts2, means2, _ = view.class_statistics(new, np.arange(c), clients)
            protos = global_prototypes(counts2, means2, v["prototype_mean"])
            alpha = collaboration_weights(V, h)
            w = ns[sel] / ns[sel].sum()
            body = backend.combine(w[:, None], new)  # FedAvg of the feature extractors (the head part is unused)
            mix = alpha if v["head_assignment"] == "matched" else pfllib_head_mix(V, h, rng)
            heads = backend.combine(mix.T, new)  # row i: sum_j mix_ij theta_j
            body_rows = backend.take(body, np.zeros(c, dtype=np.int64))
            personal = body_rows + (heads - body_rows) * head
            models = scatter_rows(backend, models, clients, personal)
            if clients is not None:  # every client receives the new global feature extractor
                everyone = backend.take(body, np.zeros(m, dtype=np.int64))
                models = everyone + (models - everyone) * head
            if self.monitor is not None and (t % every == 0 or t == self.n_rounds - 1):
                history.record(t, labels, **self.monitor(t, backend.to_numpy(body), labels))
            else:
                history.record(t, labels)
        models_np = backend.to_numpy(models)
        if not np.isfinite(models_np).all():
            raise DivergenceError("FedPAC produced non-finite models; lower step_size")
        self.prototypes_, self.combination_weights_ = protos, alpha
        self.result_ = FitResult(labels, models_np, m, history, rounds=self.n_rounds,
                                 extra={"prototypes": protos, "combination_weights": alpha})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models_np, m, history
        return self
