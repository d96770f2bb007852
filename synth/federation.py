"""Synthetic federations: the mixed-linear-regression and logistic generators.

A generator (:class:`MixedLinearRegression`, :class:`LogisticMixture`) holds
the hyper-parameters; :meth:`sample` draws the ground truth and every
client's data and returns a :class:`Federation`.  A federation knows its exact
population (:mod:`synth.population`) and can draw fresh samples from the same
distributions, which the data regimes of :class:`synth.backend.GLMBackend`
use (fixed data, fresh data per round, IFCA's 2T-way split).

Data are stored padded: ``X`` is ``(m, n_max, d)``, ``y`` is ``(m, n_max)``
and ``n_samples[i]`` rows of client ``i`` are real; padded rows are zero and
masked out of every loss and gradient.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import theta as theta_modes
from .population import LinearPopulation, LogisticPopulation
from .validation import check_array, check_choice, check_int, check_random_state, check_real

__all__ = ["Federation", "LogisticMixture", "MixedLinearRegression", "anisotropic_cov"]


@dataclass
class Federation:
    """One sampled federation: data, ground truth and exact population.

    Attributes
    ----------
    X, y : padded data ``(m, n_max, d)`` and ``(m, n_max)``.
    n_samples : ``(m,)`` real samples per client.
    labels : ``(m,)`` true cluster of each client.
    theta : ``(K, d)`` cluster optima (for client-optima instances the cluster centres).
    client_optima : ``(m, d)`` each client's population minimiser ``w*_i``.
    family : ``"linear"`` or ``"logistic"``.
    population : exact per-client population (one row per client).
    """

    X: np.ndarray
    y: np.ndarray
    n_samples: np.ndarray
    labels: np.ndarray
    theta: np.ndarray
    client_optima: np.ndarray
    family: str
    sigma: float
    cov: np.ndarray
    reg: float = 0.0
    params: dict[str, Any] = field(default_factory=dict)
    _chol: np.ndarray | None = field(default=None, repr=False)

    @property
    def n_clients(self) -> int:
        return int(self.X.shape[0])

    @property
    def n_clusters(self) -> int:
        return int(self.theta.shape[0])

    @property
    def dim(self) -> int:
        return int(self.X.shape[2])

    @property
    def mask(self) -> np.ndarray:
        return np.arange(self.X.shape[1])[None, :] < self.n_samples[:, None]

    @property
    def population(self) -> LinearPopulation | LogisticPopulation:
        if self.family == "linear":
            return LinearPopulation(self.client_optima, self.sigma, self.cov)
        return LogisticPopulation(self.client_optima, self.reg, self.cov)

    @property
    def cluster_population(self) -> LinearPopulation | LogisticPopulation:
        """Population with one row per cluster optimum theta*_c."""
        if self.family == "linear":
            return LinearPopulation(self.theta, self.sigma, self.cov)
        return LogisticPopulation(self.theta, self.reg, self.cov)

    def draw(self, n_samples: np.ndarray | int, random_state=None) -> Federation:
        """Fresh data from the same clients' distributions (resampling regimes)."""
        rng = check_random_state(random_state)
        n = np.broadcast_to(np.asarray(n_samples, dtype=np.int64), (self.n_clients,)).copy()
        X, y = _draw_data(self.client_optima, n, self.family, self.sigma, self._chol_factor(), rng, self.X.dtype)
        return Federation(X, y, n, self.labels, self.theta, self.client_optima, self.family, self.sigma,
                          self.cov, self.reg, dict(self.params), self._chol)

    def subset_rows(self, start: int, stop: int) -> Federation:
        """Rows ``start:stop`` of every client (IFCA's disjoint subsets; needs equal n)."""
        n = np.clip(self.n_samples - start, 0, stop - start)
        return Federation(self.X[:, start:stop], self.y[:, start:stop], n, self.labels, self.theta,
                          self.client_optima, self.family, self.sigma, self.cov, self.reg, dict(self.params),
                          self._chol)

    def backend(self, regime: str = "fixed", rounds: int | None = None, random_state=None):
        """A numpy :class:`~synth.backend.GLMBackend` over this federation."""
        from .backend import GLMBackend

        return GLMBackend(self, regime=regime, rounds=rounds, random_state=random_state)

    def _chol_factor(self) -> np.ndarray | None:
        if self._chol is None and not np.array_equal(self.cov, np.eye(self.dim)):
            self._chol = np.linalg.cholesky(self.cov)
        return self._chol


def anisotropic_cov(d: int, condition: float) -> np.ndarray:
    """Diagonal covariance with eigenvalues log-spaced in [1/condition, 1] (kappa = condition)."""
    d = check_int("d", d, low=1)
    condition = check_real("condition", condition, low=1.0)
    return np.diag(np.logspace(-np.log10(condition), 0.0, d))


class _Generator:
    """Shared sizes, covariance and theta* handling of the two generators."""

    family = "linear"

    def __init__(self, K, clients_per_cluster, n, d, theta, R, delta, eps1, eps2, cov, dtype):
        self.K = check_int("K", K, low=1)
        self.d = check_int("d", d, low=1)
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        if np.ndim(clients_per_cluster) == 0 and np.ndim(n) == 0:  # sizes known: check before the per-client arrays
            _check_memory(self.K * check_int("clients_per_cluster", clients_per_cluster, low=1),
                          check_int("n", n, low=1), self.d, self.K, self.dtype.itemsize)
        self.clients_per_cluster = _per_item("clients_per_cluster", clients_per_cluster, self.K)
        self.n = _per_item("n", n, int(self.clients_per_cluster.sum()))
        self.theta_mode = theta if not isinstance(theta, str) else check_choice("theta", theta,
                                                                                theta_modes.THETA_MODES[:4])
        self.R = check_real("R", R, low=0.0, low_inclusive=False)
        self.delta = None if delta is None else check_real("delta", delta, low=0.0, high=2.0,
                                                           low_inclusive=False)
        self.eps1, self.eps2 = eps1, eps2
        self.cov = None if cov is None else check_array("cov", cov, shape=(self.d, self.d))
        if self.cov is not None:
            if not np.allclose(self.cov, self.cov.T) or np.linalg.eigvalsh(self.cov)[0] <= 0:
                raise ValueError("cov must be symmetric positive definite")
        _check_memory(int(self.clients_per_cluster.sum()), int(self.n.max()), self.d, self.K, self.dtype.itemsize)

    def _optima(self, rng) -> tuple[np.ndarray, np.ndarray]:
        labels = np.repeat(np.arange(self.K), self.clients_per_cluster)
        mode = self.theta_mode
        if not isinstance(mode, str):
            theta = theta_modes.check_theta(mode, self.K, self.d)
            return theta, theta[labels]
        if mode == "bernoulli":
            theta = theta_modes.bernoulli_rescaled(self.K, self.d, self.R, rng)
        elif mode == "bernoulli-code":
            theta = theta_modes.bernoulli_scaled(self.K, self.d, self.R, rng)
        elif mode == "sphere":
            if self.delta is None:
                raise ValueError("delta is required for theta='sphere' (CLoVE App. C.1.1), allowed (0, 2]")
            theta = theta_modes.sphere_separated(self.K, self.d, self.delta, rng)
        else:  # client-optima
            if self.eps1 is None or self.eps2 is None:
                raise ValueError("eps1 and eps2 are required for theta='client-optima' (SR-FCA Def. 2.1)")
            w, theta = theta_modes.client_optima(self.clients_per_cluster, self.d, self.eps1, self.eps2, rng)
            return theta, w
        return theta, theta[labels]

    def _labels(self) -> np.ndarray:
        return np.repeat(np.arange(self.K), self.clients_per_cluster)

    def params(self) -> dict[str, Any]:
        return {
            "K": self.K, "clients_per_cluster": self.clients_per_cluster.tolist(), "d": self.d,
            "theta": self.theta_mode if isinstance(self.theta_mode, str) else "given", "R": self.R,
        }


class MixedLinearRegression(_Generator):
    """Mixed linear regression federation: y = <theta*_{c(i)}, x> + eps.

    IFCA Sec. V-A / VI-A, SR-FCA Prop. 4.1, CLoVE Sec. 4.

    Parameters
    ----------
    K : number of clusters.
    clients_per_cluster : int or length-K list.
    n : samples per client, int or length-m list.
    d : dimension.
    sigma : noise standard deviation.
    theta : ``"bernoulli"`` (IFCA text: rescaled to norm R), ``"bernoulli-code"``
        (IFCA code: R*Bernoulli), ``"sphere"`` (CLoVE, needs ``delta``),
        ``"client-optima"`` (SR-FCA Def. 2.1, needs ``eps1 < eps2``), or a ``(K, d)`` array.
    cov : feature covariance Sigma (default identity).
    """

    family = "linear"

    def __init__(self, K: int = 2, clients_per_cluster=10, n=100, d: int = 10, sigma: float = 0.1,
                 theta="bernoulli", R: float = 1.0, delta: float | None = None, eps1: float | None = None,
                 eps2: float | None = None, cov=None, dtype=np.float64):
        super().__init__(K, clients_per_cluster, n, d, theta, R, delta, eps1, eps2, cov, dtype)
        self.sigma = check_real("sigma", sigma, low=0.0)

    def sample(self, random_state=None) -> Federation:
        rng = check_random_state(random_state)
        theta, w = self._optima(rng)
        cov = np.eye(self.d) if self.cov is None else self.cov
        chol = None if self.cov is None else np.linalg.cholesky(self.cov)
        X, y = _draw_data(w, self.n, "linear", self.sigma, chol, rng, self.dtype)
        return Federation(X, y, self.n.copy(), self._labels(), theta, w, "linear", self.sigma, cov,
                          params={**self.params(), "sigma": self.sigma}, _chol=chol)


class LogisticMixture(_Generator):
    """Clustered logistic regression: P(y=1|x) = sigmoid(<theta*_{c(i)}, x>), l2-regularised loss.

    The strongly convex, non-quadratic family for IFCA Theorem 2 / Corollary 2.
    """

    family = "logistic"

    def __init__(self, K: int = 2, clients_per_cluster=10, n=100, d: int = 10, reg: float = 0.1,
                 theta="bernoulli", R: float = 1.0, delta: float | None = None, eps1: float | None = None,
                 eps2: float | None = None, cov=None, dtype=np.float64):
        super().__init__(K, clients_per_cluster, n, d, theta, R, delta, eps1, eps2, cov, dtype)
        self.reg = check_real("reg", reg, low=0.0, low_inclusive=False)

    def sample(self, random_state=None) -> Federation:
        rng = check_random_state(random_state)
        theta, w = self._optima(rng)
        cov = np.eye(self.d) if self.cov is None else self.cov
        chol = None if self.cov is None else np.linalg.cholesky(self.cov)
        X, y = _draw_data(w, self.n, "logistic", 0.0, chol, rng, self.dtype)
        return Federation(X, y, self.n.copy(), self._labels(), theta, w, "logistic", 0.0, cov, self.reg,
                          params={**self.params(), "reg": self.reg}, _chol=chol)


def _per_item(name: str, value, length: int) -> np.ndarray:
    """An int (broadcast) or a length-``length`` sequence of ints, each >= 1."""
    if np.ndim(value) == 0:
        return np.full(length, check_int(name, value, low=1), dtype=np.int64)
    arr = check_array(name, value, ndim=1, shape=(length,), dtype=np.float64)
    if np.any(arr != np.round(arr)) or np.any(arr < 1):
        raise ValueError(f"{name} must hold integers >= 1, got {arr.tolist()}")
    return arr.astype(np.int64)


# float64 features drawn per block of clients in _draw_data (the block stays in the last-level cache)
_DRAW_BLOCK_BYTES = 8 * 2**20


def _check_memory(m: int, n_max: int, d: int, K: int, itemsize: int = 8) -> None:
    """Refuse a federation whose arrays exceed the memory budget, counting every array sampling allocates."""
    # the features stored in the data's precision (itemsize bytes), and _draw_data's float64 block and its
    # Cholesky-transformed copy; float64: scores, noise, responses and the padding mask (m x n each), client
    # optima and their copy (m x d), theta* (K x d), Sigma and its factor (d x d); int64: samples per client,
    # labels, clients per cluster
    block = min(8 * m * n_max * d, max(_DRAW_BLOCK_BYTES, 8 * n_max * d))
    need = (itemsize * m * n_max * d + 2 * block + 8 * (4 * m * n_max + 2 * m * d + K * d + 2 * d * d)
            + 8 * (2 * m + K))
    if need > _memory_budget():
        raise ValueError(f"the federation needs about {need / 2**30:.1f} GiB (m={m} clients x n={n_max} samples "
                         f"x d={d}, with responses, client optima and the d x d covariance); at most "
                         f"{_memory_budget() / 2**30:.1f} GiB is allowed on this machine")


def _memory_budget() -> int:
    """Bytes a federation may take: half the machine's physical memory (a clear refusal beats a MemoryError)."""
    from .cost import memory_budget

    return memory_budget()


def _draw_data(w: np.ndarray, n: np.ndarray, family: str, sigma: float, chol, rng, dtype):
    """x ~ N(0, Sigma) and responses for every client, padded to n_max rows.

    The features are drawn in float64 a block of clients at a time, each block transformed, scored and stored
    in ``dtype`` while it is in cache: the same stream in the same order as one draw of the whole array (the
    generator fills consecutive calls as one), so the data do not depend on the block size, and no whole float64
    copy is held (timed by ``bench/ifca_trial_overheads.py``).
    """
    m, d = w.shape
    n_max = int(n.max())
    X = np.empty((m, n_max, d), dtype=dtype)
    score = np.empty((m, n_max))
    step = max(1, _DRAW_BLOCK_BYTES // (8 * max(n_max, 1) * max(d, 1)))
    direct = X.dtype == np.float64 and chol is None  # drawn in place: no block to copy from
    block = None if direct else np.empty((min(step, m), n_max, d))
    for s in range(0, m, step):  # blocks of clients, not single clients
        e = min(s + step, m)
        xb = rng.standard_normal(out=X[s:e] if direct else block[:e - s])
        if chol is not None:
            xb = xb @ chol.T
        score[s:e] = np.einsum("mnd,md->mn", xb, w[s:e])
        if not direct:
            X[s:e] = xb
    if family == "linear":
        y = score + sigma * rng.standard_normal((m, n_max))
    else:
        y = (rng.uniform(size=(m, n_max)) < 1.0 / (1.0 + np.exp(-score))).astype(np.float64)
    pad = np.arange(n_max)[None, :] >= n[:, None]
    if pad.any():
        X[pad] = 0.0
        y[pad] = 0.0
    return X, y.astype(dtype, copy=False)
