"""IFCA and its baselines (Local, Global, one-shot k-means) on exact synthetic federations."""

import numpy as np
import pytest

from synth import metrics
from synth.algorithms import IFCA, DivergenceError, GlobalModel, LocalModels, OneShotKMeans
from synth.backend import GLMBackend
from synth.federation import MixedLinearRegression
from synth.init import ball_init


@pytest.fixture(scope="module")
def easy():
    # well separated (Delta ~ 1.8), low noise, plenty of data: the IFCA regime
    return MixedLinearRegression(K=2, clients_per_cluster=10, n=50, d=10, sigma=0.1, R=2.0).sample(0)


def test_ifca_recovers_from_good_initialisation(easy):
    init = ball_init(easy.theta, alpha=0.25, random_state=1)
    est = IFCA(n_clusters=2, n_rounds=60, step_size=0.1, init=init, random_state=0).fit(easy.backend())
    assert metrics.adjusted_rand(est.labels_, easy.labels) == 1.0
    assert metrics.misclustering(est.labels_, easy.labels) == 0.0
    assert est.n_clusters_ == 2
    assert metrics.param_error(est.models_, easy.theta) <= 0.6 * 0.1  # IFCA Sec. VI-A success


def test_ifca_collapses_from_identical_models_clove_fig1(easy):
    """CLoVE Fig. 1: all clients pick the same model, the other never gets an update, IFCA never recovers.

    Identical models far from every truth: in round 1 every client ties and takes model 0, which moves
    towards the truths; model 1 stays far away, so no client ever prefers it.
    """
    far = easy.theta.mean(0) + 5.0 * np.ones(easy.dim)
    init = np.stack([far, far])
    est = IFCA(n_clusters=2, n_rounds=60, step_size=0.1, init=init, random_state=0).fit(easy.backend())
    assert est.n_clusters_ == 1
    assert metrics.adjusted_rand(est.labels_, easy.labels) == 0.0
    assert metrics.matched_misclustering(est.labels_, easy.labels) == 0.5
    np.testing.assert_array_equal(est.models_[1], far)  # the second model was never updated
    assert all(len(np.unique(lab)) == 1 for lab in est.history_.labels)


def test_one_round_gradient_averaging_is_the_paper_update(easy):
    """IFCA Sec. V: theta_j <- theta_j - (gamma/m) sum_{i in S_j} grad F_i(theta_j)."""
    be = easy.backend()
    init = np.random.default_rng(3).standard_normal((2, easy.dim))
    est = IFCA(n_clusters=2, n_rounds=1, step_size=0.3, init=init, random_state=0).fit(be)
    L = be.losses(init)
    S = L.argmin(1)
    expect = init.copy()
    for j in range(2):
        members = np.flatnonzero(S == j)
        grads = be.client_gradients(init, np.full(len(members), j), members)
        expect[j] -= 0.3 / easy.n_clients * grads.sum(0)
    np.testing.assert_allclose(est.result_.extra["models_all"][0], expect, rtol=1e-12)


def test_one_round_model_averaging(easy):
    be = easy.backend()
    init = np.random.default_rng(4).standard_normal((2, easy.dim))
    est = IFCA(n_clusters=2, n_rounds=1, step_size=0.05, averaging="model", local_steps=3, init=init,
               random_state=0).fit(be)
    S = be.losses(init).argmin(1)
    local = be.local_update(init, S, 3, 0.05)
    expect = np.stack([local[S == j].mean(0) if (S == j).any() else init[j] for j in range(2)])
    np.testing.assert_allclose(est.result_.extra["models_all"][0], expect, rtol=1e-12)


def test_batched_restarts_equal_separate_runs(easy):
    be = easy.backend()
    inits = np.random.default_rng(5).binomial(1, 0.5, size=(2, 2, easy.dim)).astype(float)
    gammas = [0.01, 0.2]
    batched = IFCA(n_clusters=2, n_rounds=25, step_size=gammas, init=inits, n_init=2, random_state=0).fit(be)
    models_all = batched.result_.extra["models_all"]
    for r in range(4):
        single = IFCA(n_clusters=2, n_rounds=25, step_size=gammas[r % 2], init=inits[r // 2],
                      random_state=0).fit(be)
        np.testing.assert_allclose(models_all[r], single.result_.extra["models_all"][0], rtol=1e-10, atol=1e-12)
    # the selected run is the one of lowest total loss
    assert batched.result_.extra["best_run"] == int(np.argmin(batched.result_.extra["run_losses"]))


def test_same_seed_same_numbers_and_participation(easy):
    kw = dict(n_clusters=2, n_rounds=15, step_size=0.1, participation=0.5, n_init=2)
    a = IFCA(random_state=11, **kw).fit(easy.backend())
    b = IFCA(random_state=11, **kw).fit(easy.backend())
    np.testing.assert_array_equal(a.result_.extra["models_all"], b.result_.extra["models_all"])
    # half the clients per round: exactly 10 labels set in every recorded round
    assert all((lab >= 0).sum() == 10 for lab in a.history_.labels)


def test_divergence_is_confined_to_its_run(easy):
    est = IFCA(n_clusters=2, n_rounds=60, step_size=[0.1, 1e3], n_init=1, random_state=0).fit(easy.backend())
    assert est.result_.extra["diverged"].tolist() == [False, True]
    assert est.result_.extra["best_run"] == 0
    with pytest.raises(DivergenceError):
        IFCA(n_clusters=2, n_rounds=60, step_size=1e3, random_state=0).fit(easy.backend())


def test_monitor_records_parameter_error(easy):
    init = ball_init(easy.theta, alpha=0.25, random_state=1)
    est = IFCA(n_clusters=2, n_rounds=20, step_size=0.1, init=init, random_state=0,
               monitor=lambda t, models, labels: {"param_error": metrics.param_error(models, easy.theta)}).fit(
        easy.backend())
    err = est.history_.scalars["param_error"]
    assert len(err) == 20 and err[-1] < err[0]


@pytest.mark.parametrize("regime", ["fresh", "split"])
def test_theory_regimes_run_and_recover(regime):
    fed = MixedLinearRegression(K=2, clients_per_cluster=10, n=400, d=5, sigma=0.1, R=2.0).sample(2)
    init = ball_init(fed.theta, alpha=0.3, random_state=1)
    est = IFCA(n_clusters=2, n_rounds=10, step_size=0.5, init=init, random_state=0).fit(
        fed.backend(regime=regime, rounds=10, random_state=3))
    assert metrics.adjusted_rand(est.labels_, fed.labels) == 1.0


def test_baselines(easy):
    be = easy.backend()
    glob = GlobalModel(n_rounds=200, step_size=0.1).fit(be)
    assert glob.n_clusters_ == 1 and glob.models_.shape == (1, easy.dim)
    # FedAvg of equal-size clients minimises the pooled loss: its gradient vanishes
    assert np.linalg.norm(be.client_gradients(glob.models_, np.zeros(easy.n_clients, int)).mean(0)) < 1e-6
    loc = LocalModels().fit(be)
    assert loc.n_clusters_ == easy.n_clients and loc.models_.shape == (easy.n_clients, easy.dim)
    one = OneShotKMeans(n_clusters=2, n_rounds=100, random_state=0).fit(be)
    assert metrics.adjusted_rand(one.labels_, easy.labels) == 1.0


@pytest.mark.parametrize("kw, match", [
    (dict(n_clusters=0), "n_clusters"), (dict(n_clusters=21), "n_clusters"), (dict(step_size=0.0), "step_size"),
    (dict(step_size=-1.0), "step_size"), (dict(participation=0.0), "participation"),
    (dict(participation=1.5), "participation"), (dict(averaging="median"), "averaging"),
    (dict(n_rounds=-1), "n_rounds"), (dict(init=np.zeros((3, 10))), "init"), (dict(init="uniform"), "init"),
])
def test_ifca_validation(easy, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        IFCA(**kw).fit(easy.backend())


@pytest.mark.parametrize("alpha", [0.0, 0.5, -0.1, 0.7])
def test_ball_init_radius_validation(easy, alpha):
    with pytest.raises(ValueError, match="alpha"):
        ball_init(easy.theta, alpha)


def test_ball_init_geometry(easy):
    init = ball_init(easy.theta, 0.2, n_init=3, random_state=0)
    Delta = metrics.pairwise_distances(easy.theta, easy.theta)[0, 1] if hasattr(metrics, "pairwise_distances") \
        else np.linalg.norm(easy.theta[0] - easy.theta[1])
    np.testing.assert_allclose(np.linalg.norm(init - easy.theta[None], axis=-1), 0.3 * Delta)
    outside = ball_init(easy.theta, -0.5, random_state=0, allow_outside=True)
    np.testing.assert_allclose(np.linalg.norm(outside[0] - easy.theta, axis=-1), 1.0 * Delta)


def test_converged_runs_match_fixed_protocol_where_they_stop(easy):
    """stopping='converged': each run ends at its fixed point; its models agree with the fixed protocol's."""
    be = easy.backend()
    inits = np.random.default_rng(7).binomial(1, 0.5, size=(3, 2, easy.dim)).astype(float)
    kw = dict(n_clusters=2, n_rounds=300, step_size=[0.1, 0.5], init=inits, n_init=3, random_state=0)
    fixed = IFCA(**kw).fit(be)
    conv = IFCA(stopping="converged", tol=1e-6, **kw).fit(be)
    rounds, status = conv.result_.extra["run_rounds"], conv.result_.extra["run_status"]
    # every run stops early: at its fixed point, or where its remaining rounds have a closed form
    assert set(status) <= {"converged", "solved"} and (rounds < 300).all()
    # at ||G_t|| <= 1e-6 ||G_0|| on a strongly convex quadratic the models are within ~1e-6 of the fixed ones
    np.testing.assert_allclose(conv.result_.extra["models_all"], fixed.result_.extra["models_all"], atol=1e-5)
    # several runs reach the same fixed point, so compare the selection criterion, not the (tied) argmin
    np.testing.assert_allclose(conv.result_.extra["run_losses"], fixed.result_.extra["run_losses"], rtol=1e-6)
    assert len(conv.history_.labels) == rounds[conv.result_.extra["best_run"]]


def test_solved_runs_end_at_the_fixed_protocols_models():
    """A run whose identities are certified fixed leaves with round T's models, computed in closed form."""
    fed = MixedLinearRegression(K=2, clients_per_cluster=10, n=40, d=12, sigma=0.3, R=2.0).sample(3)
    be = fed.backend()
    inits = np.random.default_rng(5).binomial(1, 0.5, size=(4, 2, fed.dim)).astype(float)
    kw = dict(n_clusters=2, n_rounds=200, step_size=[0.01, 0.1], init=inits, n_init=4, random_state=0)
    fixed = IFCA(**kw).fit(be)
    conv = IFCA(stopping="converged", tol=0.0, **kw).fit(be)
    status, rounds = conv.result_.extra["run_status"], conv.result_.extra["run_rounds"]
    solved = status == "solved"
    # step 0.01 contracts by at most ~1 % a round: these runs are solved long before their models settle
    assert solved.all() and (rounds[::2] <= 150).all()
    err = np.abs(conv.result_.extra["models_all"] - fixed.result_.extra["models_all"]).max()
    assert err < 1e-9
    # one step more or fewer would be visible: the last step of a step-0.01 run is far above that
    last = IFCA(**{**kw, "n_rounds": 199}).fit(be).result_.extra["models_all"]
    assert np.abs(last - fixed.result_.extra["models_all"])[::2].max() > 1e-6


def test_converged_drops_diverged_run_at_once(easy):
    est = IFCA(n_clusters=2, n_rounds=300, step_size=[0.1, 1e3], random_state=0, stopping="converged").fit(
        easy.backend())
    assert est.result_.extra["diverged"].tolist() == [False, True]
    assert est.result_.extra["run_status"][1] == "diverged" and est.result_.extra["run_rounds"][1] < 20
    assert est.result_.extra["best_run"] == 0


def test_converged_verdict_callback_decides_and_settles(easy):
    """+1 from the callback stops every run at once; -1 removes only that run."""
    be = easy.backend()
    calls = []

    def decide_at_2(models, reach):
        calls.append(len(models))
        return np.full(len(models), 1 if len(calls) == 2 else 0)

    est = IFCA(n_clusters=2, n_rounds=300, step_size=[0.01, 0.1], random_state=0, stopping="converged",
               tol=0.0, verdict=decide_at_2).fit(be)
    assert est.result_.extra["run_rounds"].tolist() == [2, 2]
    assert set(est.result_.extra["run_status"]) == {"decided"}

    def drop_first(models, reach):
        return np.array([-1] + [0] * (len(models) - 1)) if len(models) == 2 else np.zeros(len(models), int)

    est = IFCA(n_clusters=2, n_rounds=40, step_size=[0.01, 0.1], random_state=0, stopping="converged",
               tol=0.0, verdict=drop_first).fit(be)
    status, rounds = est.result_.extra["run_status"], est.result_.extra["run_rounds"]
    assert status[0] == "settled" and rounds[0] == 1
    # the other run goes on: to round 40, or until its remaining rounds have a closed form
    assert (status[1], rounds[1]) == ("max_rounds", 40) or (status[1] == "solved" and rounds[1] > 1)

    # with a callback the fixed-point rule ends no run: near a success threshold the gap between a fixed point
    # at tol and round T's models can flip the verdict (at full scale, sigma = 0: 0.005 against 1e-4 < 0.001)
    est = IFCA(n_clusters=2, n_rounds=300, step_size=[0.1, 0.5], random_state=0, stopping="converged", tol=1e-2,
               verdict=lambda models, reach: np.zeros(len(models), int)).fit(be)
    status = est.result_.extra["run_status"]
    assert "converged" not in status and set(status) <= {"max_rounds", "solved"}
    # a solved run holds round T's models, not its fixed point's
    fixed = IFCA(n_clusters=2, n_rounds=300, step_size=[0.1, 0.5], random_state=0).fit(be)
    np.testing.assert_allclose(est.result_.extra["models_all"], fixed.result_.extra["models_all"], atol=1e-9)
    without = IFCA(n_clusters=2, n_rounds=300, step_size=[0.1, 0.5], random_state=0, stopping="converged",
                   tol=1e-2).fit(be)
    assert set(without.result_.extra["run_status"]) <= {"converged", "solved"}
    assert (without.result_.extra["run_rounds"] < 300).all()


def test_idle_models_reuse_their_losses_and_get_their_gradients_when_chosen_again(easy):
    """A model row no client chose did not move: its losses are taken from the last pass, the other rows are
    scored, and a row some client chooses gets its gradient from one more pass -- the same losses and gradients
    as one full pass (IFCA journal Alg. 2, option I)."""
    from synth.algorithms.common import group_argmin
    from synth.algorithms.ifca import _one_hot_argmin, _pass_reusing_idle

    be = easy.backend()
    k, m = 2, easy.n_clients
    rng = np.random.default_rng(3)
    # 3 runs: near the truths, far from everything (one model gets no client), swapped and shifted
    stack = np.concatenate([easy.theta, easy.theta + rng.normal(size=(2, easy.dim)) * [[0.0], [50.0]],
                            easy.theta[::-1] + 0.1])
    models = be.from_numpy(stack)
    L_full, _, G_full = be.losses_and_weighted_gradients(models, lambda L, r: _one_hot_argmin(L, k, 1.0 / m))
    chosen = np.zeros(len(stack), dtype=bool)
    chosen[(np.arange(3) * k + group_argmin(L_full, k)).ravel()] = True
    assert not chosen.all()  # some row has no client: the case the reuse is for
    for idle in [~chosen, ~chosen | (np.arange(len(stack)) == 4), np.arange(len(stack)) % 2 == 1]:
        L, G = _pass_reusing_idle(be, models, k, idle, L_full)
        np.testing.assert_array_equal(L[:, idle], L_full[:, idle])
        np.testing.assert_allclose(L, L_full, rtol=1e-12)
        np.testing.assert_allclose(G, G_full, rtol=1e-10, atol=1e-12 * np.abs(G_full).max())
        assert (G[idle & ~chosen] == 0).all()


def test_later_phases_do_not_start_once_the_verdict_is_known(easy):
    """With a verdict the restarts run in phases of initialisations; once it is known, later runs never start."""
    from synth.algorithms.ifca import _PHASES

    be = easy.backend()
    first = _PHASES[0] * 2  # runs of the first phase: its initialisations times 2 step sizes
    inits = np.random.default_rng(9).binomial(1, 0.5, size=(10, 2, easy.dim)).astype(float)
    kw = dict(n_clusters=2, step_size=[0.01, 0.1], init=inits, n_init=10, random_state=0, stopping="converged",
              tol=0.0)
    calls = []

    def decide_at_2(models, reach):
        calls.append(len(models))
        return np.full(len(models), 1 if len(calls) == 2 else 0)

    est = IFCA(n_rounds=300, verdict=decide_at_2, **kw).fit(be)
    rounds, status = est.result_.extra["run_rounds"], est.result_.extra["run_status"]
    assert calls == [first, first]
    assert (rounds[:first] == 2).all() and (rounds[first:] == 0).all() and set(status) == {"decided"}
    np.testing.assert_array_equal(est.result_.extra["models_all"][first:],
                                  np.repeat(inits, 2, axis=0)[first:])
    # a verdict that never decides: every phase runs, and each run ends where the fixed protocol puts it
    est = IFCA(n_rounds=6, verdict=lambda models, reach: np.zeros(len(models), int), **kw).fit(be)
    assert (est.result_.extra["run_rounds"] > 0).all()
    fixed = IFCA(**{**kw, "stopping": "fixed"}, n_rounds=6).fit(be)
    np.testing.assert_allclose(est.result_.extra["models_all"], fixed.result_.extra["models_all"], atol=1e-9)


@pytest.mark.parametrize("kw, match", [
    (dict(stopping="early"), "stopping"), (dict(tol=-1.0), "tol"), (dict(verdict=3), "verdict"),
    (dict(stopping="converged", averaging="model"), "averaging"),
    (dict(stopping="converged", participation=0.5), "participation"),
])
def test_converged_validation(easy, kw, match):
    with pytest.raises((ValueError, TypeError), match=match):
        IFCA(**kw).fit(easy.backend())


def test_verdict_bounds_hold_on_fig3_trial():
    """IFCAVerdict's early verdict equals the verdict of the full 300 rounds (same trial, both protocols)."""
    from synth.experiment import run_experiment

    p = dict(algo="ifca", family="linear", K=2, clients_per_cluster=8, n=30, d=20, theta="bernoulli",
             init="bernoulli", regime="fixed", rounds=300, averaging="gradient", sigma=0.1, R=1.0,
             step_size=[1.0, 0.1, 0.01], n_init=2, code_slack=0.001)
    # sigma = 0: the code's threshold is 0.001 absolute, finer than a fixed point at tol = 1e-4 resolves
    for seed, sigma in [(0, 0.1), (1, 0.1), (2, 0.1), (0, 0.0), (1, 0.0)]:
        fixed = run_experiment(dict(p, seed=seed, sigma=sigma))
        conv = run_experiment(dict(p, seed=seed, sigma=sigma, stopping="converged"))
        assert conv["success_any_restart"] == fixed["success_any_restart"]
        assert conv["success_code_rule"] == fixed["success_code_rule"]
        assert conv["iterations"] < 6 * 300


def test_verdict_rules_are_decided_one_by_one():
    """Each rule is met once some run's worst case meets it; a run leaves once no open rule needs it."""
    from synth.experiment import IFCAVerdict

    truths = np.array([[0.0, 0.0], [10.0, 0.0]])
    near = truths + 0.01  # a run whose models sit next to the truths
    far = truths + 3.0
    models = np.stack([near, far])
    small, wide = np.full((2, 2), 1e-3), np.full((2, 2), 5.0)
    # sigma = 0.1: matched threshold 0.06, code threshold 0.061
    v = IFCAVerdict(truths, 0.06, 0.061)
    assert list(v(models, wide)) == [0, 0]  # both could still go either way
    assert list(v(models, small)) == [1, 1]  # the near run meets both rules: the trial is decided
    # the far run alone, with a small reach, can change nothing
    assert list(IFCAVerdict(truths, 0.06, 0.061)(far[None], small[:1])) == [-1]
    # sigma = 0: the matched rule (exact recovery) keeps no run; the code rule decides
    v0 = IFCAVerdict(truths, 0.0, 0.001)
    assert list(v0(np.stack([truths + 1e-4, far]), small * 0.1)) == [1, 1]
    # a run whose reach covers its distance to the truth (it could end at distance 0) no longer keeps the trial
    # open once the code's rule is met
    v0 = IFCAVerdict(truths, 0.0, 0.001)
    assert list(v0(np.stack([truths + 1e-4, far]), small * 0.5)) == [1, 1]
    v0 = IFCAVerdict(truths, 0.0, 0.001)
    assert list(v0(np.stack([truths + 1e-4, far]), small)) == [0, -1]
    assert list(IFCAVerdict(truths, 0.0)(models, small)) == [1, 1]  # no rule to decide
    # the code rule met while the matched rule is not: only runs that could still meet the matched rule stay
    v = IFCAVerdict(truths, 0.02, 0.05)
    assert list(v(np.stack([truths + [0.03, 0.0], far]), np.zeros((2, 2)))) == [-1, -1]
    v = IFCAVerdict(truths, 0.02, 0.05)
    assert list(v(np.stack([truths + [0.035, 0.0], truths + [0.015, 0.0]]), np.full((2, 2), 0.01))) == [-1, 0]
    assert v.matched_open and not v.code_open


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_root_loss_lipschitz_bounds_every_client(dtype):
    """s_i = sigma_max(X_i) / sqrt(n_i), padded by its rounding bound: |sqrt f_i(a) - sqrt f_i(b)| <= s_i |a - b|."""
    fed = MixedLinearRegression(K=2, clients_per_cluster=6, n=[15] * 6 + [40] * 6, d=25, sigma=0.3,
                                dtype=dtype).sample(3)
    be = fed.backend()
    s = be.root_loss_lipschitz()
    exact = np.array([np.linalg.norm(fed.X[i, :fed.n_samples[i]].astype(np.float64), 2) / np.sqrt(fed.n_samples[i])
                      for i in range(fed.n_clients)])
    assert np.all(s >= exact) and np.all(s <= exact * (1 + (1e-3 if dtype == np.float32 else 1e-9)))
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(2, 200, 25)) * rng.uniform(0.01, 3, size=(2, 200, 1))
    root_a, root_b = np.sqrt(be.losses(a.astype(dtype))), np.sqrt(be.losses(b.astype(dtype)))
    gap = np.linalg.norm(a.astype(dtype).astype(np.float64) - b.astype(dtype), axis=1)
    assert np.all(np.abs(root_a - root_b) <= s[:, None] * gap[None] * (1 + 1e-4) + 1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_root_loss_error_bounds_the_computed_losses(dtype):
    """The computed root losses (fused kernel and numpy path) lie within root_loss_error of float64 ones."""
    fed = MixedLinearRegression(K=2, clients_per_cluster=6, n=[15] * 6 + [40] * 6, d=300, sigma=0.0,
                                dtype=dtype).sample(3)
    rng = np.random.default_rng(0)
    models = np.concatenate([fed.theta + rng.normal(size=(2, 300)) * 1e-4, rng.normal(size=(6, 300)) * 3])
    exact = np.sqrt(np.stack([((fed.X[i].astype(np.float64) @ models.astype(dtype).astype(np.float64).T
                                - fed.y[i, :, None]) ** 2).sum(0) / fed.n_samples[i] for i in range(fed.n_clients)]))
    for kernel in ("auto", "numpy"):
        be = GLMBackend(fed, kernel=kernel)
        computed = np.sqrt(be.losses(models.astype(dtype)))
        bound = be.root_loss_error(computed, np.linalg.norm(models, axis=1))
        assert np.all(np.abs(computed - exact) <= bound)
        # small enough to certify with: a fraction of the root losses of the far models
        assert np.median(bound[:, 2:]) < (0.05 if dtype == np.float32 else 1e-9) * np.median(computed[:, 2:])


def test_cluster_quadratics_give_the_gradient_sums():
    """sum_{i in S_j} grad f_i(theta) = Q_j theta - q_j for every group of a partition."""
    fed = MixedLinearRegression(K=3, clients_per_cluster=4, n=[9] * 6 + [20] * 6, d=7, sigma=0.5).sample(1)
    be = fed.backend()
    labels = np.random.default_rng(2).integers(0, 3, fed.n_clients)
    Q, q = be.cluster_quadratics(labels, 3)
    theta = np.random.default_rng(3).normal(size=(3, 7))
    G = be.weighted_gradients(theta, np.eye(3)[labels])
    np.testing.assert_allclose(np.einsum("jpq,jq->jp", Q, theta) - q, G, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(Q, Q.transpose(0, 2, 1))


def test_closed_form_needs_a_contracting_step_and_kept_identities():
    """ClosedForm gives round T's models only where the step contracts every quadratic and no identity changes."""
    from synth.algorithms.closed_form import ClosedForm

    fed = MixedLinearRegression(K=2, clients_per_cluster=10, n=40, d=12, sigma=0.3, R=2.0).sample(3)
    be = fed.backend()
    cf = ClosedForm(be, 2, 100, be.root_loss_lipschitz(), be.root_loss_error)
    labels = fed.labels
    near = fed.theta + 0.01
    # rent or buy: an unseen partition is computed once the runs asking for it have spent what it costs
    n = int(np.ceil(cf.cost_ratio))
    got = [cf.final_models(labels, near, 0.1, 50) for _ in range(n)]
    assert all(g is None for g in got[:-1]) and got[-1] is not None and cf.partitions == 1
    lam = max(np.linalg.eigvalsh(Q / fed.n_clients)[-1] for Q in be.cluster_quadratics(labels, 2)[0])
    assert cf.final_models(labels, near, 0.9 * 2 / lam, 50) is not None
    assert cf.final_models(labels, near, 1.1 * 2 / lam, 50) is None  # the step does not contract
    far = fed.theta[::-1].copy()  # each model at the other cluster's truth: the identities would swap
    assert cf.final_models(labels, far, 0.1, 50) is None
    assert cf.partitions == 1
    # the cache holds at most MAX_BYTES of eigenvectors: the oldest partition makes room and is computed again
    cf.MAX_BYTES, cf.cost_ratio = 2 * fed.dim**2 * 8, 0
    other = labels.copy()
    other[0] = 1 - other[0]
    cf.final_models(other, near, 0.1, 50)
    assert cf.partitions == 2 and len([e for e in cf._cache.values() if e]) == 1
    assert cf.final_models(labels, near, 0.1, 50) is not None and cf.partitions == 3


def test_root_loss_lipschitz_only_for_the_squared_loss():
    from synth.federation import LogisticMixture

    assert LogisticMixture(K=2, clients_per_cluster=3, n=10, d=4).sample(0).backend().root_loss_lipschitz() is None


def test_identity_lock_certifies_that_no_identity_changes():
    """Where the lock keeps a run's reach, no models within their balls change any client's identity."""
    from synth.algorithms.ifca import _identity_lock

    fed = MixedLinearRegression(K=3, clients_per_cluster=5, n=30, d=8, sigma=0.2, R=1.0).sample(4)
    be, m, k, A = fed.backend(), fed.n_clients, 3, 4
    rng = np.random.default_rng(1)
    # run 0 sits at the truth; runs 1-3 at random models, of which some clients are near a tie
    models = np.concatenate([fed.theta, rng.normal(size=(3 * k, 8)) * 0.5]).reshape(A, k, 8)
    L = be.losses(models.reshape(A * k, 8)).reshape(m, A, k)
    best = L.argmin(2)
    step = np.full((A, k), 1e-3)
    kept_any = dropped_any = False
    for radius in (1e-3, 1e-2, 0.05, 0.2, 1.0):
        reach = np.full((A, k), radius)
        out = _identity_lock(reach, step, L, best, be.root_loss_lipschitz())
        assert np.all((out == reach) | np.isinf(out))
        for a in np.flatnonzero(np.isfinite(out[:, 0])):
            kept_any = True
            for _ in range(300):  # models anywhere in their balls (direction random, length up to the radius)
                u = rng.normal(size=(k, 8))
                u *= (rng.uniform(size=(k, 1)) ** 0.1) * (step[a, :, None] + reach[a, :, None]) / np.linalg.norm(
                    u, axis=1, keepdims=True)
                moved = be.losses(models[a] + u).argmin(1)
                assert np.array_equal(moved, best[:, a])
        dropped_any |= bool(np.isinf(out).any())
    assert kept_any and dropped_any
    # an infinite reach never certifies
    assert np.isinf(_identity_lock(np.full((A, k), np.inf), step, L, best, be.root_loss_lipschitz())).all()
