"""SR-FCA's public-code variant (``SRFCA(variant="public-code")``): its graph step, its trimmed mean of weights, its
REFINE's client sampling, the accuracy the code reports, and the same decisions on both backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nets.backend import TorchBackend
from nets.evaluate import code_scores
from nets.functional import FunctionalModel
from nets.models import model_factory
from synth import metrics
from synth.algorithms import SRFCA
from synth.algorithms.srfca import pivot_clusters
from synth.backend import GLMBackend, trim_range, trimmed_mean
from synth.federation import MixedLinearRegression


# ------------------------------------------------------------------------------ the public code's trimmed mean
@pytest.mark.parametrize("J, beta, want", [
    (10, 0.15, (1, 8)),   # int(1.5) = 1 below, int(8.5) = 8: one value dropped below, two above
    (10, 0.1, (1, 9)),
    (20, 0.15, (3, 17)),
    (3, 0.15, (0, 2)),    # int(0.45) = 0 .. int(2.55) = 2: the largest value dropped, none below
    (2, 0.3, (0, 2)),     # 0 .. 1 keeps one value: the code falls back to the plain mean
    (10, 0.0, (0, 10)),
])
def test_trim_range_public_code(J, beta, want):
    start, end = int(beta * J), int((1 - beta) * J)
    expect = (0, J) if end <= start + 1 or beta == 0 else (start, end)  # sr-fca@a1b418f src/trainers.py:451-458
    assert trim_range(J, beta, "public-code") == expect == want


def test_trim_range_symmetric_is_def_3_2():
    assert trim_range(10, 0.15, "symmetric") == (1, 9)
    assert trim_range(10, 0.2, "symmetric") == (2, 8)


def test_trimmed_mean_public_code_drops_more_above():
    rows = np.arange(10.0)[:, None] * np.ones((1, 3))
    np.testing.assert_allclose(trimmed_mean(rows, 0.15, "public-code"), np.full(3, np.mean(np.arange(1, 8))))
    np.testing.assert_allclose(trimmed_mean(rows, 0.15), np.full(3, np.mean(np.arange(1, 9))))


def test_backends_apply_the_public_code_rule():
    rng = np.random.default_rng(0)
    V = rng.standard_normal((14, 5))
    labels = np.array([0] * 10 + [1] * 4)
    model = FunctionalModel(model_factory("linear", (5,), 1), "sq", dtype=torch.float64)
    tb = TorchBackend(model, torch.zeros(14, 3, 5, dtype=torch.float64), None, seed=0)
    gb = GLMBackend(MixedLinearRegression(K=2, clients_per_cluster=7, n=6, d=5).sample(0), kernel="numpy")
    for be in (tb, gb):
        out = be.to_numpy(be.trimmed_mean(be.from_numpy(V), labels, 2, 0.15, rule="public-code"))
        np.testing.assert_allclose(out[0], np.sort(V[:10], 0)[1:8].mean(0), rtol=1e-12)
        np.testing.assert_allclose(out[1], np.sort(V[10:], 0)[0:3].mean(0), rtol=1e-12)  # int(0.6)=0 .. int(3.4)=3
    np.testing.assert_allclose(gb.trimmed_mean(V, labels, 2, 0.4, rule="public-code")[1], V[10:].mean(0))  # 1..2
    with pytest.raises(ValueError, match="rule"):
        tb.trimmed_mean(tb.from_numpy(V), labels, 2, 0.15, rule="median")


# ------------------------------------------------------------------------------ pivot clustering
def test_pivot_takes_direct_neighbours_not_components():
    # a path 0 - 1 - 2: connected components give one cluster; a pivot at an end takes only its neighbour
    A = np.zeros((3, 3), dtype=bool)
    A[0, 1] = A[1, 0] = A[1, 2] = A[2, 1] = True
    seen = set()
    for seed in range(30):
        labels = pivot_clusters(A, np.random.default_rng(seed), 0)
        seen.add(tuple(labels))
    assert (0, 0, 0) in seen  # pivot 1
    assert (0, 0, 1) in seen or (1, 0, 0) in seen or (0, 1, 1) in seen  # pivot 0 or 2 first
    # keep_above = 1 drops the singleton the end pivot leaves
    labels = [pivot_clusters(A, np.random.default_rng(s), 1) for s in range(30)]
    assert any((lab == -1).sum() == 1 for lab in labels)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 10**6), p=st.floats(0.0, 1.0), keep=st.integers(0, 3))
def test_pivot_clusters_are_stars_of_the_graph(n, seed, p, keep):
    rng = np.random.default_rng(seed)
    A = rng.random((n, n)) < p
    A = A | A.T
    np.fill_diagonal(A, False)
    labels = pivot_clusters(A, np.random.default_rng(seed + 1), keep)
    assert labels.shape == (n,) and labels.min(initial=0) >= -1
    C = labels.max(initial=-1) + 1
    assert set(np.unique(labels[labels >= 0])) == set(range(C))
    for c in range(C):
        members = np.flatnonzero(labels == c)
        assert len(members) > keep
        # some member (the pivot) is adjacent to every other member
        assert any(all(A[i, j] for j in members if j != i) for i in members)


# ------------------------------------------------------------------------------ end to end
def _fed(seed=0, per=8):
    return MixedLinearRegression(K=3, clients_per_cluster=per, n=100, d=5, sigma=0.1, theta="sphere",
                                 delta=1.0).sample(seed)


def _code(**kw):
    base = dict(threshold=0.3, dist="cross", n_refine=2, variant="public-code", local="gd", local_train_steps=150,
                local_step_size=0.1, trmean_steps=25, trmean_step_size=0.1, beta=0.15, clients_per_round=5,
                refine_local_steps=3, random_state=0)
    return SRFCA(**{**base, **kw})


def test_public_code_variant_recovers_the_clusters():
    fed = _fed()
    est = _code().fit(fed.backend())
    assert est.result_.extra["status"] == "ok"
    assert est.n_clusters_ == 3 and metrics.adjusted_rand(est.labels_, fed.labels) == 1.0
    assert metrics.param_error(est.models_, fed.theta) < 0.05
    scored = est.result_.extra["scored_labels"]
    assert scored.shape == (len(fed.labels),) and est.result_.extra["scored_models"].shape[1] == fed.theta.shape[1]
    again = _code().fit(fed.backend())
    np.testing.assert_array_equal(again.labels_, est.labels_)
    np.testing.assert_array_equal(again.models_, est.models_)


def test_public_code_refine_trains_sampled_clients_one_after_another_and_starts_afresh():
    fed = _fed(per=8)
    be = fed.backend()
    calls = []
    inits = []
    update, init = be.local_update, be.init_models

    def spy_update(models, labels, steps, lr, clients=None):
        out = update(models, labels, steps, lr, clients=clients)
        start = np.asarray(models)[np.asarray(labels)]
        calls.append((np.asarray(clients).copy(), np.asarray(labels).copy(), steps, start, np.asarray(out)))
        return out

    def spy_init(n, scheme, rng):
        inits.append(n)
        return init(n, scheme, rng)

    be.local_update, be.init_models = spy_update, spy_init
    est = _code(clients_per_round=5, trmean_steps=4, refine_local_steps=3).fit(be)
    one_shot = est.result_.extra["one_shot_labels"]
    sizes = np.bincount(one_shot[one_shot >= 0])
    refine = [c for c in calls if c[2] == 3]
    assert len(refine) == 4 * 2 * 5  # rounds x REFINEs x turns (5 of each cluster of 8, one per turn)
    first = refine[:5]
    clients = np.concatenate([c[0] for c in first])
    labs = np.concatenate([c[1] for c in first])
    np.testing.assert_array_equal(np.bincount(labs, minlength=len(sizes)), np.minimum(5, sizes))
    assert len(np.unique(clients)) == len(clients)  # without replacement
    assert (one_shot[clients] == labs).all()  # each from its own cluster
    # one after another: each turn starts from the weights the previous turn's client ended with
    for prev, nxt in zip(first[:-1], first[1:], strict=True):
        np.testing.assert_array_equal(prev[1], nxt[1])
        np.testing.assert_allclose(nxt[3], prev[4])
    assert len({tuple(c[0]) for c in refine[:5]}) > 1
    # ONE_SHOT: one start per client; each REFINE: a fresh model per cluster
    assert inits[1] == len(fed.labels) and inits[2:] == [len(sizes), int(est.history_.labels[1].max()) + 1]


def test_public_code_variant_reports_and_refuses():
    fed = _fed()
    est = _code(threshold=1e-9).fit(fed.backend())
    assert "no cluster" in est.result_.extra["status"] and est.models_.shape[0] == 0
    with pytest.raises(ValueError, match="resample"):
        _code(resample=True).fit(fed.backend())
    with pytest.raises(ValueError, match="variant"):
        SRFCA(threshold=0.3, variant="code").fit(fed.backend())
    with pytest.raises(ValueError, match="clients_per_round"):
        _code(clients_per_round=0).fit(fed.backend())


def test_public_code_variant_same_decisions_on_both_backends():
    """The variant on the torch ``linear`` model (float64, full batch, SGD) equals it on GLMBackend when both draw
    their initial models from the same numpy stream."""
    fed = MixedLinearRegression(K=2, clients_per_cluster=4, n=[30] * 8, d=3, sigma=0.3).sample(4)
    glm = GLMBackend(fed, kernel="numpy")
    model = FunctionalModel(model_factory("linear", (fed.dim,), 1), "sq", dtype=torch.float64)
    tor = TorchBackend(model, torch.as_tensor(fed.X), torch.as_tensor(fed.y), fed.n_samples, seed=0)
    for be in (glm, tor):
        be.init_models = (lambda b: lambda n, scheme, rng: b.from_numpy(0.3 * rng.standard_normal((n, fed.dim))))(be)
    kw = dict(threshold=0.6, dist="cross", local_train_steps=40, trmean_steps=10, clients_per_round=3,
              refine_local_steps=2)
    a, b = _code(**kw).fit(glm), _code(**kw).fit(tor)
    np.testing.assert_array_equal(b.labels_, a.labels_)
    np.testing.assert_allclose(b.models_, a.models_, rtol=0, atol=1e-8)
    np.testing.assert_array_equal(b.result_.extra["scored_labels"], a.result_.extra["scored_labels"])
    assert len(np.unique(a.labels_)) == 2


def test_code_scores_leave_unclustered_clients_out():
    """The code's accuracy: mean over clustered clients of each one's accuracy on its cluster model."""
    g = torch.Generator().manual_seed(0)
    X = torch.randn(4, 6, 3, generator=g, dtype=torch.float64)
    y = torch.randint(0, 2, (4, 6), generator=g)
    model = FunctionalModel(lambda: torch.nn.Linear(3, 2), "ce", dtype=torch.float64)
    test = TorchBackend(model, X, y, seed=0)
    W = np.random.default_rng(1).standard_normal((2, model.n_params))
    labels = np.array([0, 1, -1, 0])
    out = code_scores(test, W, labels)
    _, acc = test.scores(W, np.array([0, 1, 0, 0]))
    assert out["clustered_clients_code"] == 3
    assert out["test_accuracy_code"] == pytest.approx(np.mean(acc[[0, 1, 3]]))
    assert code_scores(test, W, np.full(4, -1)) == {"test_accuracy_code": None, "clustered_clients_code": 0}
