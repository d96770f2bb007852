"""numpy model backend for the synthetic federations (linear and logistic families).

Implements :class:`synth.algorithms.backend.ModelBackend` on a
:class:`~synth.federation.Federation`.  Models are rows of a ``(M, d)`` array.
Every operation is vectorised over clients; the only Python loops run over
*blocks* of clients, sized so that a block's data stays in the last-level
cache, which lets :meth:`GLMBackend.losses_and_weighted_gradients` read each
client's data from main memory once per round (loss of every model, the
assignment, and the gradient at the chosen model all come from the cached
block), and over the models of a small stack (``M <= 4``), where one BLAS
matrix-vector product per model is faster than a skinny GEMM.

Where a C compiler is available, small model stacks (up to 8 models)
take the fused kernel of :mod:`synth._kernels` instead (``GLMBackend.kernel``
says which path is in use): it streams each client's rows once and, with each
row in cache, forms the scores of all models and accumulates the gradients of all
of them, so a client's data is read from memory exactly once per round; only
the accumulators of the models a client is weighted on are then added into
``G``.  Larger stacks (IFCA's stacked restarts) keep the numpy path, where
GEMM is faster than ``M`` axpys per row.

Per-sample losses as functions of the score ``s = <theta, x>``:

* linear:   ``l = (s - y)^2``,                      ``dl/ds = 2 (s - y)``
* logistic: ``l = log(1 + e^s) - y s``,             ``dl/ds = sigmoid(s) - y``,
  plus ``(reg/2)||theta||^2`` per client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from . import _kernels
from .theta import pairwise_distances
from .validation import (
    check_choice,
    check_federation_data,
    check_federation_shape,
    check_int,
    check_random_state,
    check_real,
)

if TYPE_CHECKING:  # annotations only: synth.federation builds backends, so importing it here would be a cycle
    from .federation import Federation

__all__ = ["GLMBackend", "IllConditionedError"]

_SMALL_STACK = 4  # up to this many models, per-model gemv beats OpenBLAS' skinny GEMM
_BLOCK_BYTES = 8 * 2**20
# The fused kernel does M dot products and (without a guessed model) M axpys per row; GEMM wins once the stack
# has many models, whatever d.  `python bench/roofline.py --sweep-only [--blas-threads 1]` on the 2-core EPYC
# (bench/results/epyc2_sweep_*.json), d = 20-1000: up to 8 models fused took 0.44-0.92x numpy's time except on
# the tiniest problems with 2-4 models (< 0.3 ms a call, 1.1-1.3x: fixed costs); 12 models 0.63-1.17x; 20
# models 0.67-1.40x; 60 models 0.81-2.27x.
_FUSED_MAX_MODELS = 8
# Blocks of clients: the kernel writes per-client gradient accumulators, then `choose` and `combine` run in
# Python and the threads join.  Where all M accumulators are written, the buffer is kept cache resident (1 MiB,
# and at most 16 MiB of data streamed per block, half the last-level cache).  Where (nearly) every client has a
# guessed single model, it writes one accumulator per client and the per-block round trip dominates, so blocks
# grow to 8 MiB buffers with no data cap.  Measured at (400, 100, 1000, 4) with guesses: 1 MiB / 16 MiB
# 16.7 ms/iter, 8 MiB / no cap 13.6 ms/iter, 32 MiB no better; without guesses the small blocks are faster.
_FUSED_BUFFER_BYTES = 2**20
_FUSED_DATA_BYTES = 16 * 2**20
_FUSED_GUESSED_BUFFER_BYTES = 8 * 2**20
# A second thread pays only once a pass streams more than the last-level cache holds (measured on the 2-core
# EPYC, 16 MB L3: 80 MB per pass 0.65-0.9x the one-thread time, 32 MB 1.0x, 0.2-8 MB 1.1-1.6x, the data being
# cache resident across iterations).
_FUSED_PARALLEL_BYTES = 32 * 2**20


class IllConditionedError(ValueError):
    """An exact computation was asked on a (numerically) singular system."""


class GLMBackend:
    """Losses, gradients and local training on a synthetic federation (numpy).

    Parameters
    ----------
    federation : the sampled :class:`~synth.federation.Federation`.
    regime : ``"fixed"`` (the data as sampled, used every round), ``"fresh"``
        (new independent samples for identity estimation and for the gradient
        at every round: the theory's resampling, IFCA Sec. V and SR-FCA
        Thm 4.11) or ``"split"`` (IFCA Sec. V: the n points are cut into 2T
        disjoint subsets of n/(2T); round t uses subsets 2t and 2t+1).
    rounds : T, required for ``"split"``.
    random_state : seed of the fresh draws (``"fresh"`` only).
    kernel : ``"auto"`` (the compiled fused kernel where it can be built, else numpy), ``"fused"``
        (require it: an error if it cannot be had) or ``"numpy"``.  The fused and numpy
        paths agree to rounding; the fused path gives the same numbers for any ``threads`` and block size.
    threads : threads of the fused kernel (``None``: one for a pass over at most 32 MiB of data, which stays
        in cache; beyond that as many as numpy's BLAS may use now, at most 2, so a ``threadpoolctl`` limit --
        the Monte Carlo engine's one thread per trial -- is respected).

    Attributes
    ----------
    kernel : ``"fused"`` or ``"numpy"``: the path taken by :meth:`losses_and_weighted_gradients` and
        :meth:`losses` for stacks of up to 8 models (larger stacks always take numpy's GEMM).
    """

    def __init__(self, federation: Federation, regime: str = "fixed", rounds: int | None = None,
                 random_state=None, block_bytes: int = _BLOCK_BYTES, kernel: str = "auto",
                 threads: int | None = None):
        self.fed = federation
        self.regime = check_choice("regime", regime, ("fixed", "fresh", "split"))
        # shapes and counts first: the compiled kernel reads n_samples[i] rows of client i at fixed offsets, so
        # the counts are copied (read-only) once they are known to lie within the arrays
        self.n_samples = check_federation_shape(federation.X, federation.y, federation.n_samples)
        self.X, self.y = federation.X, federation.y
        self.dtype = self.X.dtype
        self.n_clients, n_max, self.n_params = self.X.shape
        self.family = check_choice("family", federation.family, ("linear", "logistic"))
        self.reg = check_real("reg", federation.reg, low=0.0) if self.family == "logistic" else 0.0
        self._inv_n = 1.0 / self.n_samples
        padded = bool(np.any(self.n_samples < n_max))
        # squared loss of a zero row with y = 0 is 0, so padding needs no mask there
        self._mask = federation.mask.astype(self.dtype) if (padded and self.family == "logistic") else None
        self._block_bytes = int(block_bytes)
        self._block = max(1, int(block_bytes // max(1, n_max * self.n_params * self.X.itemsize)))
        self.rounds = None
        if self.regime == "split":
            self.rounds = check_int("rounds", rounds, low=1)
            need = 2 * self.rounds
            if self.n_samples.min() < need:
                raise ValueError(f"regime='split' needs n >= 2*rounds = {need} samples per client, "
                                 f"got min n = {self.n_samples.min()}")
        self._seed = np.random.SeedSequence(check_random_state(random_state).integers(2**63))
        self._kernel_request = check_choice("kernel", kernel, ("auto", "fused", "numpy"))
        self.threads = None if threads is None else check_int("threads", threads, low=1)
        self._attach_kernel()

    def check_data(self) -> None:
        """Refuse data the losses cannot be computed on (non-finite, non-zero padding, logistic labels outside
        [0, 1]): :func:`synth.validation.check_federation_data`, run once per fit by every estimator."""
        check_federation_data(self.X, self.y, self.n_samples, self.family)

    def __getstate__(self) -> dict:
        # the loaded library and the addresses bound to it belong to this process: rebuilt on unpickling
        state = self.__dict__.copy()
        state["_fused"] = state["_fused_data"] = state["_fused_arrays"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._attach_kernel()

    def _attach_kernel(self) -> None:
        # per stack size M: each client's single model of the last pass (IFCA's identity, else -1) and the
        # guess for the next pass (that model if it held for the last two passes, else -1).  The kernel forms
        # the guessed model's gradient alone (1 axpy per row instead of M); a wrong guess costs a second
        # read of that client, never a different number
        self._guesses: dict[int, np.ndarray] = {}
        self._fused = self._fused_library()
        # the kernel holds addresses into these arrays: keep them alive even if X or y is rebound
        self._fused_arrays = (self.X, self.y)
        self._fused_data = None if self._fused is None else self._fused.bind(self.X, self.y)
        self.kernel = "numpy" if self._fused is None else "fused"

    def _fused_library(self) -> _kernels.FusedLibrary | None:
        if self._kernel_request == "numpy":
            return None
        lib = _kernels.load()
        why = None
        if lib is None:
            why = _kernels.status()["reason"]
        elif not _kernels.layout_ok(self.X, self.y):
            why = f"data of dtype {self.X.dtype} with strides {self.X.strides} (needs float32/float64, rows contiguous)"
        if why is None:
            return lib
        if self._kernel_request == "fused":
            raise ValueError(f"kernel='fused' is not available here: {why}; use kernel='auto' or 'numpy'")
        return None

    # ------------------------------------------------------------------ helpers
    def _blocks(self, clients: np.ndarray | None, n_models: int = 1):
        """Yield ``(positions, X_block (b, n_max, d), y_block, inv_n, mask)`` over blocks of clients.

        A block's data fits the cache budget, and so do its ``(n_models, b, n_max)``
        scores: with many models (SR-FCA's m x m cross-cluster losses) the
        scores, not the data, are what would overflow it.
        """
        n_max = self.X.shape[1]
        size = max(1, min(self._block, self._block_bytes // max(1, 8 * n_models * n_max)))
        if clients is None:
            for s in range(0, self.n_clients, size):
                e = min(s + size, self.n_clients)
                mask = None if self._mask is None else self._mask[s:e]
                yield slice(s, e), self.X[s:e], self.y[s:e], self._inv_n[s:e], mask
        else:
            for s in range(0, len(clients), size):
                idx = clients[s:s + size]
                mask = None if self._mask is None else self._mask[idx]
                yield slice(s, s + len(idx)), self.X[idx], self.y[idx], self._inv_n[idx], mask

    def _scores(self, flat: np.ndarray, models: np.ndarray) -> np.ndarray:
        """``flat @ models.T``: ``(rows, M)``.

        A small stack takes one BLAS matrix-vector product per model (faster than
        OpenBLAS' skinny GEMM) and comes back as a transposed view.
        """
        if len(models) <= _SMALL_STACK:
            out = np.empty((len(models), flat.shape[0]), dtype=flat.dtype)
            for j in range(len(models)):
                np.dot(flat, models[j], out=out[j])
            return out.T
        return flat @ models.T

    def _transpose_product(self, coef_t: np.ndarray, flat: np.ndarray) -> np.ndarray:
        """``coef_t @ flat`` as ``(M, d)`` for model-major ``coef_t`` of shape ``(M, rows)``."""
        if coef_t.shape[0] <= _SMALL_STACK:
            out = np.empty((coef_t.shape[0], flat.shape[1]), dtype=flat.dtype)
            for j in range(coef_t.shape[0]):
                np.dot(coef_t[j], flat, out=out[j])
            return out
        return coef_t @ flat

    def _pointwise(self, s: np.ndarray, y: np.ndarray, need_grad: bool):
        """Per-sample loss and d loss / d score for scores ``s`` and responses ``y`` (broadcast)."""
        if self.family == "linear":
            r = s - y
            return r * r, (2.0 * r if need_grad else None)
        loss = np.logaddexp(0.0, s) - y * s
        return loss, (_expit(s) - y if need_grad else None)

    def _reg_loss(self, models: np.ndarray) -> np.ndarray:
        if self.reg == 0.0:
            return 0.0
        return 0.5 * self.reg * np.einsum("md,md->m", models, models)

    def _clients(self, clients) -> np.ndarray | None:
        if clients is None:
            return None
        return np.asarray(clients, dtype=np.int64)

    def _count(self, clients) -> int:
        return self.n_clients if clients is None else len(clients)

    # --------------------------------------------------------------- evaluation
    def _fixed_squared_loss(self) -> bool:
        # the unregularised squared loss on data fixed across rounds: what the root-loss bounds assume
        return self.family == "linear" and self.reg == 0.0 and self.regime == "fixed"

    def root_loss_lipschitz(self) -> np.ndarray | None:
        """Per client ``s_i = sigma_max(X_i) / sqrt(n_i)``: ``|sqrt f_i(a) - sqrt f_i(b)| <= s_i ||a - b||``.

        Holds for the unregularised squared loss ``f_i(theta) = ||X_i theta - y_i||^2 / n_i`` (triangle
        inequality); ``None`` for other losses.  IFCA's convergence-aware stacks use it to certify that no
        client can change its cluster identity while the models stay within their reach.  Computed once, from
        the smaller of the two Gram matrices, padded by its rounding error bound.
        """
        if not self._fixed_squared_loss():
            return None
        if getattr(self, "_root_lip", None) is None:
            m, n_max, d = self.X.shape
            top = np.empty(m)
            step = max(1, int(2**27 // (self.X.itemsize * max(n_max, 1) * d)))  # bound each block's copy
            for s in range(0, m, step):  # blocks of clients, not single clients
                Xb = self.X[s:s + step]
                gram = Xb @ Xb.transpose(0, 2, 1) if n_max <= d else Xb.transpose(0, 2, 1) @ Xb
                top[s:s + step] = np.linalg.eigvalsh(gram.astype(np.float64))[:, -1]
                # the Gram in the data's precision errs by at most gamma_p ||X_i||_F^2 in norm (p = the inner
                # dimension, Higham Thm 3.5), eigvalsh by far less: a certified upper bound after the pad
                p_inner = d if n_max <= d else n_max
                u = np.finfo(self.X.dtype).eps / 2
                frob = np.einsum("bnd,bnd->b", Xb, Xb, dtype=np.float64)
                top[s:s + step] += 2 * p_inner * u / (1 - p_inner * u) * frob + 1e-12 * np.abs(top[s:s + step])
            self._root_lip = np.sqrt(np.maximum(top, 0.0) / self.n_samples)
        return self._root_lip

    def root_loss_error(self, root: np.ndarray, model_norm: np.ndarray) -> np.ndarray | None:
        """A bound on ``|computed sqrt f_i(theta) - exact sqrt f_i(theta)|`` for this backend's loss passes.

        ``root`` ``(m, ...)`` are computed root losses, ``model_norm`` (broadcast to ``root``'s trailing axes)
        the models' norms ``||theta||``.  Each score ``<x, theta>`` in the data's precision errs by at most
        ``gamma_d ||x|| ||theta||`` (Higham Thm 3.5), the residual by ``u |y|`` more, and the sum of ``n``
        squares by ``gamma_n`` relatively; by the triangle inequality in ``R^n`` the root loss errs by at most
        ``gamma_d ||X_i||_F ||theta|| / sqrt(n_i) + u rms(y_i) + gamma_n sqrt f_i``.  ``None`` where
        :meth:`root_loss_lipschitz` is.
        """
        if not self._fixed_squared_loss():
            return None
        if getattr(self, "_rounding_terms", None) is None:
            m, n_max, d = self.X.shape
            u = np.finfo(self.dtype).eps / 2
            fro, rms = np.empty(m), np.empty(m)
            for s in range(0, m, self._block):  # blocks of clients, not single clients
                e = s + self._block
                fro[s:e] = np.sqrt(np.einsum("bnd,bnd->b", self.X[s:e], self.X[s:e], dtype=np.float64))
                rms[s:e] = np.sqrt(np.einsum("bn,bn->b", self.y[s:e], self.y[s:e], dtype=np.float64))
            root_n = np.sqrt(self.n_samples)
            self._rounding_terms = (d * u / (1 - d * u) * fro / root_n, u * rms / root_n, 2 * n_max * u)
        coef, offset, rel = self._rounding_terms
        root = np.asarray(root, dtype=np.float64)
        shape = (-1,) + (1,) * (root.ndim - 1)
        # the relative error of the sum is gamma_n <= 2 n u; halved by the square root, doubled for slack
        return coef.reshape(shape) * np.asarray(model_norm, dtype=np.float64) + offset.reshape(shape) + rel * root

    def cluster_quadratics(self, labels: np.ndarray, n_groups: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(Q (g, P, P), q (g, P))`` float64 with ``sum_{i: labels_i = j} grad f_i(theta) = Q_j theta - q_j``.

        For the squared loss ``f_i = ||X_i theta - y_i||^2 / n_i``: ``Q_j = sum 2 X_i^T X_i / n_i`` and
        ``q_j = sum 2 X_i^T y_i / n_i`` over the clients of group ``j`` (IFCA's gradient step on a fixed
        partition is then linear).  ``None`` where :meth:`root_loss_lipschitz` is.
        """
        if not self._fixed_squared_loss():
            return None
        m, n_max, d = self.X.shape
        labels = np.asarray(labels, dtype=np.int64)
        Q = np.zeros((n_groups, d, d))
        q = np.zeros((n_groups, d))
        w = np.sqrt(2.0 / self.n_samples)
        for s in range(0, m, self._block):  # blocks of clients, each group's rows in one product
            e = min(s + self._block, m)
            Xb = self.X[s:e].astype(np.float64) * w[s:e, None, None]
            yb = self.y[s:e] * w[s:e, None]
            lab = labels[s:e]
            for j in np.unique(lab):  # loop over groups, not clients
                rows = Xb[lab == j].reshape(-1, d)
                Q[j] += rows.T @ rows
                q[j] += rows.T @ yb[lab == j].reshape(-1)
        return Q, q

    def losses(self, models: np.ndarray, clients=None) -> np.ndarray:
        """Empirical loss of every (selected) client on every model: ``(c, M)`` float64."""
        models = self.from_numpy(models)
        clients = self._clients(clients)
        if self._use_fused(len(models)):
            return self._fused_pass(models, None, clients)[0]
        out = np.empty((self._count(clients), len(models)))
        for pos, Xb, yb, inv_n, mask in self._blocks(clients, len(models)):
            b, n_max, d = Xb.shape
            S = self._scores(Xb.reshape(-1, d), models).reshape(b, n_max, -1)
            loss, _ = self._pointwise(S, yb[:, :, None], False)
            if mask is not None:
                loss = loss * mask[:, :, None]
            out[pos] = loss.sum(1) * inv_n[:, None]
        return out + self._reg_loss(models)

    # ---------------------------------------------------- first-order information
    def losses_and_weighted_gradients(self, models, choose, clients=None):
        """One pass per block: losses, ``weights = choose(losses, rows)``, and ``G = sum_i w_ij grad f_i``."""
        models = self.from_numpy(models)
        clients = self._clients(clients)
        if self._use_fused(len(models)):
            return self._fused_pass(models, choose, clients)
        c, M = self._count(clients), len(models)
        losses = np.empty((c, M))
        weights = np.empty((c, M))
        G = np.zeros((M, self.n_params))
        reg_loss = self._reg_loss(models)
        for pos, Xb, yb, inv_n, mask in self._blocks(clients, M):
            b, n_max, d = Xb.shape
            S = self._scores(Xb.reshape(-1, d), models).reshape(b, n_max, M)
            loss, dl = self._pointwise(S, yb[:, :, None], True)
            if mask is not None:
                loss, dl = loss * mask[:, :, None], dl * mask[:, :, None]
            L = loss.sum(1) * inv_n[:, None] + reg_loss
            W = np.asarray(choose(L, np.arange(pos.start, pos.stop)), dtype=np.float64)
            losses[pos], weights[pos] = L, W
            self._add_block_gradient(G, W, dl, inv_n, Xb)
        if self.reg:
            G += self.reg * models * weights.sum(0)[:, None]
        return losses, weights, G

    def _use_fused(self, n_models: int) -> bool:
        return self._fused is not None and n_models <= _FUSED_MAX_MODELS

    def _fused_pass(self, models: np.ndarray, choose, clients: np.ndarray | None):
        """:meth:`losses_and_weighted_gradients` (or, with ``choose=None``, :meth:`losses`) by the fused kernel.

        IFCA journal Alg. 2's identity estimation and gradient step (and any ``choose``) in one read of the data.
        Per block of clients the kernel returns each client's loss sums and its unscaled gradient sums for
        every model, reading the client's data once; ``choose`` then sees the block's losses exactly as on
        the numpy path, and the kernel adds ``w_ij / n_i`` times the accumulators of the nonzero weights
        into ``G``, client by client in order -- so the result does not depend on blocks or threads.  Where a
        client was weighted on a single model last time, only that model's gradient is formed first (see
        ``_guesses``); clients whose weights then fall elsewhere are run again in full.
        """
        lib = self._fused
        m, n_max, d = self.X.shape
        M = len(models)
        idx = np.arange(m, dtype=np.int64) if clients is None else _in_range(clients, m)
        c = len(idx)
        rows = np.ascontiguousarray(self.n_samples[idx], dtype=np.int64)
        inv_n = self._inv_n[idx]
        reg_loss = self._reg_loss(models)
        logistic = self.family == "logistic"
        itemsize = self.X.itemsize
        parts = self.threads
        if parts is None:  # a second thread only where the pass streams more than the cache holds
            parts = min(2, _kernels.blas_threads()) if c * n_max * d * itemsize > _FUSED_PARALLEL_BYTES else 1
        if choose is None:
            sums = np.empty((c, M))
            self._run_fused(lib, idx, rows, models, logistic, sums, None, parts)
            return sums * inv_n[:, None] + reg_loss, None, None
        losses = np.empty((c, M))
        weights = np.empty((c, M))
        G = np.zeros((M, d))
        state = self._guesses.setdefault(M, np.full((2, m), -1, dtype=np.int64)) if M > 1 else None
        last, guess = (None, None) if state is None else state
        stack = M * d * itemsize
        small = max(1, min(c, _FUSED_BUFFER_BYTES // stack, _FUSED_DATA_BYTES // max(1, n_max * d * itemsize)))
        guessed = guess is not None and (guess[idx] >= 0).mean() >= 0.9
        big = max(1, min(c, _FUSED_GUESSED_BUFFER_BYTES // stack)) if guessed else small
        buf = np.empty((max(small, big), M, d), dtype=self.dtype)
        sums = np.empty((len(buf), M))
        s = 0
        while s < c:
            # the first block is small: if its guesses fail (a new run from other models), the rest of the
            # pass drops them rather than reading most clients twice
            e = min(s + (big if guessed and s > 0 else small), c)
            b = e - s
            only = None if guess is None else np.ascontiguousarray(guess[idx[s:e]])
            self._run_fused(lib, idx[s:e], rows[s:e], models, logistic, sums[:b], buf[:b], parts, only)
            L = sums[:b] * inv_n[s:e, None] + reg_loss
            W = np.asarray(choose(L, np.arange(s, e)), dtype=np.float64)
            losses[s:e], weights[s:e] = L, W
            if guess is not None:
                nonzero = W != 0
                count = nonzero.sum(1)
                formed = (only >= 0) & nonzero[np.arange(b), np.maximum(only, 0)]
                # weighted on a model whose gradient was not formed: those clients again, in full
                missed = np.flatnonzero((only >= 0) & (count > formed))
                if len(missed):
                    redo = np.empty((len(missed), M, d), dtype=self.dtype)
                    self._run_fused(lib, idx[s:e][missed], rows[s:e][missed], models, logistic,
                                    np.empty((len(missed), M)), redo, parts)
                    buf[missed] = redo
                if len(missed) > 0.1 * b:
                    guessed = False
                    guess[idx[e:]] = -1
                chosen = np.where(count == 1, nonzero.argmax(1), -1)
                # guess only for clients whose single model held for two passes: one that still switches
                # (IFCA's early rounds) would cost a second read
                guess[idx[s:e]] = np.where(chosen == last[idx[s:e]], chosen, -1)
                last[idx[s:e]] = chosen
            lib.combine(buf[:b], weights[s:e] * inv_n[s:e, None], G)
            s = e
        if self.reg:
            G += self.reg * models * weights.sum(0)[:, None]
        return losses, weights, G

    def _run_fused(self, lib, idx, rows, models, logistic, sums, buf, parts: int, only=None) -> None:
        """The kernel over clients ``idx``; with several threads they share the clients out dynamically."""
        parts = max(1, min(parts, len(idx)))
        data = self._fused_data
        if parts == 1:
            lib.losses_gradients(data, idx, rows, models, logistic, sums, buf, only=only)
            return
        counter = np.zeros(1, dtype=np.int64)

        def task():
            lib.losses_gradients(data, idx, rows, models, logistic, sums, buf, counter, only)

        _kernels.run_parts([task] * parts)

    def _add_block_gradient(self, G: np.ndarray, W: np.ndarray, dl: np.ndarray, inv_n: np.ndarray,
                            Xb: np.ndarray) -> None:
        """``G[j] += sum_i W[i, j] grad f_i(models[j])`` over one cached block, from ``dl`` ``(b, n, M)``.

        When every client has at most ``q <= M/2`` nonzero weights -- one model
        (IFCA's hard assignment) or one per restart (IFCA's stacked runs) -- each
        client's ``q`` gradients come from one small product of its own data
        (``(q, n) @ (n, d)``: ``q/M`` of the flops of the dense product, one pass
        over the cached block) and are then summed into their models.  Soft
        weights take the dense ``(M, rows) @ (rows, d)`` product.
        """
        b, n_max, d = Xb.shape
        M = W.shape[1]
        nonzero = W != 0
        q = int(np.count_nonzero(nonzero, axis=1).max(initial=0))
        if q == 0:
            return
        if q == 1:
            # one model per client: its gradient from one pass over the cached block, then into its model
            a, i = W.argmax(1), np.arange(b)
            u = dl[i, :, a]  # (b, n)
            u *= (W[i, a] * inv_n).astype(self.dtype, copy=False)[:, None]
            onehot = np.zeros((M, b), dtype=u.dtype)
            onehot[a, i] = 1.0
            G += onehot @ np.vecmat(u, Xb)
            return
        if 2 * q > M:
            dl *= (W * inv_n[:, None]).astype(self.dtype, copy=False)[:, None, :]
            G += self._transpose_product(dl.reshape(-1, M).T, Xb.reshape(-1, d))
            return
        # each client's nonzero columns in column order, padded by zero-weight columns (which add 0)
        slots = np.argsort(~nonzero, axis=1, kind="stable")[:, :q]  # (b, q)
        coef = (np.take_along_axis(W, slots, 1) * inv_n[:, None]).astype(self.dtype, copy=False)
        U = np.take_along_axis(dl, slots[:, None, :], axis=2)  # (b, n, q): dl of client i at its slot models
        U *= coef[:, None, :]
        P = np.empty((q, b, d), dtype=U.dtype)  # slot-major, as _add_slots wants it, written in place
        np.matmul(U.transpose(0, 2, 1), Xb, out=P.transpose(1, 0, 2))
        _add_slots(G, P, slots)

    def weighted_gradients(self, models, weights, clients=None):
        """``G[j] = sum_i weights[i, j] grad f_i(models[j])``: ``(M, d)``."""
        weights = np.asarray(weights, dtype=np.float64)
        _, _, G = self.losses_and_weighted_gradients(models, lambda L, rows: weights[rows], clients)
        return G

    def client_gradients(self, models, labels, clients=None):
        """``grad f_i(models[labels[i]])`` for each selected client: ``(c, d)``."""
        models = self.from_numpy(models)
        theta = models[np.asarray(labels, dtype=np.int64)]
        return self._batched_gradient(theta, self._clients(clients))

    def _batched_gradient(self, theta: np.ndarray, clients) -> np.ndarray:
        """Each client's gradient at its own parameter row ``theta[i]``."""
        out = np.empty_like(theta, dtype=np.float64)
        for pos, Xb, yb, inv_n, mask in self._blocks(clients):
            out[pos] = self._block_gradient(Xb, yb, inv_n, mask, theta[pos])
        return out

    def _block_gradient(self, Xb, yb, inv_n, mask, theta_b):
        s = np.matmul(Xb, theta_b[:, :, None])[:, :, 0]
        _, dl = self._pointwise(s, yb, True)
        if mask is not None:
            dl = dl * mask
        g = np.matmul(dl[:, None, :], Xb)[:, 0, :] * inv_n[:, None]
        return g + self.reg * theta_b if self.reg else g

    def local_update(self, models, labels, steps: int, lr, clients=None):
        """``steps`` local gradient steps per client from ``models[labels[i]]``: ``(c, d)``.

        Each block of clients does all its steps while its data is in cache.
        """
        steps = check_int("steps", steps, low=0)
        models = self.from_numpy(models)
        labels = np.asarray(labels, dtype=np.int64)
        lr_rows = np.broadcast_to(np.asarray(lr, dtype=np.float64), (len(models),))[labels]
        theta = models[labels].astype(np.float64)
        clients = self._clients(clients)
        for pos, Xb, yb, inv_n, mask in self._blocks(clients):
            th = theta[pos]
            for _ in range(steps):
                th = th - lr_rows[pos][:, None] * self._block_gradient(Xb, yb, inv_n, mask, th)
            theta[pos] = th
        return theta.astype(self.dtype, copy=False)

    def local_models(self, method: str = "erm", steps: int = 100, lr: float = 0.1, init=None):
        """Every client's own model: exact ERM (``"erm"``) or ``steps`` GD steps (``"gd"``)."""
        method = check_choice("method", method, ("erm", "gd"))
        if method == "gd":
            start = np.zeros((self.n_clients, self.n_params)) if init is None else np.asarray(init)
            if start.shape != (self.n_clients, self.n_params):
                raise ValueError(f"init must have shape ({self.n_clients}, {self.n_params}), got {start.shape}")
            lr = check_real("lr", lr, low=0.0, low_inclusive=False)
            return self.local_update(start, np.arange(self.n_clients), steps, np.full(self.n_clients, lr))
        return self._erm()

    def _erm(self) -> np.ndarray:
        d = self.n_params
        if self.family == "linear" and self.n_samples.min() <= d:
            raise ValueError(f"exact ERM (OLS) needs n > d samples per client; got min n = "
                             f"{self.n_samples.min()} with d = {d}; use method='gd' (estimators: local='gd', "
                             "--local gd) or more samples")
        out = np.empty((self.n_clients, d))
        eye = np.eye(d)
        for pos, Xb, yb, inv_n, mask in self._blocks(None):
            Xb = Xb.astype(np.float64)
            if self.family == "linear":
                A = np.matmul(Xb.transpose(0, 2, 1), Xb)
                rhs = np.matmul(Xb.transpose(0, 2, 1), yb.astype(np.float64)[:, :, None])[:, :, 0]
                out[pos] = _spd_solve(A, rhs, "X^T X of a client's OLS problem")
            else:
                th = np.zeros((Xb.shape[0], d))
                for _ in range(50):
                    s = np.matmul(Xb, th[:, :, None])[:, :, 0]
                    p = _expit(s)
                    wgt = p * (1 - p) * (1.0 if mask is None else mask)
                    g = self._block_gradient(Xb, yb, inv_n, mask, th)
                    H = np.matmul(Xb.transpose(0, 2, 1) * wgt[:, None, :], Xb) * inv_n[:, None, None]
                    step = _spd_solve(H + self.reg * eye, g, "the logistic Hessian")
                    th = th - step
                    if np.abs(step).max() < 1e-12:
                        break
                out[pos] = th
        return out

    # ------------------------------------------------- operations on model stacks
    def combine(self, weights, values):
        return np.asarray(weights, dtype=np.float64).T @ np.asarray(values, dtype=np.float64)

    def trimmed_mean(self, values, labels, n_groups: int, beta: float, rule: str = "symmetric"):
        """Coordinatewise TrMean_beta of each group's rows (SR-FCA Def. 3.2); empty groups give NaN."""
        values = np.asarray(values, dtype=np.float64)
        labels = np.asarray(labels, dtype=np.int64)
        out = np.full((n_groups, values.shape[1]), np.nan)
        for g in range(n_groups):  # loop over clusters, not clients
            rows = values[labels == g]
            if len(rows):
                out[g] = trimmed_mean(rows, beta, rule)
        return out

    def step(self, models, direction, lr):
        lr = np.broadcast_to(np.asarray(lr, dtype=np.float64), (len(models),))
        return (models - lr[:, None] * direction).astype(self.dtype, copy=False)

    def project(self, models, center, radius: float):
        return project_ball(models, center, radius).astype(self.dtype, copy=False)

    def distances(self, a, b):
        return pairwise_distances(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))

    def take(self, models, index):
        return models[np.asarray(index, dtype=np.int64)]

    def concat(self, stacks):
        return np.concatenate([np.atleast_2d(s) for s in stacks], axis=0)

    def to_numpy(self, models) -> np.ndarray:
        return np.array(models, dtype=np.float64)

    def from_numpy(self, array) -> np.ndarray:
        out = np.ascontiguousarray(np.atleast_2d(array), dtype=self.dtype)
        if out.ndim != 2 or out.shape[1] != self.n_params:
            raise ValueError(f"models must have shape (M, {self.n_params}) (one row of d = {self.n_params} "
                             f"parameters per model), got {np.shape(array)}")
        return out

    def init_models(self, n_models: int, scheme: str, rng) -> np.ndarray:
        """``"bernoulli"`` (IFCA Sec. VI-A: Bernoulli(0.5)^d), ``"gaussian"`` (N(0, I)) or ``"zeros"``."""
        scheme = check_choice("init", scheme, ("bernoulli", "gaussian", "zeros"))
        shape = (n_models, self.n_params)
        if scheme == "bernoulli":
            out = rng.binomial(1, 0.5, size=shape).astype(np.float64)
        elif scheme == "gaussian":
            out = rng.standard_normal(shape)
        else:
            out = np.zeros(shape)
        return out.astype(self.dtype)

    # ----------------------------------------------- data access (k-FED, PACFL, FedSoft)
    def client_features(self, clients=None) -> tuple[np.ndarray, np.ndarray]:
        """Each selected client's data points as feature rows: ``(F (c, n_max, d + 1), n (c,))``.

        A point of the synthetic GLM is the pair ``(x, y)``, so its feature row is ``[x, y]`` (k-FED and PACFL
        cluster these).  Rows beyond ``n[i]`` are padding (zero).
        """
        idx = slice(None) if clients is None else self._clients(clients)
        F = np.concatenate([self.X[idx], self.y[idx][:, :, None]], axis=2).astype(np.float64)
        return F, self.n_samples[idx].copy()

    def best_model_fractions(self, models, clients=None) -> np.ndarray:
        """``u[i, j]``: the fraction of client i's samples on which model j has the smallest loss: ``(c, M)``.

        FedSoft's importance weights (Ruan & Joe-Wong 2022, Sec. 4); ties go to the lowest model index.
        """
        models = self.from_numpy(models)
        clients = self._clients(clients)
        M = len(models)
        out = np.empty((self._count(clients), M))
        for pos, Xb, yb, inv_n, _ in self._blocks(clients, M):
            b, n_max, d = Xb.shape
            S = self._scores(Xb.reshape(-1, d), models).reshape(b, n_max, M)
            loss, _ = self._pointwise(S, yb[:, :, None], False)
            # a sample's loss includes the model's l2 penalty (logistic), the same for every sample
            best = (loss + self._reg_loss(models)).argmin(2)  # (b, n_max)
            valid = np.arange(n_max)[None, :] < np.round(1.0 / inv_n)[:, None]
            counts = np.zeros((b, M))
            rows = np.broadcast_to(np.arange(b)[:, None], best.shape)
            np.add.at(counts, (rows[valid], best[valid]), 1.0)
            out[pos] = counts * inv_n[:, None]
        return out

    # ------------------------------------------------------------- data regimes
    def at_round(self, t: int):
        if self.regime == "fixed":
            return self, self
        if self.regime == "split":
            if t >= self.rounds:
                raise ValueError(f"regime='split' was built for rounds={self.rounds}, asked round {t}")
            size = int(self.n_samples.min()) // (2 * self.rounds)
            a, b = 2 * t * size, (2 * t + 1) * size
            return (self._view(self.fed.subset_rows(a, a + size)), self._view(self.fed.subset_rows(b, b + size)))
        seeds = np.random.SeedSequence(self._seed.entropy, spawn_key=(t,)).spawn(2)
        return (self._view(self.fed.draw(self.n_samples, np.random.default_rng(seeds[0]))),
                self._view(self.fed.draw(self.n_samples, np.random.default_rng(seeds[1]))))

    def _view(self, federation: Federation) -> GLMBackend:
        """A fixed-data backend on a round's data, with this backend's kernel and thread settings."""
        return GLMBackend(federation, kernel=self._kernel_request, threads=self.threads)


def _in_range(clients: np.ndarray, m: int) -> np.ndarray:
    """Client indices as numpy indexing reads them (negative from the end), refusing any out of range:
    the compiled kernel reads memory at these offsets."""
    idx = np.where(clients < 0, clients + m, clients)
    bad = (idx < 0) | (idx >= m)
    if bad.any():
        raise IndexError(f"index {clients[bad][0]} is out of bounds for axis 0 with size {m}")
    return np.ascontiguousarray(idx, dtype=np.int64)


def _add_slots(G: np.ndarray, P: np.ndarray, slots: np.ndarray) -> None:
    """``G[j] += sum_{(i, s): slots[i, s] = j} P[s, i]`` for per-client rows ``P`` ``(q, b, d)``.

    Slot ``s`` of every client usually falls in a narrow range of keys (IFCA's
    restart ``s`` owns models ``s*k .. s*k+k-1``): then one small one-hot
    product per slot sums over the clients (``q x width`` rows instead of
    ``b x q``), and only those rows are added into ``G``.
    """
    q, b, d = P.shape
    n_keys = G.shape[0]
    lo = slots.min(0)
    width = int((slots.max(0) - lo).max()) + 1
    if q * width > n_keys:
        G += _sum_rows_by_key(P.reshape(-1, d), slots.T.ravel(), n_keys)
        return
    onehot = np.zeros((q, width, b), dtype=P.dtype)
    onehot[np.arange(q)[None, :], slots - lo, np.arange(b)[:, None]] = 1.0
    part = np.matmul(onehot, P).reshape(-1, d)  # (q * width, d)
    keys = (lo[:, None] + np.arange(width)).ravel()
    if len(keys) == n_keys and keys[0] == 0 and np.all(np.diff(keys) == 1):  # IFCA's restarts: row j is model j
        G += part
        return
    used = onehot.any(2).ravel()  # a key no client's slot holds gives a zero row that may collide with another slot
    keys, part = keys[used], part[used]
    if len(np.unique(keys)) < len(keys):  # two slots share a key (not IFCA's restarts): sum by key
        G += _sum_rows_by_key(part, keys, n_keys)
    else:
        G[keys] += part


def _sum_rows_by_key(rows: np.ndarray, keys: np.ndarray, n_keys: int) -> np.ndarray:
    """``out[j] = sum of rows[keys == j]``: ``(n_keys, d)`` float64 (sort, then one segmented sum)."""
    out = np.zeros((n_keys, rows.shape[1]))
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    out[sorted_keys[starts]] = np.add.reduceat(rows[order], starts, axis=0)
    return out


def project_ball(models, center, radius: float) -> np.ndarray:
    """Euclidean projection of each row of ``models`` onto the ball ``{w : ||w - center|| <= radius}``
    (SR-FCA Alg. 3's ``proj_W``, ``W`` a ball of diameter ``D = 2 radius``; ``center`` None is 0), float64."""
    models = np.asarray(models, dtype=np.float64)
    c = 0.0 if center is None else np.asarray(center, dtype=np.float64)
    diff = models - c
    norm = np.linalg.norm(diff, axis=-1, keepdims=True)
    scale = np.minimum(1.0, radius / np.where(norm == 0, 1.0, norm))
    return c + diff * scale


TRIM_RULES = ("symmetric", "public-code")


def trim_range(J: int, beta: float, rule: str = "symmetric") -> tuple[int, int]:
    """The sorted positions ``[start, end)`` that a coordinatewise trimmed mean of ``J`` values keeps.

    ``"symmetric"`` (SR-FCA Def. 3.2): drop the ``floor(beta * J)`` smallest and largest values.
    ``"public-code"``: SR-FCA's public code (harshv834/sr-fca@a1b418f src/trainers.py:451-466) keeps
    ``int(beta * J)`` up to ``int((1 - beta) * J)`` (so ``J = 10, beta = 0.15`` drops 1 below and 2 above) and
    falls back to the plain mean when that leaves at most one value or ``beta = 0``.
    """
    if rule == "public-code":
        start, end = int(beta * J), int((1 - beta) * J)
        return (0, J) if end <= start + 1 or beta == 0 else (start, end)
    cut = int(np.floor(beta * J + 1e-12))
    return cut, J - cut


def trimmed_mean(rows: np.ndarray, beta: float, rule: str = "symmetric") -> np.ndarray:
    """Coordinatewise trimmed mean of ``rows`` (SR-FCA Def. 3.2; ``rule`` as in :func:`trim_range`).

    Drops the ``floor(beta * J)`` smallest and largest values of every
    coordinate and averages the rest.  When ``beta * J`` is an integer this is
    exactly Def. 3.2's ``1/((1-2 beta) J) * sum_{U_k}``; otherwise Def. 3.2's
    normaliser would not be the count of kept values, and we average what is
    kept.  ``beta = 0`` is the mean.
    """
    J = rows.shape[0]
    start, end = trim_range(J, beta, rule)
    if (start, end) == (0, J):
        return rows.mean(0)
    return np.sort(rows, axis=0)[start:end].mean(0)


def _spd_solve(A: np.ndarray, rhs: np.ndarray, what: str) -> np.ndarray:
    """Batched SPD solve by Cholesky; refuses (numerically) singular systems."""
    try:
        chol = np.linalg.cholesky(A)
    except np.linalg.LinAlgError:
        raise IllConditionedError(f"{what} is singular or not positive definite; the exact solution "
                                  "is not defined (more samples, or a regularised/GD solution)") from None
    diag = np.abs(np.diagonal(chol, axis1=-2, axis2=-1))
    cond_lower = (diag.max(-1) / diag.min(-1)) ** 2  # a lower bound on cond(A)
    if np.any(cond_lower > 1e12):
        raise IllConditionedError(f"{what} is ill-conditioned (cond >= {cond_lower.max():.2e}); "
                                  "its exact solution would be dominated by rounding error")
    z = np.linalg.solve(chol, rhs[..., None])
    return np.linalg.solve(np.swapaxes(chol, -1, -2), z)[..., 0]


def _expit(x):
    """The logistic function (scipy.special.expit, imported where used: keeps `python -m synth` start-up fast)."""
    from scipy.special import expit

    return expit(x)
