"""Chi moments and the exact laws of one client's loss and square-root loss (CLoVE App. A.1)."""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy import stats as _st

from synth.validation import check_int, check_real

__all__ = ["chi_mean", "chi_var", "client_loss_law", "clove_moment_report", "root_loss_law"]


def _check_dof(n) -> np.ndarray:
    """Degrees of freedom: finite and > 0 (scalar or array)."""
    arr = np.asarray(n, dtype=np.float64)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ValueError(f"n (degrees of freedom) must be finite and > 0, got {n!r}")
    return arr


def chi_mean(n) -> np.ndarray | float:
    """``E[chi_n] = sqrt(2) Gamma((n+1)/2) / Gamma(n/2)`` (exact; log-Gamma for large n)."""
    n = _check_dof(n)
    out = np.sqrt(2.0) * np.exp(special.gammaln((n + 1.0) / 2.0) - special.gammaln(n / 2.0))
    return float(out) if out.ndim == 0 else out


def chi_var(n) -> np.ndarray | float:
    """``Var[chi_n] = n - E[chi_n]^2`` (exact)."""
    n = _check_dof(n)
    out = n - np.asarray(chi_mean(n)) ** 2
    return float(out) if out.ndim == 0 else out


def client_loss_law(err2: float, sigma: float, n: int):
    """Law of a client's empirical squared loss on a model at squared distance ``err2`` from its optimum.

    CLoVE App. A.1: ``f(theta) = (1/n) sum_l (<u, x_l> + eps_l)^2`` and each
    summand is ``N(0, ||u||^2 + sigma^2)`` squared, so
    ``f ~ (||u||^2 + sigma^2) chi2_n / n`` -- a frozen ``scipy.stats.chi2``.
    """
    s2, n = _loss_scale(err2, sigma, n)
    return _st.chi2(df=n, scale=s2 / n)


def root_loss_law(err2: float, sigma: float, n: int):
    """Law of the square-root loss ``F = sqrt(f)`` (CLoVE's SLV entry): ``sqrt((err2 + sigma^2)/n) chi_n``.

    Its exact mean is ``alpha E[chi_n]/sqrt(n)`` with ``alpha = sqrt(err2 + sigma^2)``
    and its variance ``alpha^2 (1 - E[chi_n]^2/n)``; CLoVE App. A.1 uses the
    Stirling approximations ``alpha (1 - 1/(4n))`` and ``alpha^2/(2n)`` instead
    (:func:`clove_moment_report` compares them).
    """
    s2, n = _loss_scale(err2, sigma, n)
    return _st.chi(df=n, scale=np.sqrt(s2 / n))


def _loss_scale(err2: float, sigma: float, n: int) -> tuple[float, int]:
    """``(err2 + sigma^2, n)`` checked: the variance of one residual and the sample count of both loss laws."""
    err2 = check_real("err2", err2, low=0.0)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    s2 = err2 + sigma**2
    if s2 <= 0:
        raise ValueError("err2 + sigma^2 must be > 0 (a noiseless client at its optimum has loss 0)")
    return s2, n


def clove_moment_report(n: int) -> dict[str, float]:
    """Exact moments of ``chi_n/sqrt(n)`` vs CLoVE App. A.1's Stirling approximations (per unit ``alpha``).

    CLoVE writes ``E[chi(n)] = sqrt(n-1)[1 - 1/(4n) + O(1/n^2)]`` and then
    ``E[F] = alpha[1 - 1/(4n)]``, ``Var[F] ~ alpha^2/(2n)``; the first two are
    not consistent with each other (``sqrt(n-1)/sqrt(n) [1 - 1/(4n)] ~ 1 - 3/(4n)``).
    Returns the exact values and the three approximations with relative errors.
    """
    n = check_int("n", n, low=1)
    kappa = chi_mean(n) / np.sqrt(n)
    var = 1.0 - kappa**2
    approx_mean = 1.0 - 1.0 / (4.0 * n)
    approx_mean_sqrt_nm1 = np.sqrt((n - 1.0) / n) * (1.0 - 1.0 / (4.0 * n))
    approx_var = 1.0 / (2.0 * n)
    return {
        "n": n,
        "mean_exact": float(kappa),
        "mean_clove": float(approx_mean),
        "mean_clove_rel_error": float(approx_mean / kappa - 1.0),
        "mean_clove_sqrt_n_minus_1": float(approx_mean_sqrt_nm1),
        "mean_clove_sqrt_n_minus_1_rel_error": float(approx_mean_sqrt_nm1 / kappa - 1.0),
        "mean_paper_alpha": 1.0,
        "mean_paper_alpha_rel_error": float(1.0 / kappa - 1.0),
        "var_exact": float(var),
        "var_clove": float(approx_var),
        "var_clove_rel_error": float(approx_var / var - 1.0),
    }
