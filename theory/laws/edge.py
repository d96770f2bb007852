"""SR-FCA ONE_SHOT's edge statistic ||w_i - w_j||^2 of two clients' OLS ERMs (Alg. 1, Lemma 4.6)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as _st

from synth.validation import check_array, check_int, check_random_state, check_real

from .gchi2 import GeneralizedChi2
from .quadrature import TAIL, gl_nodes

__all__ = ["UnconditionalEdgeLaw", "ols_edge_law", "ols_edge_law_unconditional"]


def ols_edge_law(gram_i, gram_j, w_i, w_j, sigma: float) -> GeneralizedChi2:
    """Law of ``||w_hat_i - w_hat_j||^2`` for two clients' OLS ERMs given their designs (SR-FCA Alg. 1).

    With ``y = X w* + eps``, ``w_hat - w* = (X^T X)^{-1} X^T eps ~ N(0, sigma^2 (X^T X)^{-1})``
    independently across clients, so ``w_hat_i - w_hat_j ~ N(mu, Sigma)`` with
    ``mu = w_i - w_j`` and ``Sigma = sigma^2 (G_i^{-1} + G_j^{-1})``.  With
    ``Sigma = Q diag(l) Q^T``: ``||w_hat_i - w_hat_j||^2 = sum_k l_k (z_k + (Q^T mu)_k/sqrt(l_k))^2``,
    a generalised chi-square with weights ``l_k``, one degree of freedom each and
    noncentralities ``(Q^T mu)_k^2 / l_k``.  ONE_SHOT joins ``i`` and ``j`` when this is
    ``<= lambda^2``: ``P[edge] = law.cdf(lambda**2)``.
    """
    Gi = check_array("gram_i", gram_i, ndim=2)
    Gj = check_array("gram_j", gram_j, ndim=2, shape=Gi.shape)
    mu = check_array("w_i", w_i, ndim=1, shape=(Gi.shape[0],)) - check_array("w_j", w_j, ndim=1,
                                                                              shape=(Gi.shape[0],))
    sigma = check_real("sigma", sigma, low=0.0, low_inclusive=False)
    cov = sigma**2 * (np.linalg.inv(Gi) + np.linalg.inv(Gj))
    lam, Q = np.linalg.eigh(0.5 * (cov + cov.T))
    proj = Q.T @ mu
    return GeneralizedChi2(lam, np.ones_like(lam), proj**2 / lam)


@dataclass(frozen=True)
class UnconditionalEdgeLaw:
    """Law of ``||w_hat_i - w_hat_j||^2`` for two clients' OLS ERMs, designs integrated out (SR-FCA Alg. 1).

    With ``x ~ N(0, I_d)`` the Gram matrix ``G = X^T X`` is ``Wishart_d(n, I)`` and the ERM error
    ``e = G^{-1} X^T eps`` is ``N(0, sigma^2 G^{-1})`` given the design.  Its law is orthogonally invariant, and
    ``1/(u^T G^{-1} u) ~ chi2_{n-d+1}`` for a fixed unit ``u``, so unconditionally ``e = sigma g / sqrt(U)``:
    ``g ~ N(0, I_d)``, ``U ~ chi2_{n-d+1}`` independent (a multivariate t).  Two clients are independent, so
    given ``(U_i, U_j)`` the difference is ``delta + N(0, sigma^2 s I_d)``, ``s = 1/U_i + 1/U_j``, and

    ``||w_hat_i - w_hat_j||^2 = sigma^2 s chi'^2_d(||delta||^2 / (sigma^2 s))``,

    ``P[||w_hat_i - w_hat_j|| <= r] = E_{U_i, U_j}[ F_{chi'^2_d(||delta||^2/(sigma^2 s))}(r^2/(sigma^2 s)) ]``, a
    two-dimensional integral (composite Gauss-Legendre in ``log U_i``, ``log U_j``; the error estimate
    compares two resolutions and adds the cut tails), and in closed form

    ``E ||w_hat_i - w_hat_j||^2 = ||delta||^2 + sigma^2 d (1/(n_i - d - 1) + 1/(n_j - d - 1))`` (``n > d + 1``).
    """

    n_i: int
    n_j: int
    d: int
    delta_norm: float
    sigma: float

    def __post_init__(self):
        d = check_int("d", self.d, low=1)
        check_int("n_i", self.n_i, low=d)
        check_int("n_j", self.n_j, low=d)
        check_real("delta_norm", self.delta_norm, low=0.0)
        check_real("sigma", self.sigma, low=0.0, low_inclusive=False)

    def mean(self) -> float:
        """``E ||w_hat_i - w_hat_j||^2`` (infinite unless both ``n > d + 1``: ``E[1/chi2_k] = 1/(k - 2)``)."""
        if min(self.n_i, self.n_j) <= self.d + 1:
            return float("inf")
        return float(self.delta_norm**2 + self.sigma**2 * self.d * (1.0 / (self.n_i - self.d - 1)
                                                                    + 1.0 / (self.n_j - self.d - 1)))

    def _nodes(self, k: int, panels: int, order: int):
        """Nodes and weights of ``E[h(U)]``, ``U ~ chi2_k``, on ``t = log U`` (smooth, decaying fast at both ends)."""
        lo, hi = np.log(_st.chi2.ppf(TAIL, k)), np.log(_st.chi2.isf(TAIL, k))
        t, w = gl_nodes(lo, hi, panels, order)
        u = np.exp(t)
        return u, w * np.exp(_st.chi2.logpdf(u, k) + t)

    def _cdf(self, r2: float, panels: int, order: int) -> float:
        Ui, wi = self._nodes(self.n_i - self.d + 1, panels, order)
        Uj, wj = self._nodes(self.n_j - self.d + 1, panels, order)
        scale = self.sigma**2 * (1.0 / Ui[:, None] + 1.0 / Uj[None, :])
        vals = _st.ncx2.cdf(r2 / scale, self.d, self.delta_norm**2 / scale) if self.delta_norm > 0 else \
            _st.chi2.cdf(r2 / scale, self.d)
        return float(wi @ vals @ wj)

    def cdf_with_error(self, r2: float) -> tuple[float, float]:
        """``(P[||w_hat_i - w_hat_j||^2 <= r2], absolute error bound)``."""
        r2 = check_real("r2", r2, low=0.0)
        if r2 == 0.0:
            return 0.0, 0.0
        coarse, fine = self._cdf(r2, 8, 16), self._cdf(r2, 16, 16)
        return float(min(max(fine, 0.0), 1.0)), abs(fine - coarse) + 4.0 * TAIL

    def cdf(self, r2: float) -> float:
        """``P[||w_hat_i - w_hat_j||^2 <= r2]``; ONE_SHOT's edge probability at threshold ``lambda`` is
        ``cdf(lambda**2)``."""
        return self.cdf_with_error(r2)[0]

    def rvs(self, size: int, random_state=None) -> np.ndarray:
        """Draws of ``||w_hat_i - w_hat_j||^2`` from the representation above."""
        rng = check_random_state(random_state)
        size = check_int("size", size, low=0)
        s = 1.0 / rng.chisquare(self.n_i - self.d + 1, size) + 1.0 / rng.chisquare(self.n_j - self.d + 1, size)
        lam = self.delta_norm**2 / (self.sigma**2 * s)
        return self.sigma**2 * s * (rng.noncentral_chisquare(self.d, lam, size) if self.delta_norm > 0
                                    else rng.chisquare(self.d, size))


def ols_edge_law_unconditional(n_i: int, n_j: int, d: int, delta_norm: float, sigma: float) -> UnconditionalEdgeLaw:
    """The ONE_SHOT edge statistic ``||w_hat_i - w_hat_j||^2`` with the designs ``x ~ N(0, I_d)`` integrated out
    (SR-FCA Alg. 1, Lemma 4.6): :class:`UnconditionalEdgeLaw`."""
    return UnconditionalEdgeLaw(int(n_i), int(n_j), int(d), float(delta_norm), float(sigma))
