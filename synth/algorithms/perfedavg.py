"""Per-FedAvg -- personalised FedAvg as model-agnostic meta-learning (Fallah, Mokhtari, Ozdaglar, NeurIPS 2020).

The shared model ``w`` minimises the MAML objective (Sec. 3)
``F(w) = (1/n) sum_i f_i(w - alpha grad f_i(w))``: the loss of each user *after one step of gradient descent
on its own data*.  Per-FedAvg (Alg. 1) is FedAvg on ``F``: every selected user runs ``tau`` local steps

    w_tmp = w - alpha grad f_i(w)                                      (inner, personalising step)
    w     = w - beta (I - alpha hess f_i(w)) grad f_i(w_tmp)           (outer step on F_i)

and the server averages the users' models uniformly (Alg. 1, ``w_{k+1} = (1/rn) sum_{i in A_k} w^i``).  The
Hessian is what the two practical variants of Sec. 4 approximate:

* ``variant="fo"`` (Per-FedAvg (FO)): drop it, ``w = w - beta grad f_i(w_tmp)``;
* ``variant="hf"`` (Per-FedAvg (HF)): replace ``hess f_i(w) g`` by the finite difference
  ``(grad f_i(w + delta g) - grad f_i(w - delta g)) / (2 delta)`` with ``g = grad f_i(w_tmp)``.

A user's personalised model, the one that is evaluated, is the shared model after one adaptation step on its
own training data, ``w - alpha grad f_i(w)`` (Sec. 3).  With ``meta_alpha = 0`` the method is FedAvg with model
averaging, ``tau`` local steps of size ``beta`` (a test checks it).

Reference code: CLoVE ran PFLlib's ``clientperavg.py`` (its Table 6).  Its current version (PFLlib@d832e76)
matches Alg. 1 (FO): step 1 on one half of a minibatch, step 2's gradient at ``w_tmp`` on the other half, ``w``
restored, then the outer step (``clientperavg.py:33-72``); it sets beta = alpha = the local learning rate
(``clientperavg.py:14``; defaults here: both 0.005, PFLlib's default rate, ``main.py:400``).  An older version
(commit 20524d4) took the outer step from ``w_tmp`` without restoring ``w`` and adapted on a *test* batch; here
the paper's update is used.  By default the gradients are full-batch gradients of each user's local loss (the
paper's independent batches D, D', D'' are the whole local data set), so the steps are deterministic and need no
minibatch stream.

PFLlib's way, as options (defaults: the paper's):

* ``meta_adapt_batch = B``: the personalised model that is evaluated is the shared model after one step of size
  alpha on *one random minibatch* of ``B`` training samples, as PFLlib's ``evaluate_one_step``
  (``serverperavg.py:71-84``) calling ``train_one_step`` (``clientperavg.py:83-99``: the first batch of a
  shuffled loader); ``None``: one step on all of the user's training data (Sec. 3).  The minibatch is a window of
  ``min(B, n_i)`` consecutive samples at a uniformly random offset (the samples of a client are stored in random
  order, so it is a uniformly random subset of that size).
* ``meta_batch = B``: the meta-steps run on minibatches as PFLlib's (``clientperavg.py:23, 33-72``): each pass
  shuffles the user's data into batches of ``2B`` with ``drop_last``; step 1 on the first ``B`` samples of a
  batch, step 2 (at ``w_tmp``) on the other ``B``, ``w`` restored, then the outer step: ``floor(n_i / 2B)``
  meta-steps per epoch, ``local_steps`` epochs per pass.
* ``meta_passes = 2``: the local training runs twice per round, as PFLlib's server calls ``client.train()`` twice
  for every selected client (``serverperavg.py:35-36``): ``meta_passes * local_steps`` steps (epochs with
  ``meta_batch``) per round.
* ``meta_weights = "samples"``: the server averages the users' models weighted by their sample counts, as
  PFLlib's ``receive_models``/``aggregate_parameters`` (``serverbase.py:114-150``, weights
  ``train_samples / total``); ``"uniform"``: Alg. 1's ``(1/rn) sum w^i``.  The same when clients hold equally many
  samples.

Not offered (listed for the side-by-side): PFLlib evaluates at the start of a round, before training
(``serverperavg.py:28-31``), and prints the best round's accuracy (``:57``); nets scores the final models.  The
shuffles are drawn from the estimator's generator (``numpy``), not torch's, so a run is the same on every backend.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..validation import check_random_state
from .backend import ModelBackend
from .common import DivergenceError, initial_models, participants
from .params import POSITIVE, Array, Estimator, Int, Options, Real, String, shared
from .result import FitResult, History, Monitor

__all__ = ["INIT", "PerFedAvg", "index_view", "meta_batches", "scatter_rows", "shared_init", "window_view"]


# the shared initial model of the personalised methods: None (the backend's default), a scheme or one model (1, P)
INIT = [None, String(), Array(2)]


def shared_init(backend: ModelBackend, init, rng: np.random.Generator):
    """One initial model ``(1, P)``: ``init`` a backend scheme, ``"same"``, an array ``(1, P)``, or ``None``
    (the backend's default scheme: torch's initialisation on nets, zeros on the synthetic backend, as FedAvg)."""
    if init is None:
        init = getattr(backend, "default_init", "zeros")
    return backend.from_numpy(initial_models(backend, init, 1, 1, rng)[0])


def scatter_rows(backend: ModelBackend, stack, clients: np.ndarray | None, rows):
    """``stack`` with rows ``clients`` replaced by ``rows`` (all rows when ``clients`` is None)."""
    if clients is None:
        return rows
    m = backend.to_numpy(stack).shape[0] if not hasattr(stack, "shape") else stack.shape[0]
    onehot = np.zeros((len(clients), m))
    onehot[np.arange(len(clients)), clients] = 1.0
    # stack + E^T (rows - stack[clients]): a one-hot combine, written with the backend's own operations
    return backend.step(stack, backend.combine(onehot, backend.step(backend.take(stack, clients), rows, 1.0)),
                        np.ones(m))


def window_view(view, starts: np.ndarray, sizes: np.ndarray):
    """The backend restricted to the samples ``starts[i] : starts[i] + sizes[i]`` of each client (a minibatch or a
    sampled fraction: the samples of a client are stored in random order)."""
    if hasattr(view, "subsample"):
        return view.subsample(starts, sizes)
    width = int(sizes.max())
    pos = starts[:, None] + np.minimum(np.arange(width)[None, :], sizes[:, None] - 1)
    return index_view(view, pos, sizes)


def index_view(view, index: np.ndarray, sizes: np.ndarray):
    """The backend restricted to the samples ``index[i, :sizes[i]]`` of each client (positions in its stored
    order; a minibatch drawn from a shuffle), gathered so that a gradient costs the minibatch, not the client."""
    if hasattr(view, "select"):
        return view.select(index, sizes)
    fed = getattr(view, "fed", None)
    if fed is None:
        raise TypeError(f"this option needs a backend that can restrict clients to part of their data "
                        f"(a select or subsample method), got {type(view).__name__}")
    # synthetic backend: gather each client's samples into a smaller federation of the same distributions
    ok = np.arange(index.shape[1])[None, :] < sizes[:, None]
    X = np.take_along_axis(fed.X, index[:, :, None], axis=1) * ok[:, :, None]
    y = np.take_along_axis(fed.y, index, axis=1) * ok
    return type(view)(replace(fed, X=X.astype(fed.X.dtype), y=y.astype(fed.y.dtype), n_samples=sizes))


def meta_batches(rng: np.random.Generator, n: np.ndarray, batch: int) -> list:
    """One pass of PFLlib's Per-FedAvg loader (``clientperavg.py:23``: batches of ``2B``, shuffled,
    ``drop_last``): per meta-step s the positions ``(first, second)`` of steps 1 and 2, each ``(m, B)``, and
    the clients that have a step s (``floor(n_i / 2B)`` meta-steps per pass; a client with fewer than ``2B``
    samples has none)."""
    n = np.asarray(n, dtype=np.int64)
    keys = rng.random((len(n), int(n.max())))
    keys[np.arange(keys.shape[1])[None, :] >= n[:, None]] = 2.0  # padding sorts last
    order = np.argsort(keys, axis=1, kind="stable")
    counts = n // (2 * batch)
    fallback = np.minimum(np.arange(batch)[None, :], n[:, None] - 1)
    steps = []
    for s in range(int(counts.max(initial=0))):
        first = order[:, 2 * batch * s: 2 * batch * s + batch]
        second = order[:, 2 * batch * s + batch: 2 * batch * (s + 1)]
        # a client without step s gets valid positions (its first samples) and a zero step size
        done = counts <= s
        steps.append((np.where(done[:, None], fallback, first), np.where(done[:, None], fallback, second), ~done))
    return steps


def _meta_step(backend: ModelBackend, first, second, theta, rows, clients, alpha: np.ndarray, beta: np.ndarray,
               variant: str, delta: float):
    """One local meta-step of Alg. 1: ``w_tmp = w - alpha grad f(w)`` on the data of ``first``, then
    ``w - beta grad f(w_tmp)`` on the data of ``second`` (Hessian-corrected for ``"hf"``, Sec. 4)."""
    c = len(alpha)
    tmp = backend.step(theta, first.client_gradients(theta, rows, clients), alpha)
    direction = second.client_gradients(tmp, rows, clients)
    if variant == "hf" and np.any(alpha > 0):
        plus = second.client_gradients(backend.step(theta, direction, np.full(c, -delta)), rows, clients)
        minus = second.client_gradients(backend.step(theta, direction, np.full(c, delta)), rows, clients)
        # (I - alpha H) g ~ g - alpha (grad(w + delta g) - grad(w - delta g)) / (2 delta)
        direction = backend.step(direction, backend.step(plus, minus, np.ones(c)), alpha / (2 * delta))
    return backend.step(theta, direction, beta)


class PerFedAvg(Estimator):
    """Per-FedAvg (Fallah et al. 2020, Alg. 1), first-order or Hessian-free.

    Parameters
    ----------
    n_rounds : K, communication rounds.
    local_steps : tau, local (meta) steps per round.
    meta_alpha : alpha, the inner, personalising step size (``0`` gives FedAvg).
    step_size : beta, the outer step size.
    meta_variant : ``"fo"`` (first order) or ``"hf"`` (Hessian-free, finite-difference Hessian-vector product).
    meta_delta : delta, the finite-difference width of ``"hf"``.
    meta_adapt_batch : ``None``: the personalised model takes its adaptation step on all of the user's training
        data (Sec. 3); ``B``: on one random minibatch of ``B`` samples, PFLlib ``clientperavg.py:83-99``.
    meta_batch : ``None``: each meta-step uses all of the user's data (D = D' = the local set) and ``local_steps``
        counts meta-steps; ``B``: PFLlib's minibatch meta-steps (``clientperavg.py:23, 33-72``): each pass shuffles
        the user's data into batches of ``2B`` (``drop_last``), step 1 on the first ``B`` samples of a batch and
        step 2 on the other ``B``, ``floor(n_i / 2B)`` meta-steps per epoch, and ``local_steps`` counts epochs
        (PFLlib's ``local_epochs``).  First-order only, as PFLlib.
    meta_passes : how often the local training runs per round (PFLlib: 2, ``serverperavg.py:35-36``).
    meta_weights : the server's average, ``"uniform"`` (Alg. 1) or ``"samples"`` (weights n_i, PFLlib
        ``serverbase.py:114-150``).
    participation : fraction r of users selected per round.
    init : the shared initial model: a backend scheme (``"zeros"``, torch's ``"default"`` ...), ``"same"``,
        an array ``(1, P)``, or None (the backend's default: zeros on the synthetic backend, torch's on nets).
    random_state, monitor, monitor_every : as in :class:`~synth.algorithms.ifca.IFCA`; the monitor sees the
        shared model ``(1, P)`` and labels ``0, ..., m-1`` (every user is its own group).

    The prefixed names (``meta_``) are the paper's alpha and delta under names no other estimator uses.

    Attributes
    ----------
    models_ : ``(m, P)`` personalised models (shared model after one adaptation step per user).
    global_model_ : ``(P,)`` the shared model ``w``.
    labels_ : ``arange(m)``; ``result_``, ``history_``, ``n_clusters_`` (= m).
    """

    _parameter_constraints = {
        **shared("n_rounds", "local_steps", "participation", "random_state", "monitor", "monitor_every"),
        "meta_alpha": [Real(0.0, None)],
        "step_size": [POSITIVE],  # one beta (no restarts over step sizes)
        "meta_variant": [Options("fo", "hf")],
        "meta_delta": [POSITIVE],
        "meta_adapt_batch": [None, Int(1, None)],
        "meta_batch": [None, Int(1, None)],
        "meta_passes": [Int(1, None)],
        "meta_weights": [Options("uniform", "samples")],
        "init": INIT,
    }

    def __init__(self, n_rounds: int = 100, local_steps: int = 10, meta_alpha: float = 0.005,
                 step_size: float = 0.005, meta_variant: str = "fo", meta_delta: float = 1e-3,
                 meta_adapt_batch: int | None = None, meta_batch: int | None = None, meta_passes: int = 1,
                 meta_weights: str = "uniform",
                 participation: float = 1.0, init=None, random_state=None, monitor: Monitor | None = None,
                 monitor_every: int = 1):
        self.n_rounds = n_rounds
        self.local_steps = local_steps
        self.meta_alpha = meta_alpha
        self.step_size = step_size
        self.meta_variant = meta_variant
        self.meta_delta = meta_delta
        self.meta_adapt_batch = meta_adapt_batch
        self.meta_batch = meta_batch
        self.meta_passes = meta_passes
        self.meta_weights = meta_weights
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor
        self.monitor_every = monitor_every

    def fit(self, backend: ModelBackend) -> PerFedAvg:
        v = self._validate_params(backend)
        alpha, beta, variant, delta = v["meta_alpha"], v["step_size"], v["meta_variant"], v["meta_delta"]
        every = v["monitor_every"]
        rng = check_random_state(self.random_state)
        batch = v["meta_batch"]
        if batch is not None and variant != "fo":
            raise ValueError("meta_batch (PFLlib's minibatch meta-steps) is first-order Per-FedAvg; set "
                             "meta_variant='fo' or meta_batch=None")
        m = backend.n_clients
        w = shared_init(backend, self.init, rng)
        labels = np.arange(m)
        n_all = np.asarray(backend.n_samples, dtype=np.float64)
        history = History()
        for t in range(self.n_rounds):
            _, view = backend.at_round(t)
            clients = participants(rng, m, self.participation)
            c = m if clients is None else len(clients)
            rows = np.arange(c)
            theta = backend.take(w, np.zeros(c, dtype=np.int64))
            for _ in range(v["meta_passes"]):  # PFLlib: two calls of train() per round
                if batch is None:
                    for _ in range(self.local_steps):
                        theta = _meta_step(backend, view, view, theta, rows, clients, np.full(c, alpha),
                                           np.full(c, beta), variant, delta)
                    continue
                n_view = np.asarray(getattr(view, "n_samples", backend.n_samples), dtype=np.int64)
                for _ in range(self.local_steps):  # local epochs, PFLlib's loop over its shuffled loader
                    steps = meta_batches(rng, n_view, batch)
                    sizes = np.full(m, batch, dtype=np.int64)
                    for first, second, on in steps:
                        on = on if clients is None else on[clients]
                        theta = _meta_step(backend, index_view(view, first, sizes), index_view(view, second, sizes),
                                           theta, rows, clients, alpha * on, beta * on, "fo", delta)
            if v["meta_weights"] == "uniform":
                w = backend.combine(np.full((c, 1), 1.0 / c), theta)  # Alg. 1: uniform average over A_k
            else:  # PFLlib serverbase.py:124-136: weights train_samples / total
                n_sel = n_all if clients is None else n_all[clients]
                w = backend.combine((n_sel / n_sel.sum())[:, None], theta)
            if self.monitor is not None and (t % every == 0 or t == self.n_rounds - 1):
                history.record(t, labels, **self.monitor(t, backend.to_numpy(w), labels))
            else:
                history.record(t, labels)
        stack = backend.take(w, np.zeros(m, dtype=np.int64))
        personal = backend.step(stack, self._adaptation_gradients(backend, stack, labels, rng), np.full(m, alpha))
        models = backend.to_numpy(personal)
        if not np.isfinite(models).all():
            raise DivergenceError("Per-FedAvg produced non-finite models; lower step_size or meta_alpha")
        self.global_model_ = backend.to_numpy(w)[0]
        self.result_ = FitResult(labels, models, m, history, rounds=self.n_rounds,
                                 extra={"global_model": self.global_model_})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models, m, history
        return self

    def _adaptation_gradients(self, backend: ModelBackend, stack, labels: np.ndarray, rng: np.random.Generator):
        """The gradients of the personalising step: on all training data (Sec. 3), or with ``meta_adapt_batch``
        on one random minibatch per user (PFLlib ``clientperavg.py:83-99``; ``min(B, n_i)`` samples, where
        PFLlib's ``drop_last`` loader would have no batch at all)."""
        if self.meta_adapt_batch is None:
            return backend.client_gradients(stack, labels)
        n = np.asarray(backend.n_samples, dtype=np.int64)
        sizes = np.minimum(int(self.meta_adapt_batch), n)
        starts = (rng.random(len(n)) * (n - sizes + 1)).astype(np.int64)
        return window_view(backend, starts, sizes).client_gradients(stack, labels)
