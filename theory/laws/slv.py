"""Exact mean and covariance of a client's square-root loss vector (CLoVE Lemmas A.1-A.7)."""

from __future__ import annotations

import numpy as np
from scipy import special

from synth.validation import check_array, check_int, check_real

from .chi import chi_mean

__all__ = ["slv_covariance", "slv_mean"]


def _slv_alpha_and_corr(models: np.ndarray, theta_star: np.ndarray, sigma: float):
    U = theta_star[None, :] - models  # (N, d): u_j = theta*_k - theta_j
    G = U @ U.T + sigma**2  # Cov of the residual rows: <u_j, u_l> + sigma^2
    alpha = np.sqrt(np.diag(G))
    # alpha_j = 0 (theta_j = theta*_k without noise) is a constant zero entry: no correlation with anything
    outer = np.outer(alpha, alpha)
    corr = np.divide(G, outer, out=np.zeros_like(G), where=outer > 0)
    return alpha, np.clip(corr, -1.0, 1.0)


def slv_mean(models, theta_star, sigma: float, n: int) -> np.ndarray:
    """Exact mean ``c_k = E[a_k^i]`` of the SLV of a client of cluster ``k`` (CLoVE App. A.1).

    ``c_k^j = alpha(theta_j, theta*_k) E[chi_n]/sqrt(n)``; CLoVE takes
    ``c_k^j = alpha(theta_j, theta*_k)``, which drops the factor ``E[chi_n]/sqrt(n) < 1``.
    """
    models = check_array("models", models, ndim=2)
    theta_star = check_array("theta_star", theta_star, ndim=1, shape=(models.shape[1],))
    n = check_int("n", n, low=1)
    alpha, _ = _slv_alpha_and_corr(models, theta_star, check_real("sigma", sigma, low=0.0))
    return alpha * chi_mean(n) / np.sqrt(n)


def slv_covariance(models, theta_star, sigma: float, n: int) -> np.ndarray:
    """Exact ``(N, N)`` covariance of a client's SLV ``(sqrt f(theta_1), ..., sqrt f(theta_N))`` (CLoVE Lemma A.6).

    Entries ``j, l`` are ``sqrt(W_jj/n)`` and ``sqrt(W_ll/n)`` of one Wishart
    ``W ~ W_2(n, [[alpha_j^2, g], [g, alpha_l^2]])``, ``g = <u_j, u_l> + sigma^2``, so with
    ``r = g/(alpha_j alpha_l)``:
    ``E[sqrt(W_jj W_ll)] = alpha_j alpha_l E[chi_n]^2 2F1(-1/2, -1/2; n/2; r^2)`` and
    ``Cov = alpha_j alpha_l (E[chi_n]^2/n) (2F1(-1/2, -1/2; n/2; r^2) - 1)``.
    At ``r = 1`` this is the variance ``alpha^2 (1 - E[chi_n]^2/n)``.
    """
    models = check_array("models", models, ndim=2)
    theta_star = check_array("theta_star", theta_star, ndim=1, shape=(models.shape[1],))
    n = check_int("n", n, low=1)
    alpha, corr = _slv_alpha_and_corr(models, theta_star, check_real("sigma", sigma, low=0.0))
    kappa2 = chi_mean(n) ** 2 / n
    F = _hyp2f1_half(n / 2.0, corr**2)
    cov = np.outer(alpha, alpha) * kappa2 * (F - 1.0)
    # the diagonal in closed form (2F1(., ., n/2; 1) loses digits for large n)
    np.fill_diagonal(cov, alpha**2 * (1.0 - kappa2))
    return cov


def _hyp2f1_half(c: float, z: np.ndarray) -> np.ndarray:
    """``2F1(-1/2, -1/2; c; z)`` for ``z in [0, 1]``.

    scipy's ``hyp2f1`` returns inf/NaN here for ``c`` above about 60 near ``z = 1`` (checked against mpmath);
    there the power series is used instead: its terms fall like ``k^{-2-c}``, so 200 terms leave an error
    far below 1e-15.  For ``c <= 50`` scipy agrees with mpmath to 1e-12 on [0, 1].
    """
    z = np.asarray(z, dtype=np.float64)
    if c <= 50.0:
        return special.hyp2f1(-0.5, -0.5, c, z)
    term = np.ones_like(z)
    total = np.ones_like(z)
    for k in range(200):  # loop over series terms
        term = term * (k - 0.5) ** 2 / ((c + k) * (k + 1.0)) * z
        total = total + term
    return total
