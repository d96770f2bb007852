"""The server's model backend: the algorithms of :mod:`synth.algorithms` run unchanged, their clients are SuperNodes.

:class:`FederatedBackend` implements :class:`synth.algorithms.backend.ModelBackend`.  The operations that need a
client's data are exchanges of the client contract's messages (``docs/flower-contract.md``) with the clients that
the algorithm names, one message per client: losses (``query.losses``), local steps and local models (``train``),
gradients (``query.gradient``); the operations on model stacks (averaging, trimmed means, steps, distances,
initialisation) run on the server, on a :class:`nets.backend.TorchBackend` that holds no data.  So each algorithm
exists once: IFCA, SR-FCA and CLoVE decide exactly as in ``nets run``, and only where the numbers come from
differs.  What ``nets run``'s local training does beyond the contract's plain steps is decided here and sent in
the config: the step size after ``lr_decay`` (``lr``) and, with minibatches, each client's sample order
(``order``: its row of the draw :meth:`nets.backend.TorchBackend._draw_batches` makes for the clients of the same
call), so ``nets flower`` and ``nets run`` take the same steps.

Lost clients.  A client that fails (its ClientApp raises) or does not answer within the exchange's timeout is
*lost* for that call; :attr:`FederatedBackend.lost` names the lost clients of the last call.  A call goes on
without them: their loss rows are NaN and the algorithm drops them from the round's participants
(:func:`synth.algorithms.common.answered`: IFCA journal Alg. 2's ``M_t``, CLoVE Alg. 1's ``M^(t)``); a client
lost after it answered the round's losses leaves the round's aggregate: its cluster's model is the average of the
updates that arrived (the model stays where it was only when none of its clients' updates did;
:meth:`FederatedBackend.combine`).  SR-FCA resumes as :class:`synth.algorithms.srfca.SRFCA` does on any backend
with ``lost`` (a lost client's local model or gradient row leaves ONE_SHOT's graph or that TrimmedMeanGD step); a
local model that did not arrive is a NaN row.

The public strategies (:mod:`nets.flower.clustered`, and so ``nets flower``) run their estimators on this backend.
With ``choose`` (IFCA's ``client_choice``) the round's losses come from one ``train`` (or ``query.gradient``)
exchange that carries every model with ``config["choose"] = "lowest-loss"``: each client returns its losses and
the update of (or gradient at) its lowest-loss model of every run, which the estimator's ``local_update`` (one
call per run) and ``weighted_gradients`` of the same round then take; the estimator assigns by the same argmin of
the same losses, so the decisions are those of two exchanges, with half the messages.  Integer entries
(``integer``: BatchNorm's ``num_batches_tracked``) are not averaged: a model averaged over clients takes the
largest of their values, a gradient step leaves them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from synth.validation import check_choice, check_int, check_real

from ..backend import TorchBackend

__all__ = ["Answers", "FederatedBackend"]

# operations on model stacks: no client data, computed on the server
_STACK_OPS = ("trimmed_mean", "step", "project", "distances", "take", "concat", "to_numpy", "from_numpy",
              "init_models", "tie_shared")


@dataclass
class Answers:
    """The answers of one exchange, in the order of the clients asked: who answered, their rows and statistics."""

    answered: np.ndarray  # (c,) bool
    rows: np.ndarray | None  # (c, r, P) in the run's precision, NaN where not answered; None if nobody did
    metrics: dict[str, np.ndarray]  # name -> (c, L) float64, NaN where not answered

    def table(self, name: str, width: int) -> np.ndarray:
        """The statistic ``name``: ``(c, width)``, all NaN when no client answered."""
        out = self.metrics.get(name)
        return np.full((len(self.answered), width), np.nan) if out is None else out

    def stack(self, r: int, P: int, dtype) -> np.ndarray:
        """The answered rows: ``(c, r, P)``, all NaN when no client answered."""
        return np.full((len(self.answered), r, P), np.nan, dtype=dtype) if self.rows is None else self.rows


Exchange = Callable[..., Answers]


class FederatedBackend:
    """:class:`~synth.algorithms.backend.ModelBackend` whose data operations are answered by Flower clients.

    Parameters
    ----------
    exchange : ``exchange(action, clients, config, *, common=None, rows=None, each=None, runs=0) -> Answers``:
        sends one message per client (indices into the federation) and collects the answers
        (:meth:`nets.flower.clustered.ClusteredStrategy._engine_exchange`).
    stacks : the operations on model stacks: a :class:`~nets.backend.TorchBackend` of the run's network and
        precision (it holds no client data and is never asked for losses or gradients), or float64 numpy rows
        (:class:`nets.flower.clustered._Replies`).
    n_samples : ``(m,)`` training samples of each client; replaced by the ``n`` the clients' replies report.
    batch_size : the run's minibatch size (``None`` = full batch): local-training calls are counted as the torch
        backend counts them, and each client is sent its row of the draw ``nets run`` makes for the call.
    seed : the torch backend's seed (``nets run``'s batch stream): the minibatch draws.
    n_max : the federation's padded samples per client (the width of ``nets run``'s draw); default the most.
    lr_decay : the step size's factor per round (``lr * lr_decay**round``, as the torch backend's local steps).
    integer : ``(P,)`` bool, the model's integer entries (module docstring); default none.
    choose, runs : the message that carries the client's choice (``"train"`` or ``"query.gradient"``) over ``runs``
        runs of models; ``None``: ``query.losses`` first, then one model per client.
    normalise : a client lost in a gradient exchange leaves the round: the others' weights keep their total
        (``"total"``: IFCA's ``1 / |M_t|`` over the clients that answered) or each model's (``"cluster"``: CLoVE's
        ``n_i``-weighted mean among the model's answering clients).
    local_start : ``local_start() -> (1, P)``, the local models' common start (SR-FCA's ONE_SHOT, Local).
    step_sizes : ``step_sizes() -> list``, each run's clients' step size before ``lr_decay`` (sent with ``choose``).
    on_round : ``on_round(t)``, called when the estimator starts round ``t``.
    """

    default_init = "default"

    def __init__(self, exchange: Exchange, stacks, n_samples, *, batch_size: int | None = None, seed: int = 0,
                 n_max: int | None = None, lr_decay: float = 1.0, integer: np.ndarray | None = None,
                 choose: str | None = None, runs: int = 1, normalise: str = "total",
                 local_start: Callable[[], np.ndarray] | None = None,
                 step_sizes: Callable[[], list[float]] | None = None, on_round: Callable[[int], None] | None = None):
        self._exchange = exchange
        self._stacks = stacks
        self.n_samples = np.asarray(n_samples, dtype=np.int64)
        self.n_clients, self.n_params = len(self.n_samples), stacks.n_params
        self.batch_size = batch_size
        self.seed, self.lr_decay = int(seed), float(lr_decay)
        self.n_max = int(self.n_samples.max(initial=1)) if n_max is None else int(n_max)
        self.lost: set[int] = set()
        self._round, self._calls = 0, 0
        self._lost_rows: tuple[Any, np.ndarray] | None = None  # the last local_update's output, lost rows
        self._torch = isinstance(stacks, TorchBackend)  # torch tensors in its precision, else float64 numpy rows
        self._np_dtype = torch.empty(0, dtype=stacks.dtype).numpy().dtype if self._torch else np.dtype(np.float64)
        self._integer = np.zeros(self.n_params, dtype=bool) if integer is None else np.asarray(integer, dtype=bool)
        self.choose, self.runs, self.normalise = choose, int(runs), normalise
        self._local_start, self._step_sizes, self._on_round = local_start, step_sizes, on_round
        self._chosen: dict[int, np.ndarray] = {}  # client -> its (runs, P) updates or gradients of the round
        self._chose = False  # the round's choice exchange is done (a later losses call is the final pass)
        self._run = 0
        self.round_losses = (np.zeros(0, dtype=np.int64), np.zeros((0, 0)))  # answering clients, their losses

    def __getattr__(self, name: str):
        if name in _STACK_OPS:
            return getattr(self._stacks, name)
        raise AttributeError(f"{type(self).__name__} has no {name!r} (an operation the Flower clients do not offer)")

    # ------------------------------------------------------------------ helpers
    def _index(self, clients) -> np.ndarray:
        return np.arange(self.n_clients) if clients is None else np.asarray(clients, dtype=np.int64)

    def _rows(self, models) -> np.ndarray:
        """The stack in the run's precision, as numpy (float32 rows stay float32 on the wire)."""
        rows = self._stacks.from_numpy(models)
        return rows.detach().cpu().numpy() if self._torch else np.asarray(rows)

    def _float64(self, models) -> np.ndarray:
        return np.asarray(self._stacks.to_numpy(models), dtype=np.float64)

    def _ask(self, action: str, idx: np.ndarray, config: dict, **payload) -> Answers:
        config = {"round": self._round, **config}
        ans = self._exchange(action, idx, config, **payload)
        self.lost = {int(a) for a in idx[~ans.answered]}
        if "n" in ans.metrics:  # each client's weight as its replies say (a float key is kept as it is)
            self.n_samples = self.n_samples.astype(np.float64, copy=False)
            self.n_samples[idx[ans.answered]] = ans.metrics["n"][ans.answered, 0]
        return ans

    def _training(self, idx: np.ndarray, steps: int, lr: np.ndarray) -> list[dict]:
        """Each client's settings of a local-training call: its step size after ``lr_decay`` and, with minibatches,
        its sample order.

        ``nets run`` draws one ``(c, n_max)`` matrix of sort keys per call for the ``c`` clients of the call, from
        a generator seeded by (seed, round, call index) (:meth:`nets.backend.TorchBackend._draw_batches`); client
        ``a``'s order is its row's argsort, padding last, of which its ``n_i`` samples.
        """
        each = [{"lr": float(v * self.lr_decay ** self._round)} for v in lr]
        if self.batch_size is None or steps == 0:
            return each
        ss = np.random.SeedSequence([self.seed, self._round, self._calls])
        self._calls += 1
        gen = torch.Generator(device="cpu")
        gen.manual_seed(int(ss.generate_state(1, np.uint64)[0] % (2**63)))
        keys = torch.rand((len(idx), self.n_max), generator=gen)
        for a, i in enumerate(idx):
            n = int(self.n_samples[i])
            row = keys[a].masked_fill(torch.arange(self.n_max) >= n, 2.0)  # padding sorts last
            each[a].update({"order": row.argsort()[:n].tolist(), "batch-size": int(self.batch_size)})
        return each

    def _tensor(self, rows: np.ndarray):
        if not self._torch:
            return np.asarray(rows, dtype=np.float64)
        return torch.as_tensor(rows, dtype=self._stacks.dtype, device=self._stacks.device)

    def distances(self, a, b) -> np.ndarray:
        """Pairwise l2 distances; a local model that did not arrive (a NaN row) is at NaN distance from all."""
        a, b = self._float64(a), self._float64(b)
        ok_a, ok_b = np.isfinite(a).all(1), np.isfinite(b).all(1)
        D = np.full((len(a), len(b)), np.nan)
        D[np.ix_(ok_a, ok_b)] = self._stacks.distances(a[ok_a], b[ok_b])
        return D

    # --------------------------------------------------------------- evaluation
    def losses(self, models, clients=None) -> np.ndarray:
        """``f_i(models[j])``: ``(c, M)`` float64, NaN rows for lost clients; with ``choose``, from the round's one
        exchange (module docstring)."""
        idx = self._index(clients)
        M = self._rows(models)
        if not len(idx):
            L = np.zeros((0, len(M)))
        elif self.choose is None or self._chose:
            L = self._ask("query.losses", idx, {}, common=M).table("losses", len(M))
        else:
            self._chose = True
            lrs = self._step_sizes()
            # the round's step size (lr_decay), as local_update's train messages carry it; several step sizes
            # (IFCA's restarts over step sizes): run r's, a list of one per run
            decayed = [float(v * self.lr_decay ** self._round) for v in lrs]
            each = [{"lr": decayed[0] if len(set(lrs)) == 1 else decayed}] * len(idx) if self.choose == "train" and (
                self.lr_decay != 1.0 or len(set(lrs)) > 1) else None
            ans = self._ask(self.choose, idx, {}, common=M, runs=self.runs, each=each)
            L = ans.table("losses", len(M))
            rows = ans.stack(self.runs, self.n_params, np.float64)
            self._chosen = {int(i): rows[a] for a, i in enumerate(idx) if ans.answered[a]}
        ok = ~np.isin(np.arange(len(idx)), sorted(self.lost))
        self.round_losses = (idx[ok], L[ok])
        return L

    # ---------------------------------------------------- first-order information
    def client_gradients(self, models, labels, clients=None):
        """``grad f_i(models[labels[i]])``: ``(c, P)``; a lost client's row is zero, integer entries get none."""
        idx = self._index(clients)
        M, labels = self._rows(models), np.asarray(labels, dtype=np.int64)
        if not len(idx):
            return self._tensor(np.zeros((0, self.n_params)))
        ans = self._ask("query.gradient", idx, {}, rows=[M[j:j + 1] for j in labels])
        G = np.nan_to_num(ans.stack(1, self.n_params, M.dtype)[:, 0], nan=0.0)
        G[:, self._integer] = 0.0  # a step leaves the integer entries
        return self._tensor(G)

    def losses_and_weighted_gradients(self, models, choose, clients=None):
        """``losses``, then ``weights = choose(losses, rows)``, then ``weighted_gradients`` (two exchanges)."""
        L = self.losses(models, clients)
        W = np.asarray(choose(L, np.arange(L.shape[0])), dtype=np.float64)
        return L, W, self.weighted_gradients(models, W, clients)

    def weighted_gradients(self, models, weights, clients=None):
        """``G[j] = sum_i weights[i, j] grad f_i(models[j])``, each client at its one model (one-hot weights).  A
        client lost in this exchange leaves the round (``normalise``).  Integer entries get no gradient."""
        idx, W = self._index(clients), np.array(weights, dtype=np.float64)
        G = np.zeros((W.shape[1], self.n_params))
        if self.choose is not None and len(idx):  # the round's choice exchange brought every run's gradient
            k = W.shape[1] // self.runs
            grads = np.stack([self._chosen[int(i)] for i in idx])  # (c, runs, P)
            for r in range(self.runs):  # a few runs; each run's clients and models in one product
                G[r * k:(r + 1) * k] = W[:, r * k:(r + 1) * k].T @ grads[:, r]
        ask = np.flatnonzero(W.any(1))
        if self.choose is None and len(ask):  # one model per client (no restarts without the client's choice)
            cols, M = W[ask].argmax(1), self._rows(models)
            ans = self._ask("query.gradient", idx[ask], {}, rows=[M[j:j + 1] for j in cols],
                            each=[{"cluster": int(j)} for j in cols])
            w, got = W[ask, cols], ans.answered
            groups = [np.ones(len(w), dtype=bool)] if self.normalise == "total" else [cols == j for j in set(cols)]
            for g in groups:
                if (g & got).any():
                    w[g & got] *= w[g].sum() / w[g & got].sum()
            w = np.where(got, w, 0.0)
            np.add.at(G, cols[got], w[got, None] * ans.stack(1, self.n_params, np.float64)[got, 0])
        G[:, self._integer] = 0.0
        return self._tensor(G)

    def local_update(self, models, labels, steps: int, lr, clients=None, state=None):
        """Each client runs ``steps`` local steps from ``models[labels[i]]``: ``(c, P)``; a lost client's row is the
        model it was sent, which :meth:`combine` leaves out of the average.  With ``choose``: the updates the
        round's choice exchange brought, run after run (IFCA's model averaging asks run after run)."""
        if state is not None:
            raise ValueError("local_update's state (an optimiser carried across calls) is not offered by Flower "
                             "clients")
        steps = check_int("steps", steps, low=0)
        idx = self._index(clients)
        if self.choose is not None:
            r, self._run, self._lost_rows = self._run, self._run + 1, None
            return self._tensor(np.stack([self._chosen[int(i)][r] for i in idx]) if len(idx) else
                                np.zeros((0, self.n_params)))
        M, labels = self._rows(models), np.asarray(labels, dtype=np.int64)
        if len(labels) != len(idx):
            raise ValueError(f"labels must hold one model index per selected client ({len(idx)}), got {len(labels)}")
        lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), (len(M),))
        each = self._training(idx, steps, lr[labels])  # a call without clients counts too, as in nets run
        for a, j in enumerate(labels):  # the model's index among those of the call (the contract's "cluster")
            each[a]["cluster"] = int(j)
        if not len(idx):
            return self._tensor(np.zeros((0, self.n_params)))
        ans = self._ask("train", idx, {"local-steps": steps}, rows=[M[j:j + 1] for j in labels], each=each)
        out = ans.stack(1, self.n_params, M.dtype)[:, 0]
        out[~ans.answered] = M[labels[~ans.answered]]
        result = self._tensor(out)
        self._lost_rows = (result, ~ans.answered) if (~ans.answered).any() else None
        return result

    def combine(self, weights, values):
        """``weights.T @ values`` on the server; averaging the output of :meth:`local_update` leaves its lost
        clients out, and each integer entry is the largest of the averaged clients' (BatchNorm's
        ``num_batches_tracked``: the most batches any of them has seen).

        :func:`synth.algorithms.common.apply_round` averages the clients' updates with column-normalised weights.
        A lost client's row is the model it was sent, so each column with an update that arrived gets the lost
        rows' weight 0 and is normalised again over the clients that answered; a column of lost clients only keeps
        its weights, so its average is the model sent: it stays where it was.
        """
        W = np.array(weights, dtype=np.float64)
        lost = self._lost_rows
        if lost is not None and values is lost[0]:
            gone = lost[1]
            total = W.sum(0)
            some = (W[~gone] != 0).any(0)  # columns with an update that arrived
            W[np.ix_(gone, some)] = 0.0
            kept = W[:, some].sum(0)
            W[:, some] *= total[some] / np.where(kept != 0, kept, 1.0)
        out = self._stacks.combine(W, values)
        if not len(out) or not self._integer.any():
            return out
        if lost is not None and values is lost[0]:
            W[lost[1]] = 0.0  # a lost client's row is the model it was sent, not an update
        new, averaged = self._float64(out), self._float64(values)
        for g in np.flatnonzero((W != 0).any(0)):  # a model averaging clients: the largest of their integer entries
            new[g, self._integer] = averaged[W[:, g] != 0][:, self._integer].max(0)
        return self._tensor(new)

    def local_models(self, method: str = "gd", steps: int = 100, lr: float = 0.1, init=None, clients=None):
        """Every client's own model after ``steps`` local steps from the shared start (or from ``init``);
        ``clients``: those clients' only (SR-FCA asks again for the local models that did not arrive)."""
        method = check_choice("method", method, ("erm", "gd"))
        if method == "erm":
            raise ValueError("method='erm' (exact local ERM) is not defined for neural networks; use method='gd'")
        lr = check_real("lr", lr, low=0.0, low_inclusive=False)
        steps = check_int("steps", steps, low=0)
        start = self._rows(self._local_start() if init is None else init)
        start = np.broadcast_to(start, (self.n_clients, self.n_params)) if len(start) == 1 else start
        if start.shape != (self.n_clients, self.n_params):
            raise ValueError(f"init must have shape ({self.n_clients}, {self.n_params}), got {start.shape}")
        idx = self._index(clients)
        ans = self._ask("train", idx, {"local-steps": steps}, rows=[start[a:a + 1] for a in idx],
                        each=self._training(idx, steps, np.full(len(idx), lr)))
        return self._tensor(ans.stack(1, self.n_params, self._np_dtype)[:, 0])

    # ------------------------------------------------------------- data regimes
    def at_round(self, t: int):
        """Fixed data on the clients; the round index travels with every message (step decay, minibatch seeds)."""
        if self._on_round is not None:
            self._on_round(t)
        self._round, self._calls = int(t), 0
        self._chose, self._run, self._chosen = False, 0, {}
        return self, self
