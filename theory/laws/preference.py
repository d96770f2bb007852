"""The pairwise preference law: P[f(theta_j) < f(theta_1)] for a client of cluster 1, an F(n, n) tail (IFCA Lemma 1)."""

from __future__ import annotations

import warnings

import numpy as np
from scipy import special

from synth.validation import check_array, check_int, check_real

from .gchi2 import GeneralizedChi2

__all__ = ["PairwisePreference", "UnderflowWarning", "chernoff_preference_bound", "log_f_tail", "preference_eigen",
           "preference_probability"]


def preference_eigen(A: float, B: float, C: float) -> tuple[float, float]:
    """``(lambda_+, lambda_-)`` with ``a^2 - b^2 = lambda_+ U - lambda_- V`` for ``(a, b) ~ N(0, [[A, C], [C, B]])``."""
    D = A - B
    det = max(A * B - C * C, 0.0)
    s = np.sqrt(D * D + 4.0 * det)
    return 0.5 * (s + D), 0.5 * (s - D)


def preference_probability(own_norm: float, other_norm: float, cos: float, sigma: float, n: int) -> float:
    """``P[f(theta_j) < f(theta_1)]`` from ``|u_1|``, ``|u_j|`` and their angle (see :class:`PairwisePreference`).

    A probability below the smallest normal double comes back as 0 (or a subnormal) with an
    :class:`UnderflowWarning`; :func:`ifca_worst_case` keeps the exact logarithm instead."""
    return _f_tail(*_preference_lambdas(own_norm, other_norm, cos, sigma, n))


def _preference_lambdas(own_norm: float, other_norm: float, cos: float, sigma: float,
                        n: int) -> tuple[float, float, int]:
    """``(lambda_+, lambda_-, n)`` of the F(n, n) law of :func:`preference_probability`, its arguments checked."""
    a = check_real("own_norm", own_norm, low=0.0)
    b = check_real("other_norm", other_norm, low=0.0)
    cos = check_real("cos", cos, low=-1.0, high=1.0)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    C = a * b * float(cos) + sigma**2
    return (*preference_eigen(b * b + sigma**2, a * a + sigma**2, C), n)


# below this the tail nears the end of the normal doubles (2.2e-308): it comes from its exact logarithm instead
_DEEP_TAIL = 1e-300


def _f_tail_and_log(lam_p: float, lam_m: float, n: int) -> tuple[float, float]:
    """``(P, log P)`` with ``P = P[lam_+ U < lam_- V]``, U, V iid chi2_n; ``log P`` exact even where ``P`` underflows
    (:func:`log_f_tail`), ``P`` then the double nearest to ``exp(log P)`` (0 below the smallest subnormal)."""
    if lam_p <= 0 and lam_m <= 0:
        return 0.5, float(np.log(0.5))  # identical residual vectors: a tie, broken uniformly at random by convention
    if lam_m <= 0:
        return 0.0, -np.inf
    if lam_p <= 0:
        return 1.0, 0.0
    # P[U/V < r] for U, V iid chi2_n is the F(n, n) cdf = I_{r/(1+r)}(n/2, n/2)
    r = lam_m / lam_p
    value = float(special.betainc(n / 2.0, n / 2.0, r / (1.0 + r)))
    if value >= _DEEP_TAIL:
        return value, float(np.log(value))
    log_value = log_f_tail(lam_p, lam_m, n)
    # exp of a log below about -745 underflows to 0, which is the correctly rounded double of the probability: the
    # exact size travels in log_value (and _f_tail warns callers that get the probability alone)
    with np.errstate(under="ignore"):
        return float(np.exp(log_value)), log_value


def _f_tail(lam_p: float, lam_m: float, n: int) -> float:
    """``P[lam_+ U < lam_- V]``; an :class:`UnderflowWarning` when it is below the smallest normal double (its digits
    lost: 0, or a subnormal)."""
    value, log_value = _f_tail_and_log(lam_p, lam_m, n)
    if 0.0 <= value < np.finfo(float).tiny and np.isfinite(log_value):
        warnings.warn(f"the exact F({n}, {n}) tail is about 10^{log_value / np.log(10.0):.1f}, below double "
                      f"precision; returning {value:g} (use log_f_tail for its logarithm)", UnderflowWarning,
                      stacklevel=3)
    return value


class UnderflowWarning(RuntimeWarning):
    """An exact probability is below the smallest double and was returned as (nearly) zero."""


def log_f_tail(lam_p: float, lam_m: float, n: int) -> float:
    """Natural log of ``P[lam_+ U < lam_- V]`` (U, V iid chi2_n), exact even where the probability underflows.

    ``I_x(a, a)`` with ``a = n/2`` and ``x = r/(1+r) < 1/2`` is
    ``x^a (1-x)^a / (a B(a, a)) * 2F1(2a, 1; a+1; x)``; the hypergeometric series has
    positive terms with ratio ``(2a+k) x / (a+1+k) < 2x < 1`` and is summed in log space.
    """
    if lam_m <= 0:
        return -np.inf
    if lam_p <= 0:
        return 0.0
    r = lam_m / lam_p
    a = n / 2.0
    x = r / (1.0 + r)
    if x >= 0.5:  # not a tail: no underflow possible
        return float(np.log(special.betainc(a, a, x)))
    log_term, log_sum = 0.0, 0.0
    for k in range(100000):
        log_term += np.log((2 * a + k) * x / (a + 1 + k))
        log_sum = np.logaddexp(log_sum, log_term)
        if log_term < log_sum - 40:
            break
    return float(a * np.log(x) + a * np.log1p(-x) - np.log(a) - special.betaln(a, a) + log_sum)


class PairwisePreference:
    """A client of cluster 1 compares its model ``theta_1`` with a wrong model ``theta_j`` (IFCA Lemma 1).

    Derivation.  With fresh data the two residual vectors share ``X`` and
    ``eps``: ``r_1 = X u_1 + eps`` and ``r_j = X u_j + eps`` with
    ``u = theta*_1 - theta``.  Row ``l`` gives ``(a_l, b_l) = (<x_l, u_j> + e_l,
    <x_l, u_1> + e_l)``, i.i.d. ``N(0, S)`` with

    ``S = [[|u_j|^2 + s^2, <u_j, u_1> + s^2], [<u_j, u_1> + s^2, |u_1|^2 + s^2]]``.

    Writing ``(a, b) = S^{1/2} z`` gives ``a^2 - b^2 = z^T S^{1/2} J S^{1/2} z`` with
    ``J = diag(1, -1)``; that matrix has the eigenvalues of ``S J``: one
    ``lambda_+ > 0`` and one ``-lambda_- < 0`` with ``lambda_+ - lambda_- = S11 - S22``
    and ``lambda_+ lambda_- = det S``.  Rotating ``z`` onto its eigenvectors,

    ``n (f(theta_j) - f(theta_1)) = ||r_j||^2 - ||r_1||^2 = lambda_+ U - lambda_- V``,
    ``U, V`` i.i.d. ``chi2_n``,

    so ``P[prefer j] = P[U / V < lambda_-/lambda_+] = F_{n,n}(lambda_-/lambda_+)``,
    exactly.  :attr:`difference` is the law of ``f(theta_j) - f(theta_1)``
    (a :class:`GeneralizedChi2`), whose cdf at 0 is the same number.
    """

    def __init__(self, u_own, u_other, sigma: float, n: int):
        self.u_own = check_array("u_own", u_own, ndim=1)
        self.u_other = check_array("u_other", u_other, ndim=1, shape=self.u_own.shape)
        self.sigma = check_real("sigma", sigma, low=0.0)
        self.n = check_int("n", n, low=1)
        s2 = self.sigma**2
        self.S = np.array([[self.u_other @ self.u_other + s2, self.u_other @ self.u_own + s2],
                           [self.u_other @ self.u_own + s2, self.u_own @ self.u_own + s2]])
        self.lambda_plus, self.lambda_minus = preference_eigen(self.S[0, 0], self.S[1, 1], self.S[0, 1])

    @property
    def ratio(self) -> float:
        """``lambda_- / lambda_+``, the F(n, n) argument."""
        return self.lambda_minus / self.lambda_plus if self.lambda_plus > 0 else np.inf

    def prob(self) -> float:
        """``P[f(theta_j) < f(theta_1)]``: the client prefers the wrong model."""
        return _f_tail(self.lambda_plus, self.lambda_minus, self.n)

    @property
    def difference(self) -> GeneralizedChi2:
        """Law of ``f(theta_j) - f(theta_1) = (lambda_+ U - lambda_- V) / n``."""
        return GeneralizedChi2([self.lambda_plus / self.n, -self.lambda_minus / self.n], [self.n, self.n])

    def chernoff(self) -> float:
        """Chernoff bound ``(4 r / (1 + r)^2)^{n/2}`` on :meth:`prob` (``r`` = :attr:`ratio` < 1)."""
        return chernoff_preference_bound(self.ratio, self.n)


def chernoff_preference_bound(ratio: float, n: int) -> float:
    """``P[U/V < r] <= (4r/(1+r)^2)^{n/2}`` for iid ``chi2_n`` (optimised Chernoff bound; 1 for ``r >= 1``)."""
    r = float(ratio)
    if not r < 1.0:
        return 1.0
    return float(np.exp(0.5 * n * (np.log(4.0 * r) - 2.0 * np.log1p(r)))) if r > 0 else 0.0
