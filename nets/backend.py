"""The torch model backend: every client of a round in one batched pass.

Implements :class:`synth.algorithms.backend.ModelBackend` for neural networks,
so the algorithms of :mod:`synth.algorithms` run unchanged on torch models.
Models are ``(M, P)`` tensors of flat parameters (:class:`~nets.functional.FunctionalModel`).

Batching (``batched=True``, the default)
-----------------------------------------
* ``losses``: each model is evaluated on the data of all clients at once
  (the clients' samples flattened into one batch; a loop over the models).
* ``local_update`` / ``client_gradients``: every client holds its own parameter
  row; ``vmap(grad(f_i))`` over the stacked rows and the stacked client data
  does all clients' local steps together.
* ``weighted_gradients``: ``sum_i w_ij grad f_i(theta_j) = grad_theta sum_i w_ij f_i(theta_j)``,
  one backward pass per model over all its clients' samples.

Clients are split into chunks only to bound memory (``memory_budget``) and, on
CPU, to keep a chunk's parameter rows in cache during its local steps
(``cache_bytes``), never looped one by one.  ``batched=False`` is the looped reference (one client at a
time) used by the tests to show both paths give the same models.

Local training
--------------
``local_update`` runs ``steps`` steps of plain SGD (IFCA, SR-FCA) or Adam
(CLoVE Sec. 5; fresh moments every call, as a client's optimiser is created
afresh every round) on full-batch gradients (``batch_size=None``, IFCA's MNIST
code) or on minibatches.  Minibatches come from one random permutation per
client per call, drawn from a CPU ``torch.Generator`` seeded by
``(seed, round, call)``: the draws depend on the round index only, so a
resumed run replays them exactly, and they are the same on every device.
An algorithm that interleaves its own update between local steps (FedSoft's
and FeSEM's proximal pull) calls ``local_update`` one step at a time with a
``state`` dict: Adam's moments, its step count and the minibatch order then
carry over from call to call within the round, so ``k`` calls of one step
equal one call of ``k`` steps.

IFCA weight sharing (IFCA journal Sec. IV-C, Fig. 2)
-----------------------------------------------------
``shared`` is a boolean mask over the ``P`` coordinates (e.g. every layer but
the last).  Model rows come in blocks of ``share_block`` (= k, one IFCA run;
restarts are further blocks).  Within a block the shared coordinates are one
copy used by all k models: ``init_models`` ties them, ``weighted_gradients``
returns for them the gradient summed over all clients of the block,
``combine`` (model averaging) the mean over all clients of the block, and
``step`` re-ties them after every update, so a model that received no client
still sees the current shared layers.  The clustered coordinates follow IFCA
unchanged.  The algorithm code is the same with or without sharing.
"""

from __future__ import annotations

import copy

import numpy as np
import torch
from torch.func import grad, vmap

from synth.backend import TRIM_RULES, trim_range
from synth.validation import check_choice, check_client_counts, check_int, check_real

from .functional import FunctionalModel, as_numpy

__all__ = ["TorchBackend"]

_MB = 2**20


class TorchBackend:
    """Losses, gradients and local training of a federation of clients on a torch model.

    Parameters
    ----------
    model : the :class:`~nets.functional.FunctionalModel`.
    X : ``(m, n_max, *input_shape)`` client inputs (float images or integer tokens).
    y : ``(m, n_max)`` integer targets (``None`` for reconstruction losses).
    n_samples : ``(m,)`` valid samples per client (the rest is padding); default ``n_max``.
    batch_size : minibatch size of local steps; ``None`` = full-batch gradient descent.
    optimizer : ``"sgd"`` (plain steps) or ``"adam"`` for ``local_update``.
    batched : ``False`` for the looped one-client-at-a-time reference path.
    seed : seed of the minibatch draws and of model initialisations' defaults.
    shared : optional boolean mask ``(P,)`` of coordinates shared across the k models (IFCA IV-C).
    share_block : k, the number of consecutive model rows that share them.
    lr_decay : step size multiplier per round (``lr * lr_decay**round``; IFCA CIFAR uses 0.99).
    memory_budget : bytes one chunk of clients may use (bounds memory, not a loop over clients).
    cache_bytes : on CPU, local training works on chunks whose parameter rows fit in about this many bytes,
        so that all ``steps`` of a chunk run in cache (as :class:`synth.backend.GLMBackend` blocks clients);
        streaming every client's parameters through main memory at every step is memory-bound.
    """

    default_init = "default"
    # local_update takes a ``state`` dict that carries the optimiser across calls (see the module docstring)
    carries_local_state = True

    def __init__(self, model: FunctionalModel, X: torch.Tensor, y: torch.Tensor | None = None,
                 n_samples=None, *, batch_size: int | None = None, optimizer: str = "sgd", batched: bool = True,
                 seed: int = 0, shared=None, share_block: int | None = None, lr_decay: float = 1.0,
                 memory_budget: int = 256 * _MB, cache_bytes: int = 24 * _MB, adam_betas=(0.9, 0.999),
                 adam_eps: float = 1e-8):
        self.model = model
        self.device, self.dtype = model.device, model.dtype
        if X.dim() < 2:
            raise ValueError(f"X must have shape (clients, samples, ...), got {tuple(X.shape)}")
        self.X = X.to(self.device)
        m, n_max = X.shape[:2]
        if y is None:
            y = torch.zeros((m, n_max), dtype=torch.long)
        if tuple(y.shape) != (m, n_max):
            raise ValueError(f"y must have shape ({m}, {n_max}) to match X, got {tuple(y.shape)}")
        self.y = y.to(self.device)
        self.n_clients, self.n_params = int(m), model.n_params
        ns = check_client_counts(np.full(m, n_max, dtype=np.int64) if n_samples is None else n_samples, m, n_max)
        self.n_samples = ns
        self._n = torch.tensor(ns, device=self.device)
        mask = (torch.arange(n_max, device=self.device)[None, :] < self._n[:, None]).to(self.dtype)
        self.mask = mask
        self.w = mask / self._n[:, None].to(self.dtype)  # sum_s w_is l_is = f_i, the client's mean loss
        self.batch_size = None if batch_size is None else check_int("batch_size", batch_size, low=1)
        self.optimizer = check_choice("optimizer", optimizer, ("sgd", "adam"))
        self.batched = bool(batched)
        self.seed = check_int("seed", seed, low=0)
        self.lr_decay = check_real("lr_decay", lr_decay, low=0.0, high=1.0, low_inclusive=False)
        self.memory_budget = check_int("memory_budget", memory_budget, low=_MB)
        self.cache_bytes = check_int("cache_bytes", cache_bytes, low=0) if self.device.type == "cpu" else 0
        self.adam_betas, self.adam_eps = tuple(adam_betas), float(adam_eps)
        self.shared, self.share_block = self._check_sharing(shared, share_block)
        self.round_offset = 0
        self._round, self._calls = 0, 0
        self._act = model.activation_bytes(self.X[0])

    def check_data(self) -> None:
        """Refuse inputs the losses cannot be computed on: non-finite float inputs, negative token or class
        indices (run once per fit by every estimator, :func:`synth.algorithms.common.check_backend`)."""
        if self.X.is_floating_point():
            if not bool(torch.isfinite(self.X).all()):
                raise ValueError(f"X must be finite; {int((~torch.isfinite(self.X)).sum())} input entries are NaN "
                                 "or infinite")
        elif self.X.numel() and int(self.X.min()) < 0:
            raise ValueError(f"X must hold token indices >= 0, got {int(self.X.min())}")
        if not self.y.is_floating_point() and self.y.numel() and int(self.y.min()) < 0:
            raise ValueError(f"y must hold class indices >= 0, got {int(self.y.min())}")

    def _check_sharing(self, shared, share_block):
        if shared is None:
            return None, None
        mask = torch.as_tensor(np.asarray(shared, dtype=bool), device=self.device)
        if tuple(mask.shape) != (self.n_params,):
            raise ValueError(f"shared must be a boolean mask of length n_params={self.n_params}, "
                             f"got shape {tuple(mask.shape)}")
        return mask, check_int("share_block", share_block, low=1)

    # ------------------------------------------------------------------ helpers
    def _index(self, clients) -> torch.Tensor:
        if clients is None:
            return torch.arange(self.n_clients, device=self.device)
        return torch.as_tensor(np.asarray(clients, dtype=np.int64), device=self.device)

    def _chunks(self, count: int, per_client_bytes: float, cached_bytes: float = 0.0):
        """Slices of at most ``memory_budget / per_client_bytes`` clients (and ``cache_bytes / cached_bytes``)."""
        size = max(1, int(self.memory_budget // max(per_client_bytes, 1.0)))
        if self.cache_bytes and cached_bytes:
            size = min(size, max(1, int(self.cache_bytes // cached_bytes)))
        return [slice(s, min(s + size, count)) for s in range(0, count, size)]

    def _lr_rows(self, lr, n_models: int, labels: np.ndarray) -> torch.Tensor:
        lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), (n_models,))[labels]  # fancy index: a copy
        lr = lr * self.lr_decay ** self._round
        return torch.as_tensor(lr, dtype=self.dtype, device=self.device)

    def _generator(self) -> torch.Generator:
        """A CPU generator seeded by (seed, round, call index within the round)."""
        ss = np.random.SeedSequence([self.seed, self._round, self._calls])
        self._calls += 1
        g = torch.Generator(device="cpu")
        g.manual_seed(int(ss.generate_state(1, np.uint64)[0] % (2**63)))
        return g

    def _per_sample_bytes(self) -> float:
        # forward activations kept for backward, their gradients, and temporaries
        return 4.0 * self._act

    # --------------------------------------------------------------- evaluation
    def losses(self, models, clients=None) -> np.ndarray:
        """``f_i(models[j])`` for every selected client and model: ``(c, M)`` float64."""
        models = self.from_numpy(models)
        idx = self._index(clients)
        M, c, n_max = models.shape[0], len(idx), self.X.shape[1]
        out = np.empty((c, M))
        if not self.batched:
            with torch.no_grad():
                for a in range(c):  # looped reference path
                    i = idx[a]
                    for j in range(M):
                        out[a, j] = float(self.model.weighted_loss(models[j], self.X[i], self.y[i], self.w[i]))
            return out
        with torch.no_grad():
            for sl in self._chunks(c, n_max * self._act * 1.5):
                rows = idx[sl]
                b = len(rows)
                Xb, yb, wb = self.X[rows].flatten(0, 1), self.y[rows].flatten(0, 1), self.w[rows]
                # one forward pass per model over all the chunk's samples (a loop over models, not clients;
                # on CPU it beats vmap over the stack, which materialises the input once per model)
                L = torch.stack([self.model.sample_losses(models[j], Xb, yb).view(b, n_max) for j in range(M)], 1)
                out[sl] = as_numpy((L * wb[:, None, :]).sum(2))
        return out

    def scores(self, models, assign, clients=None) -> tuple[np.ndarray, np.ndarray]:
        """Each client's mean loss and accuracy on its own data at model ``assign[i]``: two ``(c,)`` arrays.

        Accuracy is NaN for reconstruction losses.
        """
        models = self.from_numpy(models)
        idx = self._index(clients)
        assign = np.asarray(assign, dtype=np.int64)
        c, n_max = len(idx), self.X.shape[1]
        if assign.shape != (c,):
            raise ValueError(f"assign must hold one model index per client ({c}), got shape {assign.shape}")
        loss, acc = np.empty(c), np.empty(c)
        with torch.no_grad():
            if not self.batched:
                for a in range(c):  # looped reference path
                    i = idx[a]
                    lo, co = self.model.sample_scores(models[assign[a]], self.X[i], self.y[i])
                    loss[a], acc[a] = float((lo * self.w[i]).sum()), float((co * self.w[i]).sum())
                return loss, acc
            used = np.unique(assign)
            if len(used) <= 16:  # few models: one forward per model over all its clients' samples
                for j in used:  # loop over models, not clients
                    pos = np.flatnonzero(assign == j)
                    for sl in self._chunks(len(pos), n_max * self._act * 1.5):
                        p = pos[sl]
                        rows = idx[torch.as_tensor(p, device=self.device)]
                        lo, co = self.model.sample_scores(models[j], self.X[rows].flatten(0, 1),
                                                          self.y[rows].flatten(0, 1))
                        wr = self.w[rows]
                        loss[p] = as_numpy((lo.view(len(p), n_max) * wr).sum(1))
                        acc[p] = as_numpy((co.view(len(p), n_max) * wr).sum(1))
                return loss, acc
            fn = vmap(self.model.sample_scores)  # many models (Local): one parameter row per client
            for sl in self._chunks(c, n_max * self._act * 1.5 + 8.0 * self.n_params):
                rows = idx[sl]
                theta = models[torch.as_tensor(assign[sl], device=self.device)]
                lo, co = fn(theta, self.X[rows], self.y[rows])
                wr = self.w[rows]
                loss[sl], acc[sl] = as_numpy((lo * wr).sum(1)), as_numpy((co * wr).sum(1))
        return loss, acc

    # ---------------------------------------------------- first-order information
    def weighted_gradients(self, models, weights, clients=None):
        """``G[j] = sum_i weights[i, j] grad f_i(models[j])``: ``(M, P)``."""
        models = self.from_numpy(models)
        W = np.asarray(weights, dtype=np.float64)
        idx = self._index(clients)
        M, n_max = models.shape[0], self.X.shape[1]
        if W.shape != (len(idx), M):
            raise ValueError(f"weights must have shape ({len(idx)}, {M}), got {W.shape}")
        G = torch.zeros((M, self.n_params), dtype=self.dtype, device=self.device)
        g_fn = grad(self.model.weighted_loss)
        for j in range(M):  # loop over models, not clients
            nz = np.flatnonzero(W[:, j])
            if not len(nz):
                continue
            if not self.batched:
                for a in nz:  # looped reference path
                    i = idx[a]
                    G[j] += float(W[a, j]) * g_fn(models[j], self.X[i], self.y[i], self.w[i])
                continue
            for sl in self._chunks(len(nz), n_max * self._per_sample_bytes()):
                pos = nz[sl]
                rows = idx[torch.as_tensor(pos, device=self.device)]
                sw = torch.as_tensor(W[pos, j], dtype=self.dtype, device=self.device)[:, None] * self.w[rows]
                G[j] += g_fn(models[j], self.X[rows].flatten(0, 1), self.y[rows].flatten(0, 1), sw.reshape(-1))
        return self._share_gradient(G)

    def losses_and_weighted_gradients(self, models, choose, clients=None):
        """``losses``, then ``weights = choose(losses, rows)``, then ``weighted_gradients``."""
        L = self.losses(models, clients)
        W = np.asarray(choose(L, np.arange(L.shape[0])), dtype=np.float64)
        return L, W, self.weighted_gradients(models, W, clients)

    def client_gradients(self, models, labels, clients=None):
        """``grad f_i(models[labels[i]])`` for each selected client: ``(c, P)``."""
        models = self.from_numpy(models)
        labels = np.asarray(labels, dtype=np.int64)
        idx = self._index(clients)
        theta = models[torch.as_tensor(labels, device=self.device)]
        g_fn = grad(self.model.weighted_loss)
        out = torch.empty_like(theta)
        if not self.batched:
            for a in range(len(idx)):  # looped reference path
                i = idx[a]
                out[a] = g_fn(theta[a], self.X[i], self.y[i], self.w[i])
            return out
        n_max = self.X.shape[1]
        for sl in self._chunks(len(idx), n_max * self._per_sample_bytes() + 12.0 * self.n_params):
            rows = idx[sl]
            out[sl] = vmap(g_fn)(theta[sl], self.X[rows], self.y[rows], self.w[rows])
        return out

    def local_update(self, models, labels, steps: int, lr, clients=None, state: dict | None = None):
        """Each selected client runs ``steps`` local steps from ``models[labels[i]]``: ``(c, P)``.

        ``state``: ``None`` (a fresh optimiser) or a dict passed to consecutive calls on the same clients within
        a round, empty at the first; it keeps Adam's moments and step count and the minibatch order, so the
        steps of several calls continue one optimiser run (``k`` calls of one step equal one call of ``k``).
        """
        steps = check_int("steps", steps, low=0)
        models = self.from_numpy(models)
        labels = np.asarray(labels, dtype=np.int64)
        idx = self._index(clients)
        if len(labels) != len(idx):
            raise ValueError(f"labels must hold one model index per selected client ({len(idx)}), got {len(labels)}")
        theta = models[torch.as_tensor(labels, device=self.device)].clone()
        lr_rows = self._lr_rows(lr, models.shape[0], labels)
        batches, moments, done = self._resume(state, idx, steps)
        if not self.batched:
            for a in range(len(idx)):  # looped reference path
                sl = slice(a, a + 1)
                theta[sl] = self._train(theta[sl], idx[sl], lr_rows[sl], steps, batches, sl, vectorised=False,
                                        moments=self._rows(moments, sl), done=done)
        else:
            B = self.X.shape[1] if self.batch_size is None else self.batch_size
            per = (5.0 if self.optimizer == "adam" else 3.0) * self.n_params * self.X.element_size()
            for sl in self._chunks(len(idx), B * self._per_sample_bytes() + 2 * per, per):
                theta[sl] = self._train(theta[sl], idx[sl], lr_rows[sl], steps, batches, sl, vectorised=True,
                                        moments=self._rows(moments, sl), done=done)
        if state is not None:
            state["steps"] = done + steps
        return theta

    def _resume(self, state, idx: torch.Tensor, steps: int):
        """``(batches, moments, steps done)`` of a ``local_update`` call: fresh, or continued from ``state``."""
        if state is None:
            return self._draw_batches(idx, steps), None, 0
        if not isinstance(state, dict):
            raise TypeError(f"state must be None or a dict, got {type(state).__name__}")
        clients = idx.cpu().numpy()
        if not state:  # the first call: one minibatch order and one set of moments for the whole run
            state["clients"] = clients
            state["batches"] = self._draw_batches(idx, max(steps, 1))
            params = self.model.split(torch.zeros((len(idx), self.n_params), dtype=self.dtype, device=self.device))
            state["moments"] = None if self.optimizer != "adam" else (
                params, {n: torch.zeros_like(p) for n, p in params.items()})
            state["steps"] = 0
        elif not np.array_equal(state.get("clients"), clients):
            raise ValueError("state belongs to another set of clients; pass a new dict ({}) for these clients")
        return state["batches"], state["moments"], state["steps"]

    @staticmethod
    def _rows(moments, sl: slice):
        """Views of the rows ``sl`` of Adam's moments (updated in place by ``_train``), or None."""
        if moments is None:
            return None
        return tuple({n: v[sl] for n, v in part.items()} for part in moments)

    def _draw_batches(self, idx: torch.Tensor, steps: int):
        """Per-client sample order for minibatch SGD: ``(perm (c, n_max), n (c,))``, or None for full batch."""
        if self.batch_size is None or steps == 0:
            return None
        c, n_max = len(idx), self.X.shape[1]
        keys = torch.rand((c, n_max), generator=self._generator()).to(self.device)
        keys = keys.masked_fill(self.mask[idx] == 0, 2.0)  # padding sorts last, valid samples first
        return keys.argsort(1), self._n[idx]

    def _batch(self, batches, sl, rows, s: int):
        """Inputs, targets and weights of local step ``s`` for the clients ``rows`` (positions ``sl``)."""
        perm, n = batches
        B = self.batch_size
        pos = (s * B + torch.arange(B, device=self.device))[None, :] % n[sl][:, None]
        ib = perm[sl].gather(1, pos)
        r = rows[:, None]
        wb = torch.full(ib.shape, 1.0 / B, dtype=self.dtype, device=self.device)
        return self.X[r, ib], self.y[r, ib], wb

    def _train(self, theta, rows, lr, steps, batches, sl, vectorised: bool, moments=None, done: int = 0):
        """``steps`` SGD or Adam steps of a chunk of clients; parameters stay unflattened (no split/cat per step).

        ``moments``: Adam's ``(m1, m2)`` of the chunk, continued in place, after ``done`` earlier steps.
        """
        g_fn = grad(self.model.weighted_loss_params)
        g_fn = vmap(g_fn) if vectorised else _one_client(g_fn)
        params = self.model.split(theta)
        full = (self.X[rows], self.y[rows], self.w[rows]) if batches is None else None
        adam = self.optimizer == "adam"
        if adam:
            if moments is None:
                m1 = {n: torch.zeros_like(p) for n, p in params.items()}
                m2 = {n: torch.zeros_like(p) for n, p in params.items()}
            else:
                m1, m2 = moments
            b1, b2 = self.adam_betas
        rates = {n: lr.view(-1, *[1] * (p.dim() - 1)) for n, p in params.items()}
        for s in range(done, done + steps):
            xb, yb, wb = full if batches is None else self._batch(batches, sl, rows, s)
            g = g_fn(params, xb, yb, wb)
            for n, p in params.items():  # loop over parameter tensors; in place, so a chunk stays in cache
                if adam:
                    m1[n].mul_(b1).add_(g[n], alpha=1 - b1)
                    m2[n].mul_(b2).addcmul_(g[n], g[n], value=1 - b2)
                    denom = (m2[n] / (1 - b2 ** (s + 1))).sqrt_().add_(self.adam_eps)
                    p.addcmul_(rates[n] / (1 - b1 ** (s + 1)), m1[n] / denom, value=-1.0)
                else:
                    p.addcmul_(rates[n], g[n], value=-1.0)
        return self.model.join(params)

    def local_models(self, method: str = "gd", steps: int = 100, lr: float = 0.1, init=None):
        """Every client's own model after ``steps`` local steps from a common start: ``(m, P)``.

        ``method="erm"`` (exact ERM) exists only for the convex families of :mod:`synth`.
        """
        method = check_choice("method", method, ("erm", "gd"))
        if method == "erm":
            raise ValueError("method='erm' (exact local ERM) is not defined for neural networks; use method='gd' "
                             "(the nets command line does)")
        lr = check_real("lr", lr, low=0.0, low_inclusive=False)
        if init is None:
            start = self.model.init(self.seed)[None].expand(self.n_clients, -1)
        else:
            start = self.from_numpy(init)
            if start.shape[0] == 1:
                start = start.expand(self.n_clients, -1)
            if tuple(start.shape) != (self.n_clients, self.n_params):
                raise ValueError(f"init must have shape ({self.n_clients}, {self.n_params}), got {tuple(start.shape)}")
        return self.local_update(start, np.arange(self.n_clients), steps, lr)

    # ------------------------------------------------- operations on model stacks
    def combine(self, weights, values):
        """``weights.T @ values``: ``(M, P)``; shared coordinates are the mean over the block's clients."""
        values = self.from_numpy(values)
        W = torch.as_tensor(np.asarray(weights, dtype=np.float64), dtype=self.dtype, device=self.device)
        out = W.T @ values
        if self.shared is not None:
            M = W.shape[1]
            for start in range(0, M, self._block(M)):  # loop over blocks of models (IFCA runs)
                cols = slice(start, start + self.share_block)
                active = (W[:, cols] != 0).any(1)
                if active.any():
                    out[cols, self.shared] = values[active][:, self.shared].mean(0)
        return out

    def trimmed_mean(self, values, labels, n_groups: int, beta: float, rule: str = "symmetric"):
        """Coordinatewise ``TrMean_beta`` of each group's rows (SR-FCA Def. 3.2; ``rule``: :func:`synth.backend.
        trim_range`); empty groups give NaN."""
        values = self.from_numpy(values)
        labels = np.asarray(labels, dtype=np.int64)
        beta = check_real("beta", beta, low=0.0, high=0.5, high_inclusive=False)
        rule = check_choice("rule", rule, TRIM_RULES)
        out = torch.full((n_groups, values.shape[1]), float("nan"), dtype=self.dtype, device=self.device)
        for g in range(n_groups):  # loop over clusters, not clients
            rows = values[torch.as_tensor(np.flatnonzero(labels == g), device=self.device)]
            J = rows.shape[0]
            if J:
                start, end = trim_range(J, beta, rule)
                out[g] = rows.mean(0) if (start, end) == (0, J) else rows.sort(0).values[start:end].mean(0)
        return out

    def step(self, models, direction, lr):
        """``models - lr[:, None] * direction``; with sharing, shared coordinates are re-tied per block."""
        models, direction = self.from_numpy(models), self.from_numpy(direction)
        M = models.shape[0]
        lr_np = np.array(np.broadcast_to(np.asarray(lr, dtype=np.float64), (M,)))
        lr_t = torch.as_tensor(lr_np, dtype=self.dtype, device=self.device)
        out = models - lr_t[:, None] * direction
        if self.shared is not None:
            for start in range(0, M, self._block(M)):  # loop over blocks of models (IFCA runs)
                moved = np.flatnonzero(lr_np[start:start + self.share_block] != 0)
                if len(moved):
                    src = out[start + int(moved[0]), self.shared]
                    out[start:start + self.share_block, self.shared] = src
        return out

    def project(self, models, center, radius: float):
        """Euclidean projection of each row onto the ball of ``radius`` around ``center`` (SR-FCA Alg. 3's W)."""
        models = self.from_numpy(models)
        c = 0.0 if center is None else self.from_numpy(center)
        diff = models - c
        norm = diff.norm(dim=-1, keepdim=True)
        scale = torch.clamp(radius / torch.where(norm == 0, torch.ones_like(norm), norm), max=1.0)
        return c + diff * scale

    def distances(self, a, b) -> np.ndarray:
        """Pairwise Euclidean distances ``||a_i - b_j||`` in float64: ``(len(a), len(b))``."""
        a = self.from_numpy(a).to(torch.float64)
        b = self.from_numpy(b).to(torch.float64)
        return torch.cdist(a, b).cpu().numpy()

    def take(self, models, index):
        return self.from_numpy(models)[torch.as_tensor(np.asarray(index, dtype=np.int64), device=self.device)]

    def concat(self, stacks):
        return torch.cat([self.from_numpy(s) for s in stacks], 0)

    def to_numpy(self, models) -> np.ndarray:
        if isinstance(models, torch.Tensor):
            return as_numpy(models)
        return np.array(models, dtype=np.float64)

    def from_numpy(self, array) -> torch.Tensor:
        if isinstance(array, torch.Tensor):
            t = array.to(device=self.device, dtype=self.dtype)
        else:
            t = torch.as_tensor(np.asarray(array, dtype=np.float64), dtype=self.dtype, device=self.device)
        return t if t.dim() == 2 else t.reshape(-1, self.n_params)

    def init_models(self, n_models: int, scheme: str, rng) -> torch.Tensor:
        """``"default"`` (the module's own torch initialisation), ``"gaussian"`` (N(0, 0.01^2)) or ``"zeros"``."""
        scheme = check_choice("init", scheme, ("default", "gaussian", "zeros"))
        n_models = check_int("n_models", n_models, low=1)
        seeds = rng.integers(0, 2**63 - 1, size=n_models)
        if scheme == "default":
            out = torch.stack([self.model.init(int(s)) for s in seeds])  # loop over models
        elif scheme == "zeros":
            out = torch.zeros((n_models, self.n_params), dtype=self.dtype, device=self.device)
        else:
            g = torch.Generator(device="cpu")
            g.manual_seed(int(seeds[0]))
            out = (0.01 * torch.randn((n_models, self.n_params), generator=g, dtype=torch.float64)).to(
                self.device, self.dtype)
        return self.tie_shared(out)

    def tie_shared(self, models) -> torch.Tensor:
        """Give every row of a block the shared coordinates of the block's first row."""
        models = self.from_numpy(models)
        if self.shared is None or models.shape[0] % self.share_block:
            return models
        out = models.clone()
        for start in range(0, out.shape[0], self.share_block):
            out[start:start + self.share_block, self.shared] = out[start, self.shared]
        return out

    def _block(self, M: int) -> int:
        if M % self.share_block:
            raise ValueError(f"with weight sharing a model stack must hold whole blocks of share_block="
                             f"{self.share_block} models, got {M}")
        return self.share_block

    def _share_gradient(self, G: torch.Tensor) -> torch.Tensor:
        """Shared coordinates: the gradient w.r.t. the one shared copy = the sum over the block's models."""
        if self.shared is None:
            return G
        M = G.shape[0]
        for start in range(0, M, self._block(M)):
            blk = slice(start, start + self.share_block)
            G[blk, self.shared] = G[blk][:, self.shared].sum(0)
        return G

    # ----------------------------------------------- data access (k-FED, PACFL, FedSoft)
    def client_features(self, clients=None) -> tuple[np.ndarray, np.ndarray]:
        """Each selected client's inputs, flattened to feature rows: ``(F (c, n_max, D), n (c,))`` numpy.

        k-FED and PACFL cluster the data points themselves (images as pixel vectors, as their papers do);
        rows beyond ``n[i]`` are padding.  ``F`` keeps the model's float dtype to halve its memory in float32.
        """
        idx = self._index(clients)
        X = self.X[idx].flatten(2)
        X = X if X.is_floating_point() else X.to(self.dtype)
        return X.cpu().numpy(), self.n_samples[idx.cpu().numpy()].copy()

    def client_labels(self, clients=None) -> np.ndarray:
        """Each selected client's integer targets ``(c, n_max)`` numpy, rows aligned with :meth:`client_features`
        (PACFL's per-class subspaces, the authors' code); entries beyond ``n[i]`` are padding."""
        return self.y[self._index(clients)].cpu().numpy()

    def best_model_fractions(self, models, clients=None) -> np.ndarray:
        """``u[i, j]``: the fraction of client i's samples on which model j has the smallest loss: ``(c, M)``.

        FedSoft's importance weights (Ruan & Joe-Wong 2022, Sec. 4); ties go to the lowest model index.
        """
        models = self.from_numpy(models)
        idx = self._index(clients)
        M, c, n_max = models.shape[0], len(idx), self.X.shape[1]
        out = np.empty((c, M))
        with torch.no_grad():
            for sl in self._chunks(c, n_max * self._act * 1.5):  # chunks bound memory; one pass per model
                rows = idx[sl]
                b = len(rows)
                Xb, yb = self.X[rows].flatten(0, 1), self.y[rows].flatten(0, 1)
                L = torch.stack([self.model.sample_losses(models[j], Xb, yb).view(b, n_max) for j in range(M)], 2)
                best = torch.nn.functional.one_hot(L.argmin(2), M).to(self.dtype)  # (b, n_max, M)
                out[sl] = as_numpy((best * self.w[rows][:, :, None]).sum(1))
        return out

    # ------------------------------------- representation (FedProto, FedPAC, FedALA)
    def representation(self):
        """The feature extractor / head split of the model (:class:`nets.representation.Representation`)."""
        if getattr(self, "_rep", None) is None:
            from .representation import Representation

            self._rep = Representation(self.model)
        return self._rep

    def head_mask(self) -> np.ndarray:
        """Boolean ``(P,)`` mask of the classifier head's coordinates (the last linear layer)."""
        return self.representation().head_mask.copy()

    def class_statistics(self, models, labels, clients=None):
        """Per client and class: counts, prototypes, mean squared norms (``nets.representation.class_statistics``)."""
        from .representation import class_statistics

        return class_statistics(self, self.representation(), models, labels, clients)

    def aligned_update(self, models, labels, steps: int, lr, prototypes=None, lam: float = 0.0,
                       train: str = "all", clients=None, collect: dict | None = None):
        """Local steps with the prototype alignment term (:func:`nets.representation.aligned_update`)."""
        from .representation import aligned_update

        return aligned_update(self, self.representation(), models, labels, steps, lr, prototypes, lam, train,
                              clients, collect=collect)

    def layer_slices(self) -> list[slice]:
        """Coordinate range of every layer of the model, input to output."""
        from .representation import layer_slices

        return layer_slices(self.model)

    def subsample(self, starts, sizes) -> TorchBackend:
        """A view whose client i holds only its samples ``starts[i] : starts[i] + sizes[i]`` (no data copy)."""
        starts = np.asarray(starts, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        if starts.shape != (self.n_clients,) or sizes.shape != (self.n_clients,) or sizes.min(initial=1) < 1 \
                or starts.min(initial=0) < 0 or np.any(starts + sizes > self.n_samples):
            raise ValueError(f"starts and sizes must be {self.n_clients} windows inside each client's samples")
        view = copy.copy(self)
        pos = torch.arange(self.X.shape[1], device=self.device)[None, :]
        st = torch.as_tensor(starts, device=self.device)[:, None]
        view.mask = ((pos >= st) & (pos < st + torch.as_tensor(sizes, device=self.device)[:, None])).to(self.dtype)
        view.n_samples = sizes.copy()
        view._n = torch.as_tensor(sizes, device=self.device)
        view.w = view.mask / view._n[:, None].to(self.dtype)
        return view

    def select(self, index, sizes) -> TorchBackend:
        """A view whose client i holds only its samples ``index[i, :sizes[i]]`` (positions in its stored order),
        gathered into a smaller batch, so that a gradient costs ``sizes[i]`` samples, not ``n_i``."""
        index = np.asarray(index, dtype=np.int64)
        sizes = np.asarray(sizes, dtype=np.int64)
        m = self.n_clients
        if index.ndim != 2 or index.shape[0] != m or sizes.shape != (m,) or sizes.min(initial=1) < 1 \
                or np.any(sizes > index.shape[1]) or index.min(initial=0) < 0 \
                or np.any(index >= self.n_samples[:, None]):
            raise ValueError(f"index must be ({m}, width) positions inside each client's samples and sizes "
                             f"{m} counts in 1..width")
        view = copy.copy(self)
        idx = torch.as_tensor(index, device=self.device)
        rows = torch.arange(m, device=self.device)[:, None]
        view.X, view.y = self.X[rows, idx], self.y[rows, idx]
        view._n = torch.as_tensor(sizes, device=self.device)
        view.mask = (torch.arange(index.shape[1], device=self.device)[None, :] < view._n[:, None]).to(self.dtype)
        view.n_samples = sizes.copy()
        view.w = view.mask / view._n[:, None].to(self.dtype)
        return view

    # ------------------------------------------------------------- data regimes
    def at_round(self, t: int):
        """Fixed data: the backend itself; sets the round index that seeds minibatches and the step decay."""
        self._round = int(t) + self.round_offset
        self._calls = 0
        return self, self


def _one_client(g_fn):
    """Apply a single-client gradient to a chunk holding exactly one client (the looped path)."""
    def apply(params, xb, yb, wb):
        g = g_fn({n: p[0] for n, p in params.items()}, xb[0], yb[0], wb[0])
        return {n: v[None] for n, v in g.items()}
    return apply
