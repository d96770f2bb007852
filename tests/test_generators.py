"""Generators: theta* modes, data, and exact population quantities against large samples."""

import numpy as np
import pytest

from synth import theta as tm
from synth.federation import LogisticMixture, MixedLinearRegression, anisotropic_cov
from synth.population import LinearPopulation, LogisticPopulation

# Monte Carlo checks below use |estimate - exact| <= 5.3 standard errors: for an
# (asymptotically) normal estimate the two-sided false-failure probability is < 1.2e-7 per check.
Z = 5.3


def test_bernoulli_rescaled_has_norm_R():
    th = tm.bernoulli_rescaled(4, 1000, 0.5, 0)
    np.testing.assert_allclose(np.linalg.norm(th, axis=1), 0.5)
    # support is the Bernoulli pattern: every nonzero coordinate is equal within a row
    for row in th:
        nz = row[row != 0]
        np.testing.assert_allclose(nz, nz[0])


def test_bernoulli_code_is_unscaled_R_times_bernoulli():
    R, d = 0.1, 1000
    th = tm.bernoulli_scaled(2, d, R, 0)
    assert set(np.unique(th / R)) <= {0.0, 1.0}
    # norm ~ R sqrt(d/2): Binomial(d, 1/2) ones, 5.3 sd band on the count
    ones = (th / R).sum(1)
    assert np.all(np.abs(ones - d / 2) <= Z * np.sqrt(d / 4))
    assert np.all(np.linalg.norm(th, axis=1) > 10 * R)


@pytest.mark.parametrize("delta", [0.001, 0.05, 0.3, 1.0])
def test_sphere_separated_distances(delta):
    th = tm.sphere_separated(5, 20, delta, 1)
    np.testing.assert_allclose(np.linalg.norm(th, axis=1), 1.0, atol=1e-12)
    dist = tm.pairwise_distances(th)[~np.eye(5, dtype=bool)]
    assert dist.min() >= delta and dist.max() <= 5 * delta


def test_client_optima_satisfy_definition_2_1():
    w, centres = tm.client_optima(np.array([5, 7, 3]), 10, 0.2, 1.0, 3)
    labels = np.repeat([0, 1, 2], [5, 7, 3])
    dist = tm.pairwise_distances(w)
    same = labels[:, None] == labels[None, :]
    assert dist[same].max() <= 0.2 + 1e-12
    assert dist[~same].min() >= 1.0
    assert centres.shape == (3, 10)


def test_client_optima_rejects_eps2_not_above_eps1():
    with pytest.raises(ValueError, match="eps2 must be > eps1"):
        tm.client_optima(np.array([2, 2]), 5, 1.0, 1.0)


def test_mlr_sample_shapes_labels_and_padding():
    gen = MixedLinearRegression(K=2, clients_per_cluster=[3, 2], n=[4, 5, 6, 7, 8], d=3, sigma=0.5)
    fed = gen.sample(0)
    assert fed.X.shape == (5, 8, 3) and fed.y.shape == (5, 8)
    np.testing.assert_array_equal(fed.labels, [0, 0, 0, 1, 1])
    np.testing.assert_array_equal(fed.n_samples, [4, 5, 6, 7, 8])
    assert np.all(fed.X[0, 4:] == 0) and np.all(fed.y[0, 4:] == 0)
    np.testing.assert_array_equal(fed.client_optima, fed.theta[fed.labels])


def test_same_seed_same_federation():
    gen = MixedLinearRegression(K=3, clients_per_cluster=4, n=20, d=5)
    a, b = gen.sample(7), gen.sample(7)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    assert not np.array_equal(a.X, gen.sample(8).X)



def _whole_array_draw(gen, seed):
    """The federation's data drawn as one float64 array, transformed, scored and cast at once."""
    rng = np.random.default_rng(seed)
    theta, w = gen._optima(rng)
    m, d = w.shape
    n = gen.n
    X = rng.standard_normal((m, int(n.max()), d))
    if gen.cov is not None:
        X = X @ np.linalg.cholesky(gen.cov).T
    score = np.einsum("mnd,md->mn", X, w)
    if gen.family == "linear":
        y = score + gen.sigma * rng.standard_normal(score.shape)
    else:
        y = (rng.uniform(size=score.shape) < 1.0 / (1.0 + np.exp(-score))).astype(np.float64)
    pad = np.arange(X.shape[1])[None, :] >= n[:, None]
    X[pad], y[pad] = 0.0, 0.0
    return X.astype(gen.dtype), y.astype(gen.dtype)


@pytest.mark.parametrize("family", ["linear", "logistic"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cov", [False, True])
def test_data_drawn_per_block_equal_one_whole_draw(monkeypatch, family, dtype, cov):
    import synth.federation as federation

    kw = dict(K=3, clients_per_cluster=[4, 3, 5], n=[30, 17, 30, 25] * 3, d=40, cov=anisotropic_cov(40, 10.0)
              if cov else None, dtype=dtype)
    gen = MixedLinearRegression(sigma=0.3, **kw) if family == "linear" else LogisticMixture(reg=0.1, **kw)
    want_X, want_y = _whole_array_draw(gen, 11)
    for block_bytes in (1, 8 * 30 * 40 * 5, 2**30):  # one client a block, five, all
        monkeypatch.setattr(federation, "_DRAW_BLOCK_BYTES", block_bytes)
        fed = gen.sample(11)
        assert fed.X.dtype == dtype and fed.y.dtype == dtype
        np.testing.assert_array_equal(fed.X, want_X)
        np.testing.assert_array_equal(fed.y, want_y)

def test_mlr_noise_and_response_law():
    """y - <w*, x> ~ N(0, sigma^2): sample variance within a chi-square band."""
    sigma = 0.3
    fed = MixedLinearRegression(K=2, clients_per_cluster=20, n=500, d=4, sigma=sigma).sample(1)
    resid = fed.y - np.einsum("mnd,md->mn", fed.X, fed.client_optima)
    N = resid.size
    # var of the sample variance of N normals = 2 sigma^4 / N
    assert abs(resid.var() - sigma**2) <= Z * sigma**2 * np.sqrt(2 / N)


@pytest.mark.parametrize("cov_kind", ["identity", "anisotropic"])
def test_linear_population_loss_and_gradient_match_large_samples(cov_kind):
    d = 4
    cov = None if cov_kind == "identity" else anisotropic_cov(d, 10.0)
    gen = MixedLinearRegression(K=1, clients_per_cluster=1, n=200_000, d=d, sigma=0.4, R=1.0, cov=cov)
    fed = gen.sample(2)
    pop = fed.population
    rng = np.random.default_rng(3)
    theta = rng.standard_normal(d)
    X, y = fed.X[0], fed.y[0]
    r = X @ theta - y
    N = len(y)
    s2 = pop.loss(theta)[0, 0]  # residual ~ N(0, s2): r^2 has mean s2, variance 2 s2^2
    assert abs((r**2).mean() - s2) <= Z * s2 * np.sqrt(2 / N)
    grad_hat = 2 * X.T @ r / N
    grad = pop.gradient(theta)[0, 0]
    # per-coordinate: 2 x_k r has variance 4 E[x_k^2 r^2] <= 4 * 3 * Sigma_kk s2 (Gaussian 4th moments)
    se = np.sqrt(12 * np.diag(pop.cov) * s2 / N)
    assert np.all(np.abs(grad_hat - grad) <= Z * se)
    np.testing.assert_array_equal(pop.minimiser(), fed.client_optima)
    # mu and L against the empirical Hessian 2 X^T X / N
    eig = np.linalg.eigvalsh(2 * X.T @ X / N)
    assert abs(eig[0] - pop.mu) / pop.mu < 0.05 and abs(eig[-1] - pop.L) / pop.L < 0.05


def test_coordinate_lipschitz_is_the_sup_over_the_ball():
    d, D = 3, 2.0
    cov = anisotropic_cov(d, 4.0)
    pop = LinearPopulation(np.array([[0.3, -0.2, 0.5]]), 0.1, cov)
    center = np.array([0.1, 0.0, -0.1])
    Lk = pop.coordinate_lipschitz(center, D)[0]
    rng = np.random.default_rng(0)
    u = rng.standard_normal((20000, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    pts = center + (D / 2) * u
    grads = np.abs(pop.gradient(pts)[0])
    assert np.all(grads.max(0) <= Lk + 1e-12)
    # attained (up to sampling of the sphere) on the boundary
    assert np.all(grads.max(0) >= 0.97 * Lk)
    np.testing.assert_allclose(pop.l_hat(center, D), np.linalg.norm(Lk))


def test_logistic_population_matches_large_samples():
    d = 3
    fed = LogisticMixture(K=1, clients_per_cluster=1, n=400_000, d=d, reg=0.2, R=1.5, theta="bernoulli").sample(4)
    pop = fed.population
    X, y = fed.X[0], fed.y[0]
    N = len(y)
    theta = np.array([0.4, -0.3, 0.8])
    s = X @ theta
    per = np.logaddexp(0, s) - y * s
    F = pop.loss(theta)[0, 0] - 0.5 * pop.reg * theta @ theta
    assert abs(per.mean() - F) <= Z * per.std() / np.sqrt(N)
    g_samples = (1 / (1 + np.exp(-s)) - y)[:, None] * X
    g_hat = g_samples.mean(0) + pop.reg * theta
    assert np.all(np.abs(g_hat - pop.gradient(theta)[0, 0]) <= Z * g_samples.std(0) / np.sqrt(N))
    # population minimiser: gradient (quadrature) below the stated tolerance, and the bound it implies
    th_min = pop.minimiser()[0]
    assert np.linalg.norm(pop.gradient(th_min)[0, 0]) <= pop.tol
    assert pop.minimiser_error_bound <= pop.tol / pop.mu
    assert pop.mu == 0.2 and abs(pop.L - (0.2 + 0.25)) < 1e-12


def test_logistic_quadrature_is_converged():
    pop_lo = LogisticPopulation(np.array([[1.0, -0.5]]), 0.1, quad_nodes=48)
    pop_hi = LogisticPopulation(np.array([[1.0, -0.5]]), 0.1, quad_nodes=160)
    th = np.array([[0.3, 0.9], [-1.0, 0.2]])
    np.testing.assert_allclose(pop_lo.loss(th), pop_hi.loss(th), rtol=1e-10)
    np.testing.assert_allclose(pop_lo.gradient(th), pop_hi.gradient(th), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("bad", [dict(K=0), dict(d=0), dict(sigma=-1.0), dict(n=0), dict(clients_per_cluster=[1]),
                                 dict(R=0.0), dict(theta="nope")])
def test_generator_validation(bad):
    with pytest.raises((ValueError, TypeError)):
        MixedLinearRegression(**{"K": 2, **bad}).sample(0)


def test_regimes_fresh_and_split():
    fed = MixedLinearRegression(K=2, clients_per_cluster=3, n=40, d=3).sample(0)
    be = fed.backend(regime="fresh", random_state=5)
    a1, g1 = be.at_round(0)
    a2, _ = be.at_round(1)
    assert a1 is not g1 and not np.array_equal(a1.X, g1.X) and not np.array_equal(a1.X, a2.X)
    # deterministic for the same seed
    np.testing.assert_array_equal(fed.backend(regime="fresh", random_state=5).at_round(1)[0].X, a2.X)
    sp = fed.backend(regime="split", rounds=4)
    parts = [v.X for t in range(4) for v in sp.at_round(t)]
    assert all(p.shape[1] == 40 // 8 for p in parts)
    stacked = np.concatenate(parts, axis=1)
    np.testing.assert_array_equal(stacked, fed.X[:, : stacked.shape[1]])  # disjoint, in order
    with pytest.raises(ValueError, match="split"):
        fed.backend(regime="split", rounds=30)


def test_client_optima_with_identical_clients_eps1_zero():
    w, centres = tm.client_optima(np.array([4, 3]), 6, 0.0, 1.0, 0)
    np.testing.assert_allclose(w, centres[np.repeat([0, 1], [4, 3])])


def test_memory_check_counts_the_features_in_their_precision(monkeypatch):
    # 100 clients x 100 samples x d = 1000: features 80 MB in float64, 40 MB in float32, plus an 8 MiB draw block
    # (and its transformed copy) and about 17 MB of the rest; a 90 MiB budget holds only the float32 federation
    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "90")
    MixedLinearRegression(K=2, clients_per_cluster=50, n=100, d=1000, dtype=np.float32)
    with pytest.raises(ValueError, match=r"the federation needs about 0\.1 GiB"):
        MixedLinearRegression(K=2, clients_per_cluster=50, n=100, d=1000, dtype=np.float64)
