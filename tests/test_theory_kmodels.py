"""IFCA Lemma 1 with K >= 3 models: the exact misassignment law against direct Monte Carlo draws.

Statistical assertions use fixed seeds; each states its false-failure probability.
"""

from __future__ import annotations

import numpy as np
import pytest

from theory import get_result
from theory.laws import MisassignmentLaw, ifca_worst_case, symmetric_misassignment, symmetric_placement
from theory.results.common import symmetric_instance

DRAWS = 200_000


def _monte_carlo(S: np.ndarray, n: int, seed: int) -> float:
    """Share of ``DRAWS`` Wishart draws whose smallest diagonal entry is not the first (vectorised)."""
    rng = np.random.default_rng(seed)
    chol = np.linalg.cholesky(S + 1e-15 * np.eye(len(S)))
    wrong = 0
    for _ in range(DRAWS // 50_000):  # chunks keep the memory small
        Z = rng.standard_normal((50_000, n, len(S))) @ chol.T
        wrong += int(np.count_nonzero((Z * Z).sum(1).argmin(1) != 0))
    return wrong / DRAWS


@pytest.mark.parametrize("k, alpha, sigma, n", [(3, 0.25, 0.5, 10), (4, 0.25, 0.5, 10), (3, 0.1, 0.2, 5),
                                               (4, 0.3, 1.0, 20)])
def test_k_model_misassignment_matches_monte_carlo(k, alpha, sigma, n):
    law = symmetric_misassignment(alpha, 1.0, sigma, n, k)
    assert law.abs_error <= 1e-6
    U, _ = symmetric_placement((0.5 - alpha), (0.5 + alpha), sigma, k)
    p_hat = _monte_carlo(U @ U.T + sigma**2, n, seed=k * 100 + n)
    sd = np.sqrt(law.prob * (1 - law.prob) / DRAWS)
    # |p_hat - p| > 5.3 sd has probability 1.2e-7 (normal approximation, >= 2e5 draws, p > 0.01)
    assert abs(p_hat - law.prob) <= 5.3 * sd + 1e-6


def test_general_one_factor_covariance_matches_monte_carlo():
    S = np.array([[1.0, 0.3, 0.3], [0.3, 1.5, 0.3], [0.3, 0.3, 2.0]])
    law = MisassignmentLaw.from_cov(S, 10)
    p_hat = _monte_carlo(S, 10, seed=5)
    # false-failure probability 1.2e-7, as above
    assert abs(p_hat - law.prob) <= 5.3 * np.sqrt(law.prob * (1 - law.prob) / DRAWS)


@pytest.mark.parametrize("alpha, sigma, n", [(0.25, 0.5, 1), (0.25, 0.5, 50), (0.05, 2.0, 200), (0.4, 0.05, 1)])
def test_two_models_reduce_to_the_f_tail(alpha, sigma, n):
    law = symmetric_misassignment(alpha, 1.0, sigma, n, 2)
    assert law.prob == pytest.approx(ifca_worst_case(alpha, 1.0, sigma, n, 2).prob, abs=1e-12)


def test_symmetric_instance_is_admissible_and_has_the_stated_covariance():
    alpha, sigma, k, d = 0.25, 0.5, 4, 6
    theta, models = symmetric_instance(alpha, 1.0, sigma, k, d)
    r = 0.25
    assert np.allclose(np.linalg.norm(models - theta, axis=1), r)
    dist = np.linalg.norm(theta[:, None] - theta[None], axis=-1)
    assert dist[~np.eye(k, dtype=bool)].min() >= 1.0 - 1e-12
    u = theta[0] - models
    S = u @ u.T + sigma**2
    off = S[~np.eye(k, dtype=bool)]
    assert np.ptp(off) < 1e-12 and off.min() >= -1e-12


def test_lemma1_check_with_three_models_has_an_exact_value():
    chk = get_result("ifca-lemma1").check({"k": 3, "d": 3, "n": 10}, trials=0)
    assert chk.exact == pytest.approx(symmetric_misassignment(0.25, 1.0, 0.5, 10, 3).prob, abs=1e-12)
    assert chk.details["exact_k_models"]["abs_error_estimate"] <= 1e-6


# ------------------------------------------------------------------ any placement of K = 3 models
def _pd(rng, scale=1.0):
    A = rng.normal(size=(3, 3))
    return scale * (A @ A.T + 0.3 * np.eye(3))


def test_three_model_law_equals_the_symmetric_conditioning_on_a_symmetric_placement():
    # two different conditionings (own column + shared part of the rest; one shared factor) of the same law
    from theory.laws.misassignment import _misassignment3

    U, _ = symmetric_placement(0.25, 0.75, 0.5, 3)
    S = U @ U.T + 0.25
    S[~np.eye(3, dtype=bool)] = S[~np.eye(3, dtype=bool)].mean()
    for n in (1, 2, 10, 50):
        p, err, _ = _misassignment3(S, n)
        assert err <= 1e-9
        assert p == pytest.approx(MisassignmentLaw.from_cov(S, n).prob, abs=1e-9)


def _rectangle_reference(S: np.ndarray) -> float:
    """n = 1, independently: P[z1^2 < z2^2, z1^2 < z3^2] = int phi(x) P[|z2| > |x|, |z3| > |x| | z1 = x] dx, the
    inner term a bivariate normal rectangle probability (scipy's multivariate normal CDF), the outer by quad."""
    from scipy import integrate, stats

    s11 = S[0, 0]
    T = S[1:, 1:] - np.outer(S[1:, 0], S[0, 1:]) / s11
    k = S[1:, 0] / s11

    def inner(x):
        a, m = abs(x), k * x
        box = stats.multivariate_normal(mean=m, cov=T, abseps=1e-13, releps=1e-13).cdf([a, a], lower_limit=[-a, -a])
        in2 = stats.norm.cdf(a, m[0], np.sqrt(T[0, 0])) - stats.norm.cdf(-a, m[0], np.sqrt(T[0, 0]))
        in3 = stats.norm.cdf(a, m[1], np.sqrt(T[1, 1])) - stats.norm.cdf(-a, m[1], np.sqrt(T[1, 1]))
        return 1.0 - in2 - in3 + box

    sd = np.sqrt(s11)
    val, _ = integrate.quad(lambda x: stats.norm.pdf(x, 0, sd) * inner(x), -12 * sd, 12 * sd, epsabs=1e-12,
                            epsrel=1e-12, limit=400)
    return 1.0 - val


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_three_model_law_at_one_sample_equals_a_bivariate_rectangle_integral(seed):
    S = _pd(np.random.default_rng(seed))
    law = MisassignmentLaw.from_cov(S, 1)
    assert law.abs_error <= 1e-8
    assert law.prob == pytest.approx(_rectangle_reference(S), abs=1e-8)


def _one_factor_reference(b: np.ndarray, lam: np.ndarray, n: int) -> float:
    """S = diag(lam) + b b^T, independently: given the shared Q ~ chi2_n the three losses are independent
    lam_j chi'^2_n(b_j^2 Q / lam_j); P[correct] = E_Q int pdf_1 sf_2 sf_3, the outer integral by scipy's quad,
    the inner by 800-node Gauss-Legendre in sqrt(w)."""
    from scipy import integrate, stats

    x, wx = np.polynomial.legendre.leggauss(800)

    def given_q(q):
        nc = b**2 * q / lam
        lo, hi = np.sqrt(lam[0] * stats.ncx2.ppf(1e-15, n, nc[0])), np.sqrt(lam[0] * stats.ncx2.isf(1e-15, n, nc[0]))
        t = 0.5 * (lo + hi) + 0.5 * (hi - lo) * x
        w = t * t
        f = (2 * t * stats.ncx2.pdf(w / lam[0], n, nc[0]) / lam[0] * stats.ncx2.sf(w / lam[1], n, nc[1])
             * stats.ncx2.sf(w / lam[2], n, nc[2]))
        return 0.5 * (hi - lo) * float(wx @ f)

    qlo, qhi = stats.chi2.ppf(1e-15, n), stats.chi2.isf(1e-15, n)
    val = integrate.quad(lambda q: stats.chi2.pdf(q, n) * given_q(q), qlo, qhi, epsabs=1e-12, epsrel=1e-12,
                         limit=200)[0]
    return 1.0 - val


@pytest.mark.parametrize("n", [3, 25])
def test_three_model_law_at_an_asymmetric_one_factor_placement(n):
    b, lam = np.array([0.5, 0.9, -0.4]), np.array([0.3, 0.8, 0.5])
    S = np.diag(lam) + np.outer(b, b)  # unequal off-diagonal entries of mixed signs: not the symmetric form
    law = MisassignmentLaw.from_cov(S, n)
    assert law.abs_error <= 1e-8
    assert law.prob == pytest.approx(_one_factor_reference(np.abs(b), lam, n), abs=1e-8)


def test_three_model_law_without_a_one_factor_form_matches_monte_carlo():
    S = np.array([[1.0, 0.4, -0.3], [0.4, 1.2, 0.5], [-0.3, 0.5, 1.5]])  # S12 S13 S23 < 0: no one-factor form
    law = MisassignmentLaw.from_cov(S, 10)
    p_hat = _monte_carlo(S, 10, seed=11)
    # false-failure probability 1.2e-7, as above
    assert abs(p_hat - law.prob) <= 5.3 * np.sqrt(law.prob * (1 - law.prob) / DRAWS)


def test_general_placements_beyond_three_models_are_refused_and_two_models_ignore_signs():
    S4 = np.eye(4) + 0.1 * np.diag(np.ones(3), 1) + 0.1 * np.diag(np.ones(3), -1)
    with pytest.raises(ValueError, match="K = 4 >= 4"):
        MisassignmentLaw.from_cov(S4, 5)
    with pytest.raises(ValueError, match="positive definite"):
        MisassignmentLaw.from_cov(np.array([[1.0, 1.0, 0.2], [1.0, 1.0, 0.3], [0.2, 0.3, 1.0]]), 5)
    S2 = np.array([[1.0, -0.4], [-0.4, 2.0]])
    assert MisassignmentLaw.from_cov(S2, 7).prob == pytest.approx(
        MisassignmentLaw.from_cov(np.abs(S2), 7).prob, abs=1e-14)


def test_lemma1_verdict_with_three_models_says_it_covers_the_symmetric_placement_only():
    res = get_result("ifca-lemma1")
    assert "symmetric placement only" in res.check({"k": 3, "d": 3, "n": 10}, trials=0).scope
    assert res.check({"k": 2, "n": 10}, trials=0).scope is None  # k = 2: the exact worst case over every placement
