"""FedALA -- adaptive local aggregation (Zhang, Hua, Wang, Song, Xue, Ma, Guan, AAAI 2023).

FedAvg, except that a client does not overwrite its model with the global one.  At the start of round t it
*adaptively aggregates* (Sec. 4, the ALA module) its previous local model ``theta_i`` and the received global
model ``theta`` element-wise:

    theta_hat_i = theta_i + (theta - theta_i) * W_i,        W_i in [0, 1]^P,

so ``W_i = 1`` takes the global model (FedAvg) and ``W_i = 0`` keeps the local model (local training).  Only
the top ``p`` layers are aggregated adaptively; the lower layers take the global model (``W = 1`` there).
``W_i`` is learned by projected gradient descent on the client's loss over a random fraction ``s`` of its
training data:

    W_i <- clip(W_i - eta * grad_theta L(theta_hat_i) * (theta - theta_i), 0, 1),

kept from round to round, trained until the loss settles in the first round in which it is active (the
standard deviation of the last ``ala_window`` losses below ``ala_std``) and for one step in
later rounds.  The client then trains ``theta_hat_i`` locally (``local_steps`` steps of the backend's
optimiser) and the server averages the trained models weighted by ``n_i``.  A client's personalised model is
its ALA-aggregated model, ``theta_hat_i`` at the final global model.

Where this follows the paper rather than the code: ``p`` counts layers (a weight and its bias are one layer),
as in the paper; the reference code (FedALA / PFLlib ``utils/ALA.py``) counts parameter tensors (its default
``layer_idx = 2`` is the paper's ``p = 1``).

PFLlib's way (CLoVE's Table 6 names PFLlib as the FedALA code it ran), as options:

* ``ala_batch_size = B``: one weight step per minibatch, as PFLlib@d832e76 ``system/utils/ALA.py:120-140``: the
  sampled window is cut into consecutive batches of ``B`` samples in their stored order, the last one smaller
  (``DataLoader(..., batch_size, drop_last=False)`` without shuffling, ALA.py:74), and every batch takes one
  projected step at the weights the previous batch left; a pass's recorded loss, the one the start phase's
  stopping rule reads, is its last batch's loss before that batch's step (ALA.py:128, 142).  PFLlib uses the
  clients' training batch size (``clientala.py:17-18``).  ``None`` (the default): one step per pass on the
  gradient of the whole window, the paper's "one epoch" written as one full-batch step.
* ``ala_max_steps = None``: the start phase runs passes until the losses settle with no bound, as
  ``while True`` in ALA.py:119-153 (at least ``ala_window + 1`` passes, ALA.py:150).  The default, 100 passes,
  bounds it, since a client whose losses never settle would otherwise never finish.

Not followed (listed for the side-by-side): PFLlib runs the ALA module on every client each round, the
participants or not (``serverala.py:70-74`` sends to ``self.clients``); here it runs on the round's participants
(the same with ``participation = 1``).  PFLlib evaluates at the start of a round, before training, and prints
the best round's accuracy (``serverala.py:28-31, 55``); nets scores the final models.

``ala_eta = 0`` freezes the weights at ``ala_init`` (``1``: FedAvg; ``0`` with ``ala_layers`` = all layers: local
training), which the tests use to check both ends.
"""

from __future__ import annotations

import numpy as np

from ..validation import check_int, check_random_state
from .backend import ModelBackend
from .common import DivergenceError, participants
from .params import POSITIVE, Estimator, Int, Real, shared
from .perfedavg import INIT, scatter_rows, shared_init, window_view
from .result import FitResult, History, Monitor

__all__ = ["FedALA"]


class FedALA(Estimator):
    """FedALA (Zhang et al., AAAI 2023): FedAvg with adaptive local aggregation of the top ``p`` layers.

    Parameters
    ----------
    n_rounds : communication rounds.
    local_steps : local training steps per round (after the aggregation).
    step_size : local step size.
    ala_eta : eta, learning rate of the aggregation weights (paper and code: 1.0).
    ala_fraction : s, fraction of a client's training data the weights are learned on (paper: 80%).
    ala_layers : p, how many of the top layers are aggregated adaptively (paper: 1); on the synthetic
        backend the linear model is one layer.
    ala_init : initial value of the weights (code: 1, i.e. the first aggregation is the global model).
    ala_std, ala_window, ala_max_steps : the first-round weight training stops when the standard deviation of
        the last ``ala_window`` losses (one per pass) is below ``ala_std`` (code: 0.1 and 10), or after
        ``ala_max_steps`` passes (``None``: no bound, PFLlib ``utils/ALA.py:119-153``).
    ala_batch_size : ``None``: one weight step per pass on the whole sampled window; ``B``: one step per
        consecutive batch of ``B`` window samples, PFLlib ``utils/ALA.py:120-140`` (there ``B`` is the training
        batch size).
    participation, init, random_state, monitor, monitor_every : as in
        :class:`~synth.algorithms.perfedavg.PerFedAvg`.

    The ``ala_`` prefix keeps the paper's symbols (eta, s, p) apart from other estimators' names.

    Attributes
    ----------
    models_ : ``(m, P)`` personalised (ALA-aggregated) models; ``global_model_`` ``(P,)``;
    weights_ : ``(m, P)`` the learned aggregation weights (1 outside the top layers);
    labels_ = ``arange(m)``; ``result_``, ``history_``.
    """

    _parameter_constraints = {
        **shared("n_rounds", "local_steps", "participation", "random_state", "monitor", "monitor_every"),
        "step_size": [POSITIVE],
        "ala_eta": [Real(0.0, None)],
        "ala_fraction": [Real(0.0, 1.0, closed="right")],
        "ala_layers": [Int(1, None)],  # at most the model's number of layers, checked at fit
        "ala_init": [Real(0.0, 1.0)],
        "ala_std": [Real(0.0, None)],
        "ala_window": [Int(1, None)],
        "ala_max_steps": [None, Int(1, None)],
        "ala_batch_size": [None, Int(1, None)],
        "init": INIT,
    }

    def __init__(self, n_rounds: int = 100, local_steps: int = 10, step_size: float = 0.005, ala_eta: float = 1.0,
                 ala_fraction: float = 0.8, ala_layers: int = 1, ala_init: float = 1.0, ala_std: float = 0.1,
                 ala_window: int = 10, ala_max_steps: int | None = 100, ala_batch_size: int | None = None,
                 participation: float = 1.0, init=None, random_state=None, monitor: Monitor | None = None,
                 monitor_every: int = 1):
        self.n_rounds = n_rounds
        self.local_steps = local_steps
        self.step_size = step_size
        self.ala_eta = ala_eta
        self.ala_fraction = ala_fraction
        self.ala_layers = ala_layers
        self.ala_init = ala_init
        self.ala_std = ala_std
        self.ala_window = ala_window
        self.ala_max_steps = ala_max_steps
        self.ala_batch_size = ala_batch_size
        self.participation = participation
        self.init = init
        self.random_state = random_state
        self.monitor = monitor
        self.monitor_every = monitor_every

    def fit(self, backend: ModelBackend) -> FedALA:
        v = self._validate_params(backend)
        lr, self._eta, self._s, w0 = v["step_size"], v["ala_eta"], v["ala_fraction"], v["ala_init"]
        layers = backend.layer_slices() if hasattr(backend, "layer_slices") else [slice(0, backend.n_params)]
        p = check_int("ala_layers", v["ala_layers"], low=1, high=len(layers))
        self._std, self._window, self._max_steps = v["ala_std"], v["ala_window"], v["ala_max_steps"]
        self._batch = v["ala_batch_size"]
        every = v["monitor_every"]
        rng = check_random_state(self.random_state)
        m, P = backend.n_clients, backend.n_params
        top = np.zeros(P, dtype=bool)
        for sl in layers[-p:]:
            top[sl] = True
        self._top = top
        g = shared_init(backend, self.init, rng)
        zeros_m = np.zeros(m, dtype=np.int64)
        local = backend.take(g, zeros_m)
        W = backend.from_numpy(np.where(top, w0, 1.0)[None].repeat(m, 0))
        trained = np.zeros(m, dtype=bool)  # has a local model of its own (ALA is inactive before: local == global)
        start_phase = np.ones(m, dtype=bool)
        labels = np.arange(m)
        weights_n = backend.n_samples.astype(np.float64)
        history = History()
        for t in range(self.n_rounds):
            _, view = backend.at_round(t)
            clients = participants(rng, m, self.participation)
            sel = labels if clients is None else clients
            local_sel, W_sel = backend.take(local, sel), backend.take(W, sel)
            start = np.copy(start_phase[sel])
            theta_hat, W_sel = self._ala(view, g, local_sel, W_sel, sel, clients, start & trained[sel], rng)
            start_phase[sel] &= ~trained[sel]
            W = scatter_rows(backend, W, clients, W_sel)
            new = view.local_update(theta_hat, np.arange(len(sel)), self.local_steps, lr, clients)
            local = scatter_rows(backend, local, clients, new)
            trained[sel] = True
            wn = weights_n[sel] / weights_n[sel].sum()
            g = backend.combine(wn[:, None], new)  # server: FedAvg, weights n_i
            if self.monitor is not None and (t % every == 0 or t == self.n_rounds - 1):
                history.record(t, labels, **self.monitor(t, backend.to_numpy(g), labels))
            else:
                history.record(t, labels)
        personal, W = self._ala(backend, g, local, W, labels, None, start_phase & trained, rng)
        models = backend.to_numpy(personal)
        if not np.isfinite(models).all():
            raise DivergenceError("FedALA produced non-finite models; lower step_size or ala_eta")
        self.global_model_ = backend.to_numpy(g)[0]
        self.weights_ = backend.to_numpy(W)
        self.result_ = FitResult(labels, models, m, history, rounds=self.n_rounds,
                                 extra={"global_model": self.global_model_, "ala_weights": self.weights_})
        self.labels_, self.models_, self.n_clusters_, self.history_ = labels, models, m, history
        return self

    def _ala(self, view, g, local, W, sel, clients, start, rng):
        """The ALA module (Sec. 4) for the clients ``sel``: ``(theta_hat, W)``, both ``(c, P)``."""
        backend = view
        c = len(sel)
        diff = backend.step(backend.take(g, np.zeros(c, dtype=np.int64)), local, np.ones(c))  # theta - theta_i
        ones = np.ones(c)

        def aggregate(W_):
            # theta_hat = theta_i + (theta - theta_i) * W  ==  theta_i - (-(diff * W))
            return backend.step(local, diff * W_, -ones)

        if self._eta == 0 or c == 0:
            return aggregate(W), W
        starts, sizes = _draw_window(view, self._s, rng)
        batches = _batches(starts, sizes, self._batch)
        subs = [window_view(view, b_starts, b_sizes) for b_starts, b_sizes, _ in batches]
        rows = np.arange(c)
        top_rows = backend.from_numpy(np.broadcast_to(self._top, (c, self._top.size)).astype(np.float64))
        active = np.ones(c, dtype=bool)
        losses: list[np.ndarray] = []
        n_passes = (self._max_steps or np.inf) if start.any() else 1
        done = 0
        while done < n_passes:
            last_loss = np.zeros(c)
            for sub, (_, _, (valid, last)) in zip(subs, batches, strict=True):
                on = active & valid[sel]  # a client whose window has fewer batches skips the later ones
                if not on.any():
                    continue
                theta_hat = aggregate(W)
                if start.any() and last[sel].any():
                    # the pass's recorded loss: its last batch's, before that batch's step (ALA.py:128, 142)
                    last_loss = np.where(last[sel], _own_losses(sub, theta_hat, clients), last_loss)
                grad = sub.client_gradients(theta_hat, rows, clients)
                mask = top_rows if on.all() else top_rows * backend.from_numpy(
                    np.broadcast_to(on[:, None], (c, self._top.size)).astype(np.float64))
                W = (W - self._eta * grad * diff * mask).clip(0.0, 1.0)
            if start.any():
                losses.append(last_loss)
            done += 1
            # after the first pass only the clients in their first (start-phase) aggregation continue, each
            # until its recent losses settle
            active = start.copy()
            if len(losses) > self._window:
                recent = np.stack(losses[-self._window:])
                active &= recent.std(0) >= self._std
            if not active.any():
                break
        return aggregate(W), W


def _own_losses(view, models, clients) -> np.ndarray:
    """Each selected client's loss at its own row of ``models``."""
    if hasattr(view, "scores"):
        c = view.to_numpy(models).shape[0] if not hasattr(models, "shape") else models.shape[0]
        return view.scores(models, np.arange(c), clients)[0]
    return np.diag(view.losses(models, clients))


def _draw_window(view, fraction: float, rng: np.random.Generator):
    """``(starts, sizes)`` of a random window of ``floor(fraction n_i)`` consecutive samples per client (the
    code's ``rand_idx : rand_idx + rand_num`` slice, PFLlib ``utils/ALA.py:71-74``; the samples of a client are
    in random order)."""
    n = np.asarray(view.n_samples, dtype=np.int64)
    sizes = np.maximum(1, np.floor(fraction * n + 1e-9).astype(np.int64))
    starts = (rng.random(len(n)) * (n - sizes + 1)).astype(np.int64)
    return starts, sizes


def _batches(starts: np.ndarray, sizes: np.ndarray, batch: int | None):
    """The window as consecutive batches: ``[(starts, sizes, (valid, last))]``, one entry per batch position.

    ``batch=None``: the whole window as one batch.  Otherwise batch ``j`` of client i holds window samples
    ``j B .. min((j+1) B, size_i) - 1`` (PFLlib's unshuffled ``DataLoader(..., drop_last=False)``); ``valid``
    marks the clients that have a batch ``j``, ``last`` those for which it is their last (a client without a
    batch ``j`` gets a placeholder window that its masked step ignores).
    """
    if batch is None:
        ones = np.ones(len(sizes), dtype=bool)
        return [(starts, sizes, (ones, ones))]
    n_batches = -(-sizes // batch)
    out = []
    for j in range(int(n_batches.max())):
        valid = j < n_batches
        b_starts = np.where(valid, starts + j * batch, starts)
        b_sizes = np.where(valid, np.minimum(batch, sizes - j * batch), np.minimum(batch, sizes))
        out.append((b_starts, b_sizes, (valid, j == n_batches - 1)))
    return out
