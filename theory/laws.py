"""Exact laws of the mixed-linear-regression model with Gaussian features and fresh data.

Setting (IFCA Sec. V-A, SR-FCA Prop. 4.1, CLoVE App. A): a client of cluster
``c`` draws ``n`` fresh pairs ``y = <theta*_c, x> + eps`` with ``x ~ N(0, I_d)``,
``eps ~ N(0, sigma^2)``; its empirical squared loss on a model ``theta`` is
``f(theta) = ||X u + eps||^2 / n`` with ``u = theta*_c - theta``.

Objects follow the ``scipy.stats`` convention: a *frozen* law with ``cdf``,
``sf``, ``pdf`` (where cheap), ``ppf``, ``mean``, ``var`` and ``rvs``.

* :func:`client_loss_law` -- ``f(theta) ~ (||u||^2 + sigma^2) chi2_n / n`` (CLoVE App. A.1).
* :func:`root_loss_law` -- ``sqrt f(theta) ~ sqrt((||u||^2 + sigma^2)/n) chi_n``, with the exact
  Gamma-function moments :func:`chi_mean`, :func:`chi_var` and CLoVE's Stirling
  approximations beside them (:func:`clove_moment_report`).
* :class:`GeneralizedChi2` -- ``sum_j w_j chi'^2_{k_j}(nc_j)``, cdf by Imhof's (1961) inversion formula.
* :class:`PairwisePreference` -- ``P[f(theta_j) < f(theta_1)]`` for a client of cluster 1: an
  ``F(n, n)`` tail (derivation in the class docstring).
* :func:`ifca_worst_case` / :func:`search_worst_case` -- the largest pairwise misassignment
  probability over every placement IFCA's Assumption 1 allows (IFCA Lemma 1), derived in closed form
  and confirmed by numerical search.
* :func:`ols_edge_law` -- the ONE_SHOT edge statistic ``||w_i - w_j||^2`` of two clients' OLS ERMs,
  conditional on their designs: a generalised chi-square (SR-FCA Alg. 1, Lemma 4.6).
* :func:`ols_edge_law_unconditional` -- the same statistic with the designs integrated out: a scale mixture of
  noncentral chi-squares over two chi-square variables, its mean in closed form.
* :func:`slv_mean` / :func:`slv_covariance` -- exact mean and covariance of a client's square-root
  loss vector (CLoVE Lemmas A.1-A.7), the cross moment from the bivariate-chi formula
  ``E[chi_a chi_b] = E[chi_n]^2 2F1(-1/2, -1/2; n/2; r^2)``.
* :func:`kl_mlr` -- ``KL(p_i(x, y) || p_j(x, y))`` of two linear-Gaussian clients (SR-FCA Prop. 4.1).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy import integrate, optimize, special
from scipy import stats as _st

from synth.validation import check_array, check_int, check_random_state, check_real

__all__ = [
    "UnderflowWarning",
    "log_f_tail",
    "GeneralizedChi2",
    "PairwisePreference",
    "WorstCase",
    "A1WorstCase",
    "MisassignmentLaw",
    "chernoff_preference_bound",
    "chi_mean",
    "chi_var",
    "client_loss_law",
    "clove_a1_worst_case",
    "clove_moment_report",
    "ifca_worst_case",
    "kl_mlr",
    "ols_edge_law",
    "ols_edge_law_unconditional",
    "UnconditionalEdgeLaw",
    "preference_eigen",
    "preference_probability",
    "root_loss_law",
    "search_a1_worst_case",
    "search_worst_case",
    "slv_covariance",
    "slv_mean",
    "symmetric_misassignment",
    "symmetric_placement",
]


# --------------------------------------------------------------------------- chi moments
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
    err2 = check_real("err2", err2, low=0.0)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    s2 = err2 + sigma**2
    if s2 <= 0:
        raise ValueError("err2 + sigma^2 must be > 0 (a noiseless client at its optimum has loss 0)")
    return _st.chi2(df=n, scale=s2 / n)


def root_loss_law(err2: float, sigma: float, n: int):
    """Law of the square-root loss ``F = sqrt(f)`` (CLoVE's SLV entry): ``sqrt((err2 + sigma^2)/n) chi_n``.

    Its exact mean is ``alpha E[chi_n]/sqrt(n)`` with ``alpha = sqrt(err2 + sigma^2)``
    and its variance ``alpha^2 (1 - E[chi_n]^2/n)``; CLoVE App. A.1 uses the
    Stirling approximations ``alpha (1 - 1/(4n))`` and ``alpha^2/(2n)`` instead
    (:func:`clove_moment_report` compares them).
    """
    err2 = check_real("err2", err2, low=0.0)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    s2 = err2 + sigma**2
    if s2 <= 0:
        raise ValueError("err2 + sigma^2 must be > 0")
    return _st.chi(df=n, scale=np.sqrt(s2 / n))


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


# ------------------------------------------------------------------ generalised chi-square
# half periods integrated beyond the cut before Euler averaging; 48 already reproduce the 2M-sample and
# closed-form references to 1e-15 (chi2_2, chi2_5 and noncentral cases), 64 leaves a margin
_TAIL_PERIODS = 64


class GeneralizedChi2:
    """``Q = sum_j w_j chi'^2_{k_j}(nc_j)`` with real weights (a frozen, ``scipy.stats``-style law).

    ``cdf``/``sf`` use Imhof's (1961) inversion formula

    ``P[Q > x] = 1/2 + (1/pi) int_0^inf sin(theta(u)) / (u rho(u)) du``,
    ``theta(u) = 1/2 sum_j [k_j atan(w_j u) + nc_j w_j u / (1 + w_j^2 u^2)] - x u / 2``,
    ``rho(u) = prod_j (1 + w_j^2 u^2)^{k_j/4} exp(1/2 sum_j nc_j w_j^2 u^2 / (1 + w_j^2 u^2))``,

    integrated numerically (absolute accuracy about 1e-10; ``cdf`` values far
    in a tail below that are not resolved -- use a closed form there, as
    :class:`PairwisePreference` does).
    """

    def __init__(self, weights, dofs, noncentralities=None):
        self.w = check_array("weights", weights, ndim=1)
        self.k = check_array("dofs", dofs, ndim=1, shape=(len(self.w),), nonnegative=True)
        nc = np.zeros_like(self.w) if noncentralities is None else noncentralities
        self.nc = check_array("noncentralities", nc, ndim=1, shape=(len(self.w),), nonnegative=True)
        keep = (self.w != 0) & ((self.k > 0) | (self.nc > 0))
        self.w, self.k, self.nc = self.w[keep], self.k[keep], self.nc[keep]

    def mean(self) -> float:
        return float(np.sum(self.w * (self.k + self.nc)))

    def var(self) -> float:
        return float(2.0 * np.sum(self.w**2 * (self.k + 2.0 * self.nc)))

    def _sf_one(self, x: float) -> float:
        w, k, nc = self.w, self.k, self.nc
        if len(w) == 0:
            return float(x < 0)
        if len(w) == 1:  # one term: a scaled (noncentral) chi-square in closed form
            base = _st.ncx2(k[0], nc[0]) if nc[0] > 0 else _st.chi2(k[0])
            return float(base.sf(x / w[0]) if w[0] > 0 else base.cdf(x / w[0]))

        scale = 1.0 / np.max(np.abs(w))
        if abs(x) * scale < 1e-12:
            # the cdf is continuous (two or more terms): at |x| this small the oscillation exp(-i x u / 2) is
            # invisible on the range where the integrand lives, and x = 0 is exact to far below 1e-10
            x = 0.0

        def integrand(u):
            if u == 0.0:
                return 0.5 * (np.sum(w * (k + nc)) - x)
            wu = w * u
            aw2 = wu * wu
            frac = aw2 / (1.0 + aw2)  # (w u)^2 / (1 + (w u)^2), in [0, 1)
            phi = 0.5 * np.sum(k * np.arctan(wu) + nc * wu / (1.0 + aw2))
            log_rho = np.sum(0.25 * k * np.log1p(aw2) + 0.5 * nc * frac)
            return np.sin(phi - 0.5 * x * u) / (u * np.exp(log_rho))

        cut = 50.0 * scale
        if x != 0.0:
            # integrate a few oscillations plainly before the half-period summation takes over
            cut = max(cut, 10.0 * np.pi / abs(0.5 * x))
        # geometric pieces: each holds a bounded number of oscillations, so adaptive quadrature resolves it
        edges = [0.0, scale, 5 * scale]
        while edges[-1] < cut:
            edges.append(min(10.0 * edges[-1], cut))
        total = 0.0
        for a, b in zip(edges[:-1], edges[1:], strict=True):
            total += integrate.quad(integrand, a, b, limit=500, epsabs=1e-13, epsrel=1e-11)[0]
        total += self._tail(cut, 0.5 * x, integrand)
        return float(np.clip(0.5 + total / np.pi, 0.0, 1.0))

    @staticmethod
    def _tail(cut: float, omega: float, integrand) -> float:
        """``int_cut^inf integrand``: beyond ``cut`` the integrand is an amplitude (decreasing, about
        ``u^{-1-K/2}``) times ``sin(phi(u) - omega u)`` with ``phi`` nearly constant.

        Without oscillation (``omega = 0``) plain adaptive quadrature converges.  Otherwise the range is cut
        into half periods ``pi/|omega|``; the partial sums then oscillate around the limit with shrinking
        amplitude, and repeated averaging of the last partial sums (Euler's transform) removes the oscillation.
        (QUADPACK's Fourier routine QAWF would do this too, but it crashed the interpreter on some inputs.)
        """
        if omega == 0.0:
            return integrate.quad(integrand, cut, np.inf, limit=500, epsabs=1e-13)[0]
        half = np.pi / abs(omega)
        sums, total, a = [], 0.0, cut
        for _ in range(_TAIL_PERIODS):  # loop over half periods
            total += integrate.quad(integrand, a, a + half, limit=100, epsabs=1e-14)[0]
            sums.append(total)
            a += half
        tail = np.array(sums[-32:])
        while len(tail) > 1:
            tail = 0.5 * (tail[1:] + tail[:-1])
        return float(tail[0])

    def sf(self, x):
        xs = np.atleast_1d(np.asarray(x, dtype=np.float64))
        out = np.array([self._sf_one(float(v)) for v in xs])
        return float(out[0]) if np.ndim(x) == 0 else out.reshape(np.shape(x))

    def cdf(self, x):
        return 1.0 - self.sf(x)

    def rvs(self, size=None, random_state=None) -> np.ndarray:
        rng = check_random_state(random_state)
        shape = () if size is None else (size if isinstance(size, tuple) else (size,))
        out = np.zeros(shape)
        for w, k, nc in zip(self.w, self.k, self.nc, strict=True):  # loop over the few terms
            draw = rng.noncentral_chisquare(k, nc, size=shape) if nc > 0 else rng.chisquare(k, size=shape)
            out = out + w * draw
        return out


# ------------------------------------------------------------------- pairwise preference
def preference_eigen(A: float, B: float, C: float) -> tuple[float, float]:
    """``(lambda_+, lambda_-)`` with ``a^2 - b^2 = lambda_+ U - lambda_- V`` for ``(a, b) ~ N(0, [[A, C], [C, B]])``."""
    D = A - B
    det = max(A * B - C * C, 0.0)
    s = np.sqrt(D * D + 4.0 * det)
    return 0.5 * (s + D), 0.5 * (s - D)


def preference_probability(own_norm: float, other_norm: float, cos: float, sigma: float, n: int) -> float:
    """``P[f(theta_j) < f(theta_1)]`` from ``|u_1|``, ``|u_j|`` and their angle (see :class:`PairwisePreference`)."""
    a = check_real("own_norm", own_norm, low=0.0)
    b = check_real("other_norm", other_norm, low=0.0)
    cos = check_real("cos", cos, low=-1.0, high=1.0)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    C = a * b * float(cos) + sigma**2
    lam_p, lam_m = preference_eigen(b * b + sigma**2, a * a + sigma**2, C)
    return _f_tail(lam_p, lam_m, n)


def _f_tail(lam_p: float, lam_m: float, n: int) -> float:
    if lam_p <= 0 and lam_m <= 0:
        return 0.5  # identical residual vectors: a tie, broken uniformly at random by convention
    if lam_m <= 0:
        return 0.0
    if lam_p <= 0:
        return 1.0
    # P[U/V < r] for U, V iid chi2_n is the F(n, n) cdf = I_{r/(1+r)}(n/2, n/2)
    r = lam_m / lam_p
    value = float(special.betainc(n / 2.0, n / 2.0, r / (1.0 + r)))
    if value < 1e-300:
        log10 = log_f_tail(lam_p, lam_m, n) / np.log(10.0)
        warnings.warn(f"the exact F({n}, {n}) tail is about 10^{log10:.1f}, below double precision; "
                      f"returning {value:g} (use log_f_tail for its logarithm)", UnderflowWarning, stacklevel=3)
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


# ----------------------------------------------------------- IFCA Lemma 1: the worst placement
@dataclass(frozen=True)
class WorstCase:
    """The placement of (own, wrong) model that maximises the misassignment probability.

    ``own_norm = |theta*_1 - theta_1|``, ``other_norm = |theta*_1 - theta_j|``,
    ``cos`` the cosine between ``u_1`` and ``u_j``; ``attained`` is False when
    the value is a supremum approached but not reached (``alpha < 0``).
    """

    prob: float
    own_norm: float
    other_norm: float
    cos: float
    regime: str
    attained: bool = True


def ifca_worst_case(alpha: float, delta: float, sigma: float, n: int, d: int = 2) -> WorstCase:
    """Largest ``P[client of cluster 1 prefers theta_j]`` over placements allowed by IFCA Assumption 1.

    Allowed: ``|theta_j - theta*_j| <= (1/2 - alpha) Delta`` for both models and
    ``|theta*_1 - theta*_j| >= Delta``.  Then ``a = |u_1| <= r := (1/2 - alpha) Delta``
    and ``b = |u_j| >= Delta - r = (1/2 + alpha) Delta`` can be chosen freely, with
    any angle when ``d >= 2`` and only ``cos = +-1`` when ``d = 1``.

    Derivation (``D = S11 - S22 = b^2 - a^2``, ``P = det S``): the ratio
    ``lambda_-/lambda_+ = (sqrt(D^2 + 4P) - D)/(sqrt(D^2 + 4P) + D)`` increases with
    ``P/D^2`` when ``D > 0`` and decreases with it when ``D < 0``.

    * ``alpha > 0`` (``b > a`` always): maximise ``P = AB - C^2``, i.e. make
      ``|C| = |ab cos + sigma^2|`` small.  If ``ab >= sigma^2`` and ``d >= 2`` the angle
      ``cos = -sigma^2/(ab)`` gives ``C = 0`` and ``P/D^2 = (a^2+s^2)(b^2+s^2)/(b^2-a^2)^2``;
      otherwise ``cos = -1`` (opposite sides: the collinear placement that "looks
      worst" is *not* the maximiser when ``ab > sigma^2``) gives ``P = s^2 (a+b)^2``,
      ``P/D^2 = s^2/(b-a)^2``.  Both increase in ``a`` and decrease in ``b``, so
      ``a = r``, ``b = (1/2 + alpha) Delta``.
    * ``alpha = 0``: ``a = b = Delta/2`` gives ``D = 0`` and probability exactly 1/2.
    * ``alpha < 0`` (outside Assumption 1): ``b < a`` is allowed, ``D < 0`` and the
      probability exceeds 1/2; it is largest when ``P/D^2`` is smallest: ``cos = +1``
      (the wrong model on the segment between theta*_1 and theta_1), where
      ``P/D^2 = s^2/(a+b)^2``, minimised by ``a = r`` and ``b -> r`` (a supremum:
      at ``b = a`` the two models coincide).  The limit is
      ``F_{n,n}((sqrt(1+4q)+1)/(sqrt(1+4q)-1))``, ``q = sigma^2/(2r)^2``.

    The value only depends on ``n``, ``alpha`` and ``rho = Delta^2/sigma^2`` (scale invariance).
    """
    alpha = check_real("alpha", alpha, low=-0.5, high=0.5, low_inclusive=False, high_inclusive=False)
    delta = check_real("delta", delta, low=0.0, low_inclusive=False)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    d = check_int("d", d, low=1)
    r = (0.5 - alpha) * delta
    if alpha > 0:
        a, b = r, (0.5 + alpha) * delta
        if d >= 2 and a * b >= sigma**2:
            cos, regime = (-sigma**2 / (a * b) if a * b > 0 else 0.0), "angle with <u_j, u_1> = -sigma^2 (S diagonal)"
        else:
            cos, regime = -1.0, "collinear, opposite sides"
        return WorstCase(preference_probability(a, b, cos, sigma, n), a, b, cos, regime)
    if alpha == 0:
        return WorstCase(0.5, r, r, -1.0, "a = b = Delta/2: equal expected losses")
    q = sigma**2 / (2.0 * r) ** 2
    s = np.sqrt(1.0 + 4.0 * q)
    ratio = (s + 1.0) / (s - 1.0) if q > 0 else np.inf
    prob = float(special.betainc(n / 2.0, n / 2.0, ratio / (1.0 + ratio))) if np.isfinite(ratio) else 1.0
    return WorstCase(prob, r, r, 1.0, "wrong model on the ray through the own model, approaching it "
                     "(alpha < 0: outside Assumption 1)", attained=False)


def search_worst_case(alpha: float, delta: float, sigma: float, n: int, d: int = 2, grid: int = 41,
                      b_span: float = 2.0) -> WorstCase:
    """Numerical maximisation of the misassignment probability over Assumption-1 placements.

    Confirms :func:`ifca_worst_case`: a grid over ``a in [0, r]``,
    ``b in [max(Delta - r, 0), Delta - r + b_span Delta]`` (``b = a`` excluded when it
    would make the models coincide) and ``cos in [-1, 1]`` (only ``+-1`` for
    ``d = 1``), then local refinement (L-BFGS-B on the log-probability) from the best grid points.
    """
    alpha = check_real("alpha", alpha, low=-0.5, high=0.5, low_inclusive=False, high_inclusive=False)
    r = (0.5 - alpha) * delta
    b_lo = max(delta - r, 0.0)
    b_hi = b_lo + b_span * delta
    coss = np.array([-1.0, 1.0]) if d == 1 else np.linspace(-1.0, 1.0, grid)

    def prob(a, b, c):
        if abs(a - b) < 1e-12 and c > 1 - 1e-12:
            return -np.inf  # coincident models: excluded (tie)
        return preference_probability(a, b, c, sigma, n)

    best = []
    for a in np.linspace(0.0, r, grid):  # a small grid search; the refinement below does the rest
        for b in np.linspace(b_lo, b_hi, grid):
            for c in coss:
                best.append((prob(a, b, c), a, b, c))
    best.sort(key=lambda t: -t[0])
    top = best[0]
    for _, a0, b0, c0 in best[:5]:
        if d == 1:
            free = lambda z, c0=c0: -np.log(max(prob(z[0], z[1], c0), 1e-300))  # noqa: E731
            res = optimize.minimize(free, [a0, b0], method="L-BFGS-B", bounds=[(0, r), (b_lo, b_hi)])
            cand = (prob(res.x[0], res.x[1], c0), res.x[0], res.x[1], c0)
        else:
            free = lambda z: -np.log(max(prob(*z), 1e-300))  # noqa: E731
            res = optimize.minimize(free, [a0, b0, c0], method="L-BFGS-B",
                                    bounds=[(0, r), (b_lo, b_hi), (-1, 1)])
            cand = (prob(*res.x), *res.x)
        if cand[0] > top[0]:
            top = cand
    return WorstCase(float(top[0]), float(top[1]), float(top[2]), float(top[3]), "numerical search")


# ------------------------------------------------------------------- ONE_SHOT edge law
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
        lo, hi = np.log(_st.chi2.ppf(_MIS_TAIL, k)), np.log(_st.chi2.isf(_MIS_TAIL, k))
        t, w = _gl_nodes(lo, hi, panels, order)
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
        return float(min(max(fine, 0.0), 1.0)), abs(fine - coarse) + 4.0 * _MIS_TAIL

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


# ------------------------------------------------------------- CLoVE: square-root loss vectors
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


# -------------------------------------------------------------------------------- KL
def kl_mlr(w_i, w_j, sigma: float, cov=None) -> float:
    """``KL(p_i(x, y) || p_j(x, y))`` for ``y = <w, x> + N(0, sigma^2)``, ``x ~ N(0, Sigma)`` (SR-FCA Prop. 4.1).

    The ``x``-marginals agree, so ``KL = E_x[KL(N(<w_i,x>, s^2) || N(<w_j,x>, s^2))]
    = E_x[<w_i - w_j, x>^2] / (2 sigma^2) = (w_i - w_j)^T Sigma (w_i - w_j) / (2 sigma^2)``;
    with ``Sigma = I_d`` that is ``||w_i - w_j||^2 / (2 sigma^2)`` -- without the
    factor ``d`` that Prop. 4.1 states.
    """
    wi = check_array("w_i", w_i, ndim=1)
    diff = wi - check_array("w_j", w_j, ndim=1, shape=wi.shape)
    sigma = check_real("sigma", sigma, low=0.0, low_inclusive=False)
    S = np.eye(len(wi)) if cov is None else check_array("cov", cov, shape=(len(wi), len(wi)))
    return float(diff @ S @ diff / (2.0 * sigma**2))


# ------------------------------------------------------- IFCA Lemma 1 with K >= 3 models
@dataclass(frozen=True)
class MisassignmentLaw:
    """Exact ``P[argmin_j f(theta_j) != 1]`` for a client of cluster 1 facing ``K`` models (IFCA Lemma 1, any K).

    The client's residual rows ``z_l = (<x_l, u_j> + e_l)_j`` are i.i.d. ``N(0, S)`` with
    ``S_jl = <u_j, u_l> + sigma^2`` and ``n f(theta_j) = W_jj``, ``W ~ Wishart_K(n, S)``.  When every
    off-diagonal entry of ``S`` equals one ``c >= 0`` (``S = diag(Lambda) + c 1 1^T``: the wrong models
    are placed symmetrically) the rows are ``sqrt(c) g_l 1 + Lambda^{1/2} h_l``: a *shared* Gaussian
    ``g`` plus independent parts.  Conditional on the shared vector ``xi = sqrt(c) g`` (``||xi||^2 = c Q``,
    ``Q ~ chi2_n``), ``W_jj = Lambda_j chi'^2_n(c Q / Lambda_j)`` independently over ``j``, so

    ``P[correct] = E_Q[ int pdf_1(w | Q) prod_{j >= 2} sf_j(w | Q) dw ]``,

    a two-dimensional integral (nested adaptive quadrature; :attr:`abs_error` is the quadrature's own
    estimate of its absolute error, below 1e-8 in every case the tests try).  ``c = 0`` (``S``
    diagonal) makes the losses independent scaled ``chi2_n`` and the outer integral trivial.  For
    ``K = 2`` this is the ``F(n, n)`` tail of :class:`PairwisePreference` (checked to 1e-9).

    Any positive-definite ``S`` with ``K = 3`` (any placement of the two wrong models): condition on the own
    column ``c_1`` of the residuals (``W_11 = ||c_1||^2 = w``).  Given it, the other two columns are
    ``c_j = (S_j1 / S_11) c_1 + e_j`` with rows ``(e_2l, e_3l)`` i.i.d. ``N(0, T)``, ``T`` the conditional
    covariance.  Flipping the sign of a column leaves ``W_jj`` unchanged, so ``T_23 >= 0``, and
    ``T = diag(lambda) + tau tau^T`` with ``lambda > 0``: a shared ``eta ~ N(0, I_n)`` plus independent parts.
    By rotation invariance only ``eta_1`` (along ``c_1``) and ``R = ||eta_rest||^2 ~ chi2_{n-1}`` matter, and
    given ``(w, eta_1, R)`` the two wrong losses are independent,
    ``W_jj = lambda_j chi'^2_n(((S_j1/S_11) sqrt(w) + tau_j eta_1)^2 + tau_j^2 R) / lambda_j)``, so
    ``P[correct] = E[sf_2 sf_3]`` is a three-dimensional integral (composite Gauss-Legendre in ``sqrt(w)``,
    ``eta_1`` and ``sqrt(R)``; :attr:`abs_error` from halving the panels).  ``shared`` is then ``nan`` and
    ``lambdas`` holds ``(S_11, lambda_2, lambda_3)``.  ``K >= 4`` needs the symmetric form (equal off-diagonal
    entries up to column signs); a general ``S`` is refused there.
    """

    prob: float
    abs_error: float
    shared: float
    lambdas: tuple

    @staticmethod
    def from_cov(S, n: int) -> MisassignmentLaw:
        """The law for a residual covariance ``S``: any positive-definite ``S`` for ``K <= 3``; for ``K >= 4``
        one whose off-diagonal entries are all equal and ``>= 0`` (the symmetric placement)."""
        S = check_array("S", S, ndim=2)
        K = S.shape[0]
        if S.shape != (K, K) or K < 2:
            raise ValueError(f"S must be a square matrix with K >= 2, got shape {S.shape}")
        n = check_int("n", n, low=1)
        off = S[~np.eye(K, dtype=bool)]
        c = float(off.mean())
        scale = float(np.max(np.abs(np.diag(S))))
        symmetric = np.max(np.abs(off - c)) <= 1e-10 * max(scale, 1e-300) and c >= -1e-12 * scale
        if K == 2 and not symmetric:  # one off-diagonal pair: its sign is a column's sign, which W_jj ignores
            S = S * np.array([[1.0, -1.0], [-1.0, 1.0]])
            c, symmetric = float(S[0, 1]), True
        if not symmetric and K == 3:
            if np.max(np.abs(S - S.T)) > 1e-12 * max(scale, 1e-300):
                raise ValueError("S must be symmetric")
            if np.linalg.eigvalsh(S).min() <= 1e-12 * scale:
                raise ValueError("S must be positive definite for the general K = 3 law; got eigenvalues "
                                 f"{np.round(np.linalg.eigvalsh(S), 12).tolist()}")
            p, err, lam = _misassignment3(S, n)
            return MisassignmentLaw(p, err, float("nan"), lam)
        if not symmetric:
            raise ValueError(f"with K = {K} >= 4 models S must have equal off-diagonal entries c >= 0 (the "
                             "symmetric placement: a one-factor conditioning); a general S is exact only for "
                             f"K <= 3 here; got off-diagonal entries in [{off.min():g}, {off.max():g}]")
        c = max(c, 0.0)
        lam = np.diag(S) - c
        if np.any(lam < -1e-12 * scale):
            raise ValueError(f"S - c 1 1^T must have a nonnegative diagonal, got {lam.tolist()}")
        lam = np.maximum(lam, 0.0)
        p, err = _misassignment(lam, c, n)
        return MisassignmentLaw(p, err, c, tuple(float(v) for v in lam))


def _gl_nodes(lo, hi, panels: int, order: int):
    """Composite Gauss-Legendre nodes and weights on ``[lo, hi]`` (vectorised over leading axes of lo/hi)."""
    x, w = special.roots_legendre(order)
    lo, hi = np.asarray(lo, dtype=np.float64)[..., None], np.asarray(hi, dtype=np.float64)[..., None]
    edges = lo + (hi - lo) * np.linspace(0.0, 1.0, panels + 1)
    a, b = edges[..., :-1, None], edges[..., 1:, None]
    nodes = 0.5 * (a + b) + 0.5 * (b - a) * x
    weights = 0.5 * (b - a) * w
    shape = nodes.shape[:-2] + (panels * order,)
    return nodes.reshape(shape), weights.reshape(shape)


_MIS_TAIL = 1e-14  # probability mass cut from each end of every integration range


def _correct_prob(lam: np.ndarray, c: float, n: int, panels: int, order: int) -> float:
    """``P[W_11 < W_jj for every j >= 2]`` by composite Gauss-Legendre quadrature in ``(Q, sqrt(W_11))``."""
    lam1, rest = float(lam[0]), np.asarray(lam[1:], dtype=np.float64)
    if c == 0.0:
        qs, wq = np.zeros(1), np.ones(1)
    else:
        q_lo, q_hi = _st.chi2.ppf(_MIS_TAIL, n), _st.chi2.isf(_MIS_TAIL, n)
        # sqrt(Q) as the variable: the chi2_1 density's q^(-1/2) singularity becomes bounded
        s, ws = _gl_nodes(np.sqrt(q_lo), np.sqrt(q_hi), panels, order)
        qs, wq = s * s, ws * 2.0 * s * _st.chi2.pdf(s * s, n)

    def sf_rest(w, q):
        out = np.ones_like(w)
        for lj in rest:  # loop over the K - 1 wrong models (few)
            if lj == 0.0:
                out = out * (c * q > w)
            elif c == 0.0:
                out = out * _st.chi2.sf(w / lj, n)
            else:
                out = out * (1.0 - special.chndtr(w / lj, n, c * q / lj))  # absolute error ~1e-16 is all we need
        return out

    if lam1 == 0.0:
        return float(np.sum(wq * sf_rest(c * qs, qs)))
    nc = c * qs / lam1
    if c == 0.0:
        t_lo = np.sqrt(lam1 * _st.chi2.ppf(_MIS_TAIL, n)) * np.ones(1)
        t_hi = np.sqrt(lam1 * _st.chi2.isf(_MIS_TAIL, n)) * np.ones(1)
    else:
        t_lo = np.sqrt(lam1 * _st.ncx2.ppf(_MIS_TAIL, n, nc))
        t_hi = np.sqrt(lam1 * _st.ncx2.isf(_MIS_TAIL, n, nc))
    t, wt = _gl_nodes(t_lo, t_hi, panels, order)  # (nq, nodes): the variable is sqrt(W_11)
    w = t * t
    qq = qs[:, None] * np.ones_like(w)
    dens = (_st.chi2.pdf(w / lam1, n) if c == 0.0 else _st.ncx2.pdf(w / lam1, n, nc[:, None])) / lam1
    inner = np.sum(wt * 2.0 * t * dens * sf_rest(w, qq), axis=1)
    return float(np.sum(wq * inner))


def _misassignment(lam: np.ndarray, c: float, n: int) -> tuple[float, float]:
    """``(P[some j >= 2 has W_jj < W_11], error estimate)`` for ``W_jj = ||xi + Lambda_j^{1/2} h_j||^2``.

    The error estimate is the change from doubling the number of panels in both directions plus the
    ``4e-14`` of mass cut from the ranges.
    """
    if float(lam[0]) == 0.0 and c == 0.0:
        return 0.0, 0.0  # the own loss is 0: never beaten
    coarse = _correct_prob(lam, c, n, 12, 16)
    fine = _correct_prob(lam, c, n, 24, 16)
    return float(min(max(1.0 - fine, 0.0), 1.0)), float(abs(fine - coarse) + 4 * _MIS_TAIL)


def _correct_prob3(S: np.ndarray, n: int, panels: int, order: int) -> float:
    """``P[W_11 < W_22, W_11 < W_33]`` for ``W ~ Wishart_3(n, S)`` (see :class:`MisassignmentLaw`): composite
    Gauss-Legendre in ``t = sqrt(W_11)``, ``eta_1`` and ``rho = sqrt(R)``, ``panels`` of ``order`` nodes each."""
    s11 = float(S[0, 0])
    k = S[1:, 0] / s11
    T = S[1:, 1:] - np.outer(S[1:, 0], S[0, 1:]) / s11
    if T[0, 1] < 0:  # flip the third column: W_33 unchanged, T_23 and S_31 change sign
        k = k * np.array([1.0, -1.0])
        T = T * np.array([[1.0, -1.0], [-1.0, 1.0]])
    r = float(T[0, 1])
    if r > 0:
        tau = np.array([np.sqrt(r * np.sqrt(T[0, 0] / T[1, 1])), 0.0])
        tau[1] = r / tau[0]
    else:
        tau = np.zeros(2)
    lam = np.diag(T) - tau**2
    t_lo, t_hi = np.sqrt(s11 * _st.chi2.ppf(_MIS_TAIL, n)), np.sqrt(s11 * _st.chi2.isf(_MIS_TAIL, n))
    t, wt = _gl_nodes(t_lo, t_hi, panels, order)
    wt = wt * 2.0 * t * _st.chi2.pdf(t * t / s11, n) / s11
    if r > 0:
        z = _st.norm.isf(_MIS_TAIL)
        e, we = _gl_nodes(-z, z, panels, order)
        we = we * _st.norm.pdf(e)
    else:
        e, we = np.zeros(1), np.ones(1)
    if r > 0 and n > 1:
        g_lo, g_hi = np.sqrt(_st.chi2.ppf(_MIS_TAIL, n - 1)), np.sqrt(_st.chi2.isf(_MIS_TAIL, n - 1))
        g, wg = _gl_nodes(g_lo, g_hi, panels, order)
        wg = wg * 2.0 * g * _st.chi2.pdf(g * g, n - 1)
    else:
        g, wg = np.zeros(1), np.ones(1)
    w = (t * t)[:, None, None]
    total = 0.0
    sf = np.ones((len(t), len(e), len(g)))
    for j in range(2):  # the two wrong models
        mean = k[j] * t[:, None, None] + tau[j] * e[None, :, None]
        nc = (mean**2 + (tau[j] * g[None, None, :]) ** 2) / lam[j]
        sf = sf * (1.0 - special.chndtr(w / lam[j], n, nc))
    total = float(np.einsum("a,b,c,abc->", wt, we, wg, sf))
    return total


def _misassignment3(S: np.ndarray, n: int) -> tuple[float, float, tuple]:
    """``(P[misassignment], error estimate, (S_11, lambda_2, lambda_3))`` of the general ``K = 3`` law.

    Panels per direction 4, 6, 8, 12 (16 nodes each) until two successive values differ by at most 1e-10; the
    estimate is the last such change (the coarser value's error: the finer one converges faster) plus the mass
    cut from the ranges."""
    coarse = _correct_prob3(S, n, 4, 16)
    for panels in (6, 8, 12):
        fine = _correct_prob3(S, n, panels, 16)
        change = abs(fine - coarse)
        if change <= 1e-10:
            break
        coarse = fine
    s11 = float(S[0, 0])
    T = S[1:, 1:] - np.outer(S[1:, 0], S[0, 1:]) / s11
    r = abs(float(T[0, 1]))
    tau2 = np.array([r * np.sqrt(T[0, 0] / T[1, 1]), r * np.sqrt(T[1, 1] / T[0, 0])]) if r > 0 else np.zeros(2)
    lam = (s11, float(T[0, 0] - tau2[0]), float(T[1, 1] - tau2[1]))
    return float(min(max(1.0 - fine, 0.0), 1.0)), float(change + 6 * _MIS_TAIL), lam


def symmetric_placement(own_norm: float, other_norm: float, sigma: float, k: int) -> tuple[np.ndarray, float]:
    """Directions ``u_1, ..., u_k`` (rows, in ``R^k``) with ``|u_1| = own_norm``, ``|u_j| = other_norm`` and
    one common inner product ``gamma`` between every pair, as negative as allowed (``gamma >= -sigma^2``:
    then ``S = Gram + sigma^2 1 1^T`` has equal off-diagonal entries ``gamma + sigma^2 >= 0``).

    ``gamma = -sigma^2`` makes ``S`` diagonal -- the condition that maximises the pairwise probability
    for ``k = 2`` (:func:`ifca_worst_case`), imposed on every pair -- whenever the Gram matrix
    ``diag(|u_j|^2 + sigma^2) - sigma^2 1 1^T`` is positive semi-definite; otherwise ``gamma`` is the most
    negative value keeping it so (a root of ``sum_j (-gamma)/(|u_j|^2 - gamma) = 1``).
    Returns the ``(k, k)`` rows and ``gamma``.
    """
    a = check_real("own_norm", own_norm, low=0.0)
    b = check_real("other_norm", other_norm, low=0.0)
    sigma = check_real("sigma", sigma, low=0.0)
    k = check_int("k", k, low=2)
    norms2 = np.array([a * a] + [b * b] * (k - 1))

    def excess(g: float) -> float:  # PSD of diag(norms2 - g) + g 1 1^T (g < 0) iff sum(-g/(norms2 - g)) <= 1
        return float(np.sum(-g / (norms2 - g))) - 1.0

    gamma = -sigma**2
    if gamma < 0 and (np.any(norms2 == 0) or excess(gamma) > 0):
        hi = -1e-300 if not np.any(norms2 == 0) else 0.0
        gamma = 0.0 if np.any(norms2 == 0) else float(optimize.brentq(excess, gamma, hi, xtol=1e-300, rtol=1e-15))
    G = np.diag(norms2 - gamma) + gamma
    w, V = np.linalg.eigh(G)
    U = V * np.sqrt(np.clip(w, 0.0, None))  # rows: U U^T = G
    return U, gamma


def symmetric_misassignment(alpha: float, delta: float, sigma: float, n: int, k: int) -> MisassignmentLaw:
    """Exact misassignment probability (K = ``k`` models) at IFCA Lemma 1's symmetric placement.

    Own model at the largest distance Assumption 1 allows, ``a = (1/2 - alpha) Delta``, every wrong model
    at the smallest, ``b = (1/2 + alpha) Delta``, pairwise inner products as in :func:`symmetric_placement`.
    For ``k = 2`` and ``ab >= sigma^2`` this is the worst case of :func:`ifca_worst_case`; for ``k >= 3`` it is
    an admissible placement (so a lower bound on the worst case), not proven to be the maximiser.
    """
    alpha = check_real("alpha", alpha, low=0.0, high=0.5, low_inclusive=False, high_inclusive=False)
    delta = check_real("delta", delta, low=0.0, low_inclusive=False)
    U, _ = symmetric_placement((0.5 - alpha) * delta, (0.5 + alpha) * delta, sigma, k)
    S = U @ U.T + sigma**2
    off = S[~np.eye(k, dtype=bool)].mean()
    S[~np.eye(k, dtype=bool)] = off  # remove eigen-decomposition rounding
    return MisassignmentLaw.from_cov(S, n)


# ------------------------------------------------------------ CLoVE Lemma A.1: the worst case
def _a1_separation(x: np.ndarray, y: np.ndarray, sigma: float) -> np.ndarray:
    """``||c(x) - c(y)||`` with the paper's means ``c(x)_j = sqrt(||theta* - q_j||^2 + sigma^2)``, which is
    ``sqrt(2 + sigma^2 - 2 x_j)``; ``x`` holds the coordinates of a unit-norm optimum in the ortho-normal
    model basis ``q_1, ..., q_d``."""
    A = 2.0 + sigma**2
    return np.sqrt(np.sum((np.sqrt(A - 2.0 * x) - np.sqrt(A - 2.0 * y)) ** 2, axis=-1))


@dataclass(frozen=True)
class A1WorstCase:
    """CLoVE Lemma A.1's smallest SLV-mean separation over unit-norm optima ``Delta`` apart (ortho-normal models).

    ``value`` uses the exact means ``kappa_n alpha`` (``kappa_n = E[chi_n]/sqrt(n)``), ``value_paper_means``
    the paper's ``alpha``; ``x``, ``y`` are the two optima's coordinates on ``q_1, q_2`` (zero elsewhere).
    """

    value: float
    value_paper_means: float
    kappa_n: float
    x: tuple
    y: tuple


def clove_a1_worst_case(delta: float, sigma: float, n: int) -> A1WorstCase:
    """Closed-form worst case of CLoVE Lemma A.1 (``N = d >= 2`` ortho-normal models).

    In the model basis an optimum is a unit vector ``x`` and its mean SLV is
    ``kappa_n (sqrt(A - 2 x_j))_j``, ``A = 2 + sigma^2``.  Each coordinate's difference is
    ``2 (y_j - x_j) / (sqrt(A - 2 x_j) + sqrt(A - 2 y_j))``: small when both coordinates are very negative.
    The proof bounds every denominator by ``2 sqrt(4 + sigma^2)`` (``x_j = y_j = -1``), which no pair of unit
    vectors attains.  The minimiser puts both optima in the plane of two models, symmetric about
    ``-(q_1 + q_2)/sqrt 2`` at chord ``Delta``: ``x = -(cos(pi/4 + b), sin(pi/4 + b))``, ``y`` its mirror image,
    ``sin b = Delta/2``, so the worst separation is
    ``kappa_n sqrt 2 |sqrt(A + 2 cos(pi/4 + b)) - sqrt(A + 2 sin(pi/4 + b))|``.  :func:`search_a1_worst_case`
    confirms it by multi-start search over every pair in ``d`` dimensions (tests: d up to 8).
    """
    delta = check_real("delta", delta, low=0.0, high=2.0, low_inclusive=False)
    sigma = check_real("sigma", sigma, low=0.0)
    n = check_int("n", n, low=1)
    b = np.arcsin(delta / 2.0)
    x = -np.array([np.cos(np.pi / 4 + b), np.sin(np.pi / 4 + b)])
    y = x[::-1].copy()
    sep = float(_a1_separation(x, y, sigma))
    kappa = float(chi_mean(n) / np.sqrt(n))
    return A1WorstCase(kappa * sep, sep, kappa, tuple(x), tuple(y))


def search_a1_worst_case(d: int, delta: float, sigma: float, starts: int = 40,
                         seed: int = 0) -> tuple[float, np.ndarray, np.ndarray]:
    """Multi-start numerical minimum of the paper-means separation over unit ``x, y`` in ``R^d``, ``||x - y|| = Delta``.

    Returns ``(separation, x, y)``.  The first start is :func:`clove_a1_worst_case`'s planar pair, so the result
    is never above the closed form; near ``Delta = 2`` in ``d >= 3`` the search finds lower pairs that spread
    over more coordinates (at ``Delta = 2``, ``sigma = 0.5``: 1.369 in ``d = 4`` against 1.414 in the plane).
    """
    d = check_int("d", d, low=2)
    delta = check_real("delta", delta, low=0.0, high=2.0, low_inclusive=False)
    rng = np.random.default_rng(seed)
    t = 2.0 * np.arcsin(delta / 2.0)

    def pair(z):
        x = z[:d] / np.linalg.norm(z[:d])
        w = z[d:] - (z[d:] @ x) * x
        nw = np.linalg.norm(w)
        w = w / nw if nw > 1e-12 else np.roll(x, 1) - (np.roll(x, 1) @ x) * x
        w = w / np.linalg.norm(w)
        return x, np.cos(t) * x + np.sin(t) * w

    planar = clove_a1_worst_case(delta, sigma, 1)
    z0 = np.zeros(2 * d)
    z0[:2] = planar.x
    yv = np.zeros(d)
    yv[:2] = planar.y
    z0[d:] = yv - (yv @ z0[:d]) * z0[:d]
    starts_z = [z0] + [rng.standard_normal(2 * d) for _ in range(starts)]
    best = (float(_a1_separation(*pair(z0), sigma)), *pair(z0))
    for z in starts_z:  # loop over starts
        res = optimize.minimize(lambda v: float(_a1_separation(*pair(v), sigma)), z, method="BFGS")
        if res.fun < best[0]:
            best = (float(res.fun), *pair(res.x))
    return best
