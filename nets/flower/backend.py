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

The gradients of several clients at their models (``weighted_gradients``) and the local models' start
(``_local_start``) are the subclass's: :class:`nets.flower.clustered._ClientsBackend`, the public strategies'
backend (a client lost there leaves the round's weights, which the others' keep).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

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
    exchange : ``exchange(action, clients, config, *, common=None, rows=None, each=None) -> Answers``: sends
        one message per client (indices into the federation) and collects the answers
        (:meth:`nets.flower.clustered.ClusteredStrategy._engine_exchange`).
    stacks : a :class:`~nets.backend.TorchBackend` of the run's network and precision, for the operations on
        model stacks (it holds no client data and is never asked for losses or gradients).
    n_samples : ``(m,)`` training samples of each client (reported by the clients).
    batch_size : the run's minibatch size (``None`` = full batch): local-training calls are counted as the torch
        backend counts them, and each client is sent its row of the draw ``nets run`` makes for the call.
    seed : the torch backend's seed (``nets run``'s batch stream): the minibatch draws and the local models' start.
    n_max : the federation's padded samples per client (the width of ``nets run``'s draw); default the most.
    lr_decay : the step size's factor per round (``lr * lr_decay**round``, as the torch backend's local steps).
    """

    default_init = "default"

    def __init__(self, exchange: Exchange, stacks: TorchBackend, n_samples, *, batch_size: int | None = None,
                 seed: int = 0, n_max: int | None = None, lr_decay: float = 1.0):
        self._exchange = exchange
        self._stacks = stacks
        self.n_samples = np.asarray(n_samples, dtype=np.int64)
        self.n_clients, self.n_params = len(self.n_samples), stacks.n_params
        self.batch_size = batch_size
        self.seed, self.lr_decay = int(seed), float(lr_decay)
        self.n_max = int(self.n_samples.max(initial=1)) if n_max is None else int(n_max)
        self.lost: set[int] = set()
        self._round, self._calls = 0, 0
        self._lost_rows: tuple[torch.Tensor, np.ndarray] | None = None  # the last local_update's output, lost rows
        # the public strategies' stacks are numpy rows in float64 (nets.flower.clustered), nets flower's torch tensors
        self._torch = isinstance(stacks, TorchBackend)
        self._np_dtype = torch.empty(0, dtype=stacks.dtype).numpy().dtype if self._torch else np.dtype(np.float64)

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

    def _ask(self, action: str, idx: np.ndarray, config: dict, **payload) -> Answers:
        config = {"round": self._round, **config}
        ans = self._exchange(action, idx, config, **payload)
        self.lost = {int(a) for a in idx[~ans.answered]}
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

    def _tensor(self, rows: np.ndarray) -> torch.Tensor:
        if not self._torch:
            return np.asarray(rows, dtype=np.float64)
        return torch.as_tensor(rows, dtype=self._stacks.dtype, device=self._stacks.device)

    # --------------------------------------------------------------- evaluation
    def losses(self, models, clients=None) -> np.ndarray:
        """``f_i(models[j])``: ``(c, M)`` float64, NaN rows for lost clients."""
        idx = self._index(clients)
        M = self._rows(models)
        if not len(idx):
            return np.zeros((0, len(M)))
        return self._ask("query.losses", idx, {}, common=M).table("losses", len(M))

    # ---------------------------------------------------- first-order information
    def client_gradients(self, models, labels, clients=None) -> torch.Tensor:
        """``grad f_i(models[labels[i]])``: ``(c, P)``; a lost client's row is zero."""
        idx = self._index(clients)
        M, labels = self._rows(models), np.asarray(labels, dtype=np.int64)
        if not len(idx):
            return self._tensor(np.zeros((0, self.n_params)))
        ans = self._ask("query.gradient", idx, {}, rows=[M[j:j + 1] for j in labels])
        return self._tensor(np.nan_to_num(ans.stack(1, self.n_params, M.dtype)[:, 0], nan=0.0))

    def losses_and_weighted_gradients(self, models, choose, clients=None):
        """``losses``, then ``weights = choose(losses, rows)``, then ``weighted_gradients`` (two exchanges)."""
        L = self.losses(models, clients)
        W = np.asarray(choose(L, np.arange(L.shape[0])), dtype=np.float64)
        return L, W, self.weighted_gradients(models, W, clients)

    def local_update(self, models, labels, steps: int, lr, clients=None, state=None) -> torch.Tensor:
        """Each client runs ``steps`` local steps from ``models[labels[i]]``: ``(c, P)``; a lost client's row is the
        model it was sent, which :meth:`combine` leaves out of the average."""
        if state is not None:
            raise ValueError("local_update's state (an optimiser carried across calls) is not offered by Flower "
                             "clients")
        steps = check_int("steps", steps, low=0)
        idx = self._index(clients)
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

    def combine(self, weights, values) -> torch.Tensor:
        """``weights.T @ values`` on the server; averaging the output of :meth:`local_update` leaves its lost
        clients out.

        :func:`synth.algorithms.common.apply_round` averages the clients' updates with column-normalised weights.
        A lost client's row is the model it was sent, so each column with an update that arrived gets the lost
        rows' weight 0 and is normalised again over the clients that answered; a column of lost clients only keeps
        its weights, so its average is the model sent: it stays where it was.
        """
        lost = self._lost_rows
        if lost is not None and values is lost[0]:
            W = np.array(weights, dtype=np.float64)
            gone = lost[1]
            total = W.sum(0)
            some = (W[~gone] != 0).any(0)  # columns with an update that arrived
            W[np.ix_(gone, some)] = 0.0
            kept = W[:, some].sum(0)
            W[:, some] *= total[some] / np.where(kept != 0, kept, 1.0)
            weights = W
        return self._stacks.combine(weights, values)

    def local_models(self, method: str = "gd", steps: int = 100, lr: float = 0.1, init=None,
                     clients=None) -> torch.Tensor:
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
        self._round = int(t)
        self._calls = 0
        return self, self
