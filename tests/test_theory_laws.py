"""Brute-force tests of the exact laws in :mod:`theory.laws`.

Every Monte Carlo comparison uses a fixed seed and a tolerance of ``Z``
standard errors (or a Clopper-Pearson interval at confidence ``1 - 2e-8``), so that,
had the seed been drawn at random, a false failure would have probability
below 1e-6 per test even after a Bonferroni union over the comparisons in it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from theory import laws
from theory.results.ifca import lemma1_c2_star
from theory.stats import clopper_pearson, quantile_ci, wilson

Z = 5.6  # P[|N(0,1)| > 5.6] = 2.1e-8: up to 40 comparisons per test keep the false-failure rate below 1e-6
CONF = 1 - 2e-8


def _residuals(rng, u_own, u_other, sigma, n, size):
    d = len(u_own)
    X = rng.standard_normal((size, n, d))
    e = sigma * rng.standard_normal((size, n))
    return ((X @ u_own + e) ** 2).sum(1), ((X @ u_other + e) ** 2).sum(1)


def test_client_loss_and_root_loss_laws_against_brute_force():
    rng = np.random.default_rng(0)
    d, n, sigma = 4, 7, 0.6
    u = rng.standard_normal(d) * 0.5
    own, _ = _residuals(rng, u, u, sigma, n, 200_000)
    f = own / n
    law = laws.client_loss_law(float(u @ u), sigma, n)
    root = laws.root_loss_law(float(u @ u), sigma, n)
    for x, law_x in ((f, law), (np.sqrt(f), root)):
        assert abs(x.mean() - law_x.mean()) <= Z * x.std() / math.sqrt(len(x))
        for q in (0.1, 0.5, 0.9):  # the cdf at three quantiles: binomial counts with Wilson intervals
            t = law_x.ppf(q)
            lo, hi = clopper_pearson(int((x <= t).sum()), len(x), CONF)
            assert lo <= q <= hi
    # exact Gamma-function moments of chi_n
    for n in (1, 2, 5, 50, 1000):
        draws = stats.chi(n).rvs(size=200_000, random_state=rng)
        assert abs(draws.mean() - laws.chi_mean(n)) <= Z * draws.std() / math.sqrt(len(draws))
        assert laws.chi_var(n) == pytest.approx(stats.chi(n).var(), rel=1e-9)


def test_stirling_report_states_the_paper_errors():
    rep = laws.clove_moment_report(1)
    assert rep["mean_exact"] == pytest.approx(math.sqrt(2 / math.pi), rel=1e-12)
    assert rep["var_exact"] == pytest.approx(1 - 2 / math.pi, rel=1e-12)
    big = laws.clove_moment_report(200)
    # the 1 - 1/(4n) approximation is good to O(1/n^2); the sqrt(n-1) version is off by about 1/(2n)
    assert abs(big["mean_clove_rel_error"]) < 1e-5
    assert big["mean_clove_sqrt_n_minus_1_rel_error"] == pytest.approx(-1 / 400, rel=0.05)


@pytest.mark.parametrize("d,n,sigma", [(1, 3, 0.5), (3, 7, 0.7), (5, 40, 0.2), (2, 1, 1.0)])
def test_pairwise_preference_against_brute_force(d, n, sigma):
    rng = np.random.default_rng(d * 100 + n)
    u_own = rng.standard_normal(d) * 0.4
    u_other = rng.standard_normal(d) * 0.8
    pref = laws.PairwisePreference(u_own, u_other, sigma, n)
    own, other = _residuals(rng, u_own, u_other, sigma, n, 200_000)
    lo, hi = clopper_pearson(int((other < own).sum()), len(own), CONF)
    assert lo <= pref.prob() <= hi
    # Imhof's inversion of the difference law agrees with the closed-form F tail
    assert pref.difference.cdf(0.0) == pytest.approx(pref.prob(), abs=1e-9)
    assert pref.lambda_plus - pref.lambda_minus == pytest.approx(pref.S[0, 0] - pref.S[1, 1])
    assert pref.lambda_plus * pref.lambda_minus == pytest.approx(np.linalg.det(pref.S))
    assert pref.chernoff() >= pref.prob()


def test_generalized_chi2_against_brute_force_and_closed_forms():
    rng = np.random.default_rng(1)
    g = laws.GeneralizedChi2([1.0, -0.5, 2.0], [1, 1, 2], [0.5, 0.0, 1.0])
    x = g.rvs(400_000, random_state=rng)
    assert abs(x.mean() - g.mean()) <= Z * math.sqrt(g.var() / len(x))
    for t in (-2.0, 0.0, 1.0, 3.0, 10.0):
        lo, hi = clopper_pearson(int((x <= t).sum()), len(x), CONF)
        assert lo <= g.cdf(t) <= hi
    one = laws.GeneralizedChi2([2.0], [3], [1.5])
    assert one.cdf(4.0) == pytest.approx(stats.ncx2(3, 1.5).cdf(2.0), rel=1e-12)
    two = laws.GeneralizedChi2([1.0, 1.0], [2, 3])  # chi2_2 + chi2_3 = chi2_5
    assert two.cdf(4.0) == pytest.approx(stats.chi2(5).cdf(4.0), abs=1e-9)
    assert laws.GeneralizedChi2([1.0, 1.0], [2, 3], [0.0, 0.0]).sf(7.0) == pytest.approx(stats.chi2(5).sf(7.0),
                                                                                         abs=1e-9)


def test_ols_edge_law_against_brute_force_given_designs():
    rng = np.random.default_rng(2)
    d, ni, nj, sigma = 3, 8, 12, 0.5
    Xi, Xj = rng.standard_normal((ni, d)), rng.standard_normal((nj, d))
    wi, wj = np.zeros(d), np.array([0.3, -0.1, 0.0])
    law = laws.ols_edge_law(Xi.T @ Xi, Xj.T @ Xj, wi, wj, sigma)
    N = 200_000
    ei, ej = sigma * rng.standard_normal((N, ni)), sigma * rng.standard_normal((N, nj))
    hat_i = wi + np.linalg.solve(Xi.T @ Xi, Xi.T @ ei.T).T
    hat_j = wj + np.linalg.solve(Xj.T @ Xj, Xj.T @ ej.T).T
    dist2 = ((hat_i - hat_j) ** 2).sum(1)
    for lam in (0.2, 0.4, 0.7):
        lo, hi = clopper_pearson(int((dist2 <= lam**2).sum()), N, CONF)
        assert lo <= law.cdf(lam**2) <= hi


def test_slv_mean_and_covariance_against_brute_force():
    rng = np.random.default_rng(3)
    d, n, sigma = 4, 6, 0.3
    models = rng.standard_normal((3, d))
    star = rng.standard_normal(d)
    N = 200_000
    X = rng.standard_normal((N, n, d))
    e = sigma * rng.standard_normal((N, n))
    F = np.sqrt((((X @ (star[None] - models).T) + e[..., None]) ** 2).mean(1))
    mean = laws.slv_mean(models, star, sigma, n)
    cov = laws.slv_covariance(models, star, sigma, n)
    se_mean = F.std(0) / math.sqrt(N)
    assert np.all(np.abs(F.mean(0) - mean) <= Z * se_mean)
    # entry-wise covariance: the sample covariance of (F_j - mu_j)(F_l - mu_l) with exact means
    C = F - mean
    prod = C[:, :, None] * C[:, None, :]
    se = prod.std(0) / math.sqrt(N)
    assert np.all(np.abs(prod.mean(0) - cov) <= Z * se)


def test_kl_of_linear_gaussian_clients():
    rng = np.random.default_rng(4)
    d, sigma = 5, 0.5
    wi, wj = rng.standard_normal(d), rng.standard_normal(d)
    x = rng.standard_normal((400_000, d))
    y = x @ wi + sigma * rng.standard_normal(len(x))
    llr = ((y - x @ wj) ** 2 - (y - x @ wi) ** 2) / (2 * sigma**2)
    assert abs(llr.mean() - laws.kl_mlr(wi, wj, sigma)) <= Z * llr.std() / math.sqrt(len(llr))
    assert laws.kl_mlr(wi, wj, sigma) == pytest.approx(((wi - wj) ** 2).sum() / (2 * sigma**2))


@pytest.mark.parametrize("alpha,sigma,n,d", [(0.25, 0.5, 50, 2), (0.25, 0.1, 20, 2), (0.1, 0.3, 10, 1),
                                             (0.4, 1.0, 5, 3), (0.02, 0.2, 100, 2), (-0.1, 0.5, 30, 2)])
def test_worst_case_placement_confirmed_by_numerical_search(alpha, sigma, n, d):
    exact = laws.ifca_worst_case(alpha, 1.0, sigma, n, d)
    found = laws.search_worst_case(alpha, 1.0, sigma, n, d, grid=21)
    # the search can only find allowed placements: it never beats the closed form ...
    assert found.prob <= exact.prob * (1 + 1e-9) + 1e-15
    # ... and it gets there (for alpha < 0 the supremum is a limit the grid approaches from below)
    assert found.prob >= exact.prob * (1 - (0.02 if alpha < 0 else 1e-6))


def test_worst_case_is_not_the_collinear_placement_when_ab_exceeds_sigma2():
    w = laws.ifca_worst_case(0.25, 1.0, 0.1, 20, 2)
    assert w.cos == pytest.approx(-0.01 / (0.25 * 0.75))
    collinear = laws.preference_probability(w.own_norm, w.other_norm, -1.0, 0.1, 20)
    assert w.prob > 10 * collinear


def test_worst_case_at_and_below_alpha_zero():
    assert laws.ifca_worst_case(0.0, 1.0, 0.5, 30).prob == 0.5
    assert laws.ifca_worst_case(1e-9, 1.0, 0.5, 30).prob == pytest.approx(0.5, abs=1e-6)
    below = laws.ifca_worst_case(-1e-9, 1.0, 0.5, 30)
    assert not below.attained and below.prob > 0.9  # the jump at alpha = 0


def test_lemma1_c2_star_is_the_infimum_over_a_grid():
    c2 = lemma1_c2_star()
    worst = np.inf
    for alpha in np.linspace(0.01, 0.499, 40):
        for rho in np.geomspace(1e-3, 1e4, 60):
            sigma = 1.0 / math.sqrt(rho)
            for d in (1, 2):
                w = laws.ifca_worst_case(alpha, 1.0, sigma, 10, d)
                pref = laws.PairwisePreference(np.array([w.own_norm, 0.0]),
                                               w.other_norm * np.array([w.cos, math.sqrt(1 - w.cos**2)]), sigma, 10)
                r = pref.ratio
                rate = math.log((1 + r) / (2 * math.sqrt(r)))
                worst = min(worst, rate / (alpha * rho / (rho + 1)) ** 2)
    assert worst >= c2 * (1 - 1e-9)
    assert worst <= c2 * 1.02  # and the grid gets close to it (approached as alpha -> 1/2)


def test_confidence_intervals():
    assert wilson(0, 100)[0] == 0.0 and wilson(100, 100)[1] == 1.0
    lo, hi = wilson(30, 100)
    assert lo < 0.3 < hi
    # coverage of the order-statistic interval (nominal >= 95%): P[Bin(500, 0.95) < 450] is about 1e-7
    rng = np.random.default_rng(5)
    q90 = stats.norm.ppf(0.9)
    covered = 0
    for _ in range(500):
        est, lo, hi = quantile_ci(rng.standard_normal(200), 0.9)
        covered += lo <= q90 <= hi
        assert lo <= est <= hi
    assert covered >= 450


def test_log_f_tail_exact_where_representable_and_warns_on_underflow():
    import warnings

    from scipy import special

    from theory.laws import UnderflowWarning, log_f_tail
    from theory.laws.preference import _f_tail

    for n in (2, 10, 60, 200):
        for lp, lm in ((9.0, 0.02), (3.0, 1.0), (1.0, 0.5)):
            direct = special.betainc(n / 2, n / 2, (lm / lp) / (1 + lm / lp))
            if direct > 1e-300:
                assert np.isclose(log_f_tail(lp, lm, n), np.log(direct), rtol=1e-10, atol=1e-12)
    # deep in the tail the float underflows; the log stays exact and the caller is told
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _f_tail(9.01, 0.02, 500) == 0.0
    assert any(issubclass(w.category, UnderflowWarning) for w in caught)
    lg = log_f_tail(9.01, 0.02, 500)
    assert np.isfinite(lg) and lg < np.log(1e-300)
    # the log tail is monotone in n (more samples, rarer mistakes)
    assert log_f_tail(9.01, 0.02, 1000) < lg


def test_worst_case_deep_in_the_tail_is_zero_without_a_warning_and_keeps_its_log():
    """ifca_worst_case far in the tail (property tests draw n up to 400, rho up to 1e3): the probability underflows to
    0, the correctly rounded double, and its exact log travels in log_prob; no UnderflowWarning reaches the caller (it
    did, from every such call, in the suite's output).  A probability that gets the float alone still warns."""
    import warnings

    from theory.laws import UnderflowWarning, log_f_tail, preference_eigen

    sigma = 1 / np.sqrt(1000.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        deep = laws.ifca_worst_case(0.45, 1.0, sigma, 365)
        normal = laws.ifca_worst_case(0.45, 1.0, sigma, 335)  # about 4e-306: a normal double, under 1e-300
        searched = laws.search_worst_case(0.45, 1.0, sigma, 365, grid=5)
    assert deep.prob == 0.0 and searched.prob == 0.0
    a, b, cos = deep.own_norm, deep.other_norm, deep.cos
    lam_p, lam_m = preference_eigen(b * b + sigma**2, a * a + sigma**2, a * b * cos + sigma**2)
    assert deep.log_prob == pytest.approx(log_f_tail(lam_p, lam_m, 365), rel=1e-12)
    assert deep.log_prob / np.log(10) == pytest.approx(-332.6, abs=0.1)
    assert 1e-307 < normal.prob < 1e-300 and normal.prob == pytest.approx(np.exp(normal.log_prob), rel=1e-12)
    assert laws.ifca_worst_case(0.25, 1.0, 0.5, 50).log_prob == pytest.approx(
        np.log(laws.ifca_worst_case(0.25, 1.0, 0.5, 50).prob), rel=1e-12)
    with pytest.warns(UnderflowWarning, match=r"10\^-332\.6"):
        assert laws.preference_probability(a, b, cos, sigma, 365) == 0.0
