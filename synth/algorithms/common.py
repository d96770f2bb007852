"""Pieces shared by the algorithms: one averaging round, assignment weights, participation.

All functions work on any :class:`~synth.algorithms.backend.ModelBackend`.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_array, check_choice, check_int, check_probability, check_real
from .backend import ModelBackend, Models

__all__ = [
    "DivergenceError",
    "answered",
    "apply_round",
    "assignment_weights",
    "check_backend",
    "check_common",
    "check_fitted_models",
    "group_argmin",
    "initial_models",
    "one_hot_runs",
    "participants",
    "step_sizes",
]

AVERAGING = ("gradient", "model")


class DivergenceError(FloatingPointError):
    """A run produced non-finite models (the step size is too large, usually).

    ``what`` is the message without its advice and ``knobs`` the estimator's hyper-parameters that scale the
    updates (where known), so that a command line can name its own flags instead.
    """

    def __init__(self, message: str = "", *, what: str | None = None, knobs: tuple[str, ...] = ()):
        super().__init__(message)
        self.what = message if what is None else what
        self.knobs = tuple(knobs)


def step_sizes(value) -> np.ndarray:
    """A positive step size or a non-empty list of them (restarts over step sizes); ``True`` is not a number."""
    items = value.tolist() if isinstance(value, np.ndarray) else value
    items = items if isinstance(items, (list, tuple)) else [items]
    if any(isinstance(v, (bool, np.bool_, str, bytes)) for v in items):
        raise TypeError(f"step_size must be a positive number or a list of them, got {value!r}")
    try:
        arr = np.atleast_1d(np.asarray(value, dtype=np.float64))
    except (TypeError, ValueError):
        arr = None
    if arr is None or arr.ndim != 1 or arr.size == 0:
        raise TypeError(f"step_size must be a positive number or a list of them, got {value!r}")
    for v in arr:
        check_real("step_size", float(v), low=0.0, low_inclusive=False)
    return arr


# hyper-parameters that scale an update: what a diverged fit names as the ones to lower
SCALING = ("step_size", "local_step_size", "trmean_step_size", "meta_alpha", "ala_eta", "prox", "proto_lambda",
           "eta")


def check_backend(backend) -> None:
    """The federation a fit runs on: at least one client and one parameter, one sample count per client in
    ``[1, ...]``, and (where the backend can tell) data the losses can be computed on.

    Called once per fit, before any work (:class:`synth.algorithms.params.Estimator`); a backend's
    ``check_data()`` checks its values (:meth:`synth.backend.GLMBackend.check_data`,
    :meth:`nets.backend.TorchBackend.check_data`).
    """
    for attr in ("n_clients", "n_params", "n_samples"):
        if not hasattr(backend, attr):
            raise TypeError(f"backend must be a ModelBackend (synth.algorithms.backend) with {attr}, got "
                            f"{type(backend).__name__}")
    m = check_int("the number of clients (backend.n_clients)", backend.n_clients, low=1)
    check_int("the number of model parameters (backend.n_params, d)", backend.n_params, low=1)
    counts = np.asarray(backend.n_samples)
    if counts.shape != (m,) or counts.dtype.kind not in "iu" or counts.min() < 1:
        raise ValueError(f"backend.n_samples must hold {m} integer sample counts >= 1, got "
                         f"{counts.dtype} array of shape {counts.shape}")
    check_data = getattr(backend, "check_data", None)
    if check_data is not None:
        check_data()


def check_fitted_models(est, why: str | None = None) -> None:
    """Refuse a fit that ended with non-finite models (:class:`DivergenceError`), naming what scales the updates.

    Every estimator's fit ends here (:class:`synth.algorithms.params.Estimator`), so no path reports a clustering
    or metrics computed from NaN models as a result.  With ``why`` the fit stopped before its end because
    non-finite values reached a library step (k-means, a linkage, an SVD): always a divergence.
    """
    if why is None:
        models = getattr(est, "models_", None)
        if models is None:
            return
        arr = np.asarray(models, dtype=np.float64)
        finite = np.isfinite(arr)
        if finite.all():
            return
        why = f"produced non-finite models ({arr.size - int(finite.sum())} of {arr.size} parameters)"
    params = est.get_params() if hasattr(est, "get_params") else {}
    knobs = [k for k in SCALING if k in params]
    lower = f"lower {knobs[0]}" + (f" (or {', '.join(knobs[1:])})" if len(knobs) > 1 else "") if knobs else \
        "check the data and hyper-parameters"
    what = f"{type(est).__name__} {why}"
    raise DivergenceError(f"{what}; {lower}", what=what, knobs=tuple(knobs))


def check_common(est) -> None:
    """Validate the hyper-parameters most estimators share (by attribute name)."""
    if hasattr(est, "n_rounds"):
        check_int("n_rounds", est.n_rounds, low=0)
    if hasattr(est, "averaging"):
        check_choice("averaging", est.averaging, AVERAGING)
    if hasattr(est, "local_steps"):
        check_int("local_steps", est.local_steps, low=1)
    if hasattr(est, "participation"):
        check_probability("participation", est.participation)


def participants(rng: np.random.Generator, m: int, fraction: float) -> np.ndarray | None:
    """A sorted random subset of ``max(1, round(fraction*m))`` clients, or ``None`` for all."""
    if fraction >= 1.0:
        return None
    size = max(1, int(round(fraction * m)))
    return np.sort(rng.choice(m, size=size, replace=False))


def answered(backend: ModelBackend, clients: np.ndarray | None, L: np.ndarray):
    """The round's clients whose losses arrived, and their rows of ``L``: ``(clients, L)``.

    Every client of an in-process backend answers (``clients`` and ``L`` come back as they are).  A backend whose
    clients run elsewhere (:class:`nets.flower.backend.FederatedBackend`) names in ``backend.lost`` the clients that
    failed or timed out in its last call (their rows of ``L`` are NaN); they leave the round's participants, as the
    papers' participation subsets allow (IFCA journal Alg. 2's ``M_t``, CLoVE Alg. 1's ``M^(t)``).
    """
    lost = getattr(backend, "lost", None)
    if not lost:
        return clients, L
    idx = np.arange(backend.n_clients) if clients is None else np.asarray(clients, dtype=np.int64)
    keep = ~np.isin(idx, np.fromiter(lost, dtype=np.int64, count=len(lost)))
    return idx[keep], L[keep]


def assignment_weights(labels: np.ndarray, n_models: int, n_samples: np.ndarray | None = None,
                       normalise: str = "cluster") -> np.ndarray:
    """One-hot weights ``(c, n_models)`` from cluster labels (``-1`` = unassigned, weight 0).

    ``normalise="cluster"``: within each cluster the weights are ``n_i / sum n_i``
    (FedAvg, CLoVE Alg. 1 lines 25-26).  ``normalise="total"``: every assigned
    client weighs ``1/c`` (IFCA's update ``theta_j -= (gamma/m) sum_{S_j} grad F_i``).
    """
    labels = np.asarray(labels, dtype=np.int64)
    c = len(labels)
    W = np.zeros((c, n_models))
    ok = labels >= 0
    w = np.ones(c) if n_samples is None else np.asarray(n_samples, dtype=np.float64)
    W[np.flatnonzero(ok), labels[ok]] = w[ok]
    if normalise == "total":
        return W / max(c, 1)
    col = W.sum(0)
    return W / np.where(col > 0, col, 1.0)


def apply_round(backend: ModelBackend, models: Models, weights: np.ndarray, lr: np.ndarray,
                averaging: str, local_steps: int, clients: np.ndarray | None = None,
                gradient: Models | None = None) -> Models:
    """One round of gradient or model averaging given assignment ``weights`` ``(c, M)``.

    Gradient averaging (IFCA option I, CLoVE option II): ``theta_j -= lr_j * sum_i w_ij grad f_i(theta_j)``
    (``gradient`` may be passed in when already computed).  Model averaging
    (IFCA option II, CLoVE option I, FedAvg): every assigned client runs
    ``local_steps`` steps from its model and ``theta_j`` becomes the
    ``w``-weighted mean of the results.  Models without clients are unchanged.
    """
    if averaging == "gradient":
        G = backend.weighted_gradients(models, weights, clients) if gradient is None else gradient
        return backend.step(models, G, lr)
    labels = np.where(weights.sum(1) > 0, weights.argmax(1), -1)
    assigned = labels >= 0
    if not assigned.any():
        return models
    if clients is None:
        sel = None if assigned.all() else np.flatnonzero(assigned)
    else:
        sel = np.asarray(clients)[assigned]
    local = backend.local_update(models, labels[assigned], local_steps, lr, sel)
    W = weights[assigned]
    col = W.sum(0)
    avg = backend.combine(W / np.where(col > 0, col, 1.0), local)
    # theta_j <- theta_j - 1[S_j nonempty] (theta_j - avg_j): models without clients stay put
    return backend.step(models, models - avg, (col > 0).astype(np.float64))


def initial_models(backend: ModelBackend, init, n_init: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Initial models as a numpy ``(n_init, k, P)`` array.

    ``init`` is a scheme the backend knows (``"bernoulli"``, ``"gaussian"``,
    ``"zeros"``, torch's ``"default"`` ...), ``"same"`` (all k models equal to
    one draw of the backend's default scheme -- CLoVE Fig. 1), or an array of
    shape ``(k, P)`` or ``(n_init, k, P)``.
    """
    P = backend.n_params
    if isinstance(init, str):
        if init == "same":
            base = backend.to_numpy(backend.init_models(n_init, default_scheme(backend), rng))
            return np.repeat(base[:, None, :], k, axis=1)
        draws = backend.to_numpy(backend.init_models(n_init * k, init, rng))
        return draws.reshape(n_init, k, P)
    arr = check_array("init", init, ndim=(2, 3))
    if arr.ndim == 2:
        arr = arr[None]
    if arr.shape[1:] != (k, P):
        raise ValueError(f"init must have shape ({k}, {P}) or (n_init, {k}, {P}), got {arr.shape}")
    if arr.shape[0] != n_init and n_init != 1:
        raise ValueError(f"init holds {arr.shape[0]} initialisations but n_init={n_init}")
    return arr


def default_scheme(backend: ModelBackend) -> str:
    return getattr(backend, "default_init", "bernoulli")


def group_argmin(L: np.ndarray, k: int) -> np.ndarray:
    """For losses ``(c, R*k)`` of R independent runs, each client's best model within every run: ``(c, R)``."""
    c, M = L.shape
    grouped = L.reshape(c, M // k, k)
    # a diverged run has NaN losses; argmin over NaN would pick it, so treat NaN as +inf
    return np.nan_to_num(grouped, nan=np.inf).argmin(2)


def one_hot_runs(best: np.ndarray, k: int, scale: float | np.ndarray = 1.0) -> np.ndarray:
    """One-hot ``(c, R*k)`` weights from per-run choices ``best`` ``(c, R)``."""
    c, R = best.shape
    W = np.zeros((c, R, k))
    np.put_along_axis(W, best[:, :, None], 1.0, axis=2)
    W *= np.asarray(scale, dtype=np.float64).reshape(-1, 1, 1) if np.ndim(scale) else scale
    return W.reshape(c, R * k)

