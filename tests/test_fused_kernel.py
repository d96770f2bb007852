"""The compiled fused kernel of GLMBackend (synth/_kernels) against the numpy path.

Both paths compute IFCA's identity estimate and gradient step (IFCA journal Alg. 2: the losses
F_i(theta_j), the weights chosen from them, and sum_i w_ij grad F_i(theta_j)); they must agree to
rounding on random instances -- both families, float32/float64, equal and padded n, k = 1..5,
client subsets, one-hot and dense weights -- and the fused path must give bit-identical numbers for any
thread count and block size.  Deterministic seeds throughout (no test here is statistical).  Without a
C compiler the comparisons skip; the fallback tests run everywhere.
"""

import os
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import synth.backend as backend_module
from synth import _kernels
from synth.algorithms import IFCA
from synth.backend import GLMBackend
from synth.federation import LogisticMixture, MixedLinearRegression

ROOT = Path(__file__).resolve().parents[1]
PADDED = [13, 7, 13, 2, 11, 13, 5, 13, 9, 13]

# skip only where the kernel cannot be built at all; a compiler whose build or self-test fails is a failure
NO_COMPILER = _kernels._compiler() is None or os.environ.get("CFLAB_FUSED", "1").strip() == "0"
needs_fused = pytest.mark.skipif(NO_COMPILER, reason="no C compiler (or CFLAB_FUSED=0): numpy path only")

# float64 paths differ only in summation order; float32 in the order of float32 sums of ~13 terms
TOL = {np.float64: dict(rtol=1e-11, atol=1e-12), np.float32: dict(rtol=2e-4, atol=2e-4)}


@needs_fused
def test_kernel_builds_where_a_compiler_exists():
    status = _kernels.status()
    assert status["available"], status
    assert GLMBackend(_fed("linear", np.float64, False, d=128), kernel="auto").kernel == "fused"


def _fed(family, dtype, padded, d=11, K=2, seed=0):
    n = PADDED if padded else 13
    if family == "linear":
        return MixedLinearRegression(K=K, clients_per_cluster=5, n=n, d=d, sigma=0.5, dtype=dtype).sample(seed)
    return LogisticMixture(K=K, clients_per_cluster=5, n=n, d=d, reg=0.2, dtype=dtype).sample(seed)


def _pair(fed, **kw):
    return GLMBackend(fed, kernel="fused", **kw), GLMBackend(fed, kernel="numpy")


def _choosers(rng, c, M):
    """An L-independent one-hot choice with a client left out, dense weights with some zeros, and IFCA's argmin."""
    onehot = np.zeros((c, M))
    onehot[np.arange(c), rng.integers(M, size=c)] = rng.uniform(0.5, 1.5, size=c)
    onehot[c // 2] = 0.0
    dense = rng.uniform(size=(c, M)) * (rng.uniform(size=(c, M)) < 0.7)
    return {"one-hot": lambda L, rows: onehot[rows], "dense": lambda L, rows: dense[rows],
            "argmin": lambda L, rows: np.eye(M)[L.argmin(1)] / c}


@needs_fused
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("padded", [False, True], ids=["equal-n", "padded-n"])
@pytest.mark.parametrize("family", ["linear", "logistic"])
def test_fused_matches_numpy(family, padded, dtype):
    fed = _fed(family, dtype, padded)
    fused, plain = _pair(fed)
    assert fused.kernel == "fused" and plain.kernel == "numpy"
    rng = np.random.default_rng(11)
    for k in range(1, 6):
        models = rng.standard_normal((k, fed.dim)) * 0.5
        for clients in (None, np.array([7, 2, 9, 2, 0]), np.array([-1, 3])):
            c = fed.n_clients if clients is None else len(clients)
            for name, choose in _choosers(rng, c, k).items():
                La, Wa, Ga = fused.losses_and_weighted_gradients(models, choose, clients)
                Lb, Wb, Gb = plain.losses_and_weighted_gradients(models, choose, clients)
                np.testing.assert_allclose(La, Lb, **TOL[dtype], err_msg=f"losses k={k} {name}")
                gap = np.sort(Lb, 1)[:, 1] - np.sort(Lb, 1)[:, 0] if k > 1 else np.ones(c)
                if name != "argmin" or gap.min() > 1e-3:  # argmin of rounded losses agrees away from ties
                    np.testing.assert_array_equal(Wa, Wb, err_msg=f"weights k={k} {name}")
                    np.testing.assert_allclose(Ga, Gb, **TOL[dtype], err_msg=f"gradient k={k} {name}")
                assert La.dtype == Ga.dtype == np.float64 and Ga.shape == (k, fed.dim)
            np.testing.assert_allclose(fused.losses(models, clients), plain.losses(models, clients), **TOL[dtype])


@needs_fused
def test_choose_sees_the_same_blocks_protocol(monkeypatch):
    """``choose`` gets each block's loss rows and their positions, in order; what it returns (and any change
    it makes to the losses it is handed, as on the numpy path) is what comes back."""
    monkeypatch.setattr(backend_module, "_FUSED_BUFFER_BYTES", 3 * 2 * 11 * 8)  # blocks of 3 clients
    fed = _fed("logistic", np.float64, True)
    be = GLMBackend(fed, kernel="fused")
    models = np.random.default_rng(3).standard_normal((2, fed.dim))
    seen = []

    def choose(L, rows):
        seen.append((L.copy(), rows.copy()))
        return np.full(L.shape, 0.5)

    L, W, G = be.losses_and_weighted_gradients(models, choose)
    assert [len(r) for _, r in seen] == [3, 3, 3, 1]
    np.testing.assert_array_equal(np.concatenate([r for _, r in seen]), np.arange(fed.n_clients))
    np.testing.assert_array_equal(np.concatenate([b for b, _ in seen]), L)
    np.testing.assert_array_equal(W, 0.5)
    np.testing.assert_allclose(G, GLMBackend(fed, kernel="numpy").weighted_gradients(models, W), **TOL[np.float64])


@needs_fused
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_same_numbers_for_any_threads_and_blocks(monkeypatch, dtype):
    fed = _fed("linear", dtype, True, d=37)
    models = np.random.default_rng(5).standard_normal((3, fed.dim))
    dense = np.random.default_rng(6).uniform(size=(fed.n_clients, 3))
    ref = GLMBackend(fed, kernel="fused", threads=1).losses_and_weighted_gradients(models, lambda L, r: dense[r])
    for threads, buffer in ((2, None), (3, None), (1, 3 * 37 * 8), (2, 2 * 3 * 37 * 8)):
        if buffer:
            monkeypatch.setattr(backend_module, "_FUSED_BUFFER_BYTES", buffer)
        got = GLMBackend(fed, kernel="fused", threads=threads).losses_and_weighted_gradients(
            models, lambda L, r: dense[r])
        for a, b in zip(got, ref, strict=True):
            np.testing.assert_array_equal(a, b)


@needs_fused
@pytest.mark.parametrize("family", ["linear", "logistic"])
def test_ifca_fits_agree(family):
    """IFCA with restarts stacked (M = 3 runs x k = 2, within the fused range) on both paths."""
    fed = _fed(family, np.float64, True, d=8, seed=2)
    fits = [IFCA(n_clusters=2, n_rounds=40, step_size=0.2, n_init=3, random_state=0).fit(GLMBackend(fed, kernel=kern))
            for kern in ("fused", "numpy")]
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)
    np.testing.assert_allclose(fits[0].models_, fits[1].models_, rtol=1e-9, atol=1e-11)
    np.testing.assert_allclose(fits[0].result_.extra["objective_all"], fits[1].result_.extra["objective_all"],
                               rtol=1e-9)


@needs_fused
def test_padded_rows_are_never_read():
    """Rows past n_i contribute nothing: garbage there changes nothing on the fused path."""
    fed = _fed("logistic", np.float64, True)
    be = GLMBackend(fed, kernel="fused")
    models = np.random.default_rng(7).standard_normal((2, fed.dim))
    W = np.random.default_rng(8).uniform(size=(fed.n_clients, 2))
    clean = be.losses_and_weighted_gradients(models, lambda L, r: W[r])
    pad = ~fed.mask
    fed.X[pad], fed.y[pad] = np.nan, np.nan
    dirty = GLMBackend(fed, kernel="fused").losses_and_weighted_gradients(models, lambda L, r: W[r])
    for a, b in zip(dirty, clean, strict=True):
        np.testing.assert_array_equal(a, b)


@needs_fused
def test_strided_views_and_regimes():
    """IFCA's split regime hands the kernel row slices of the data (strided views): read in place."""
    fed = _fed("linear", np.float64, False)
    view = fed.subset_rows(3, 9)
    assert not view.X.flags.c_contiguous
    fused, plain = _pair(view)
    assert fused.kernel == "fused"
    models = np.random.default_rng(9).standard_normal((2, fed.dim))
    for a, b in zip(fused.losses_and_weighted_gradients(models, lambda L, r: np.eye(2)[L.argmin(1)]),
                    plain.losses_and_weighted_gradients(models, lambda L, r: np.eye(2)[L.argmin(1)]), strict=True):
        np.testing.assert_allclose(a, b, **TOL[np.float64])
    ids, grads = GLMBackend(fed, regime="split", rounds=2, kernel="fused").at_round(1)
    assert ids.kernel == grads.kernel == "fused"


@needs_fused
def test_dispatch_large_stacks_take_numpy():
    """Up to 8 models the fused kernel, beyond numpy's GEMM, whatever d (bench/roofline.py --sweep-only)."""
    for d in (20, 1000):
        be = GLMBackend(_fed("linear", np.float64, False, d=d), kernel="fused")
        assert be._use_fused(1) and be._use_fused(8)
        assert not be._use_fused(9) and not be._use_fused(60)


@needs_fused
def test_thread_budget_follows_blas_limit(monkeypatch):
    """Inside a threadpoolctl limit (the Monte Carlo engine pins BLAS to one thread) the kernel stays on one."""
    parts = []
    real = _kernels.run_parts
    monkeypatch.setattr(_kernels, "run_parts", lambda tasks: (parts.append(len(tasks)), real(tasks)))
    be = GLMBackend(_fed("linear", np.float64, False), kernel="fused")
    models = np.zeros((2, be.n_params))
    with threadpool_limits(2, user_api="blas"):
        be.losses(models)
        assert parts == []  # a pass over data that fit in cache stays on the calling thread, no pool
    monkeypatch.setattr(backend_module, "_FUSED_PARALLEL_BYTES", 0)  # as if the data were large
    with threadpool_limits(1, user_api="blas"):
        assert _kernels.blas_threads() == 1
        be.losses(models)
        assert parts == []
    with threadpool_limits(2, user_api="blas"):
        be.losses(models)
        assert parts == [2]
    GLMBackend(be.fed, kernel="fused", threads=1).losses(models)
    assert parts == [2]


@needs_fused
def test_out_of_range_clients_and_pickling():
    fed = _fed("linear", np.float64, False)
    be = GLMBackend(fed, kernel="fused")
    models = np.ones((2, fed.dim))
    with pytest.raises(IndexError, match="out of bounds"):
        be.losses(models, np.array([0, fed.n_clients]))
    with pytest.raises(IndexError, match="out of bounds"):
        be.losses_and_weighted_gradients(models, lambda L, r: L, np.array([-fed.n_clients - 1]))
    again = pickle.loads(pickle.dumps(be))
    assert again.kernel == "fused"
    np.testing.assert_array_equal(again.losses(models), be.losses(models))


def test_numpy_fallback_when_disabled(monkeypatch):
    monkeypatch.setenv("CFLAB_FUSED", "0")
    fed = _fed("linear", np.float64, True, d=128)
    be = GLMBackend(fed)
    assert be.kernel == "numpy"
    assert _kernels.status() == {"available": False, "reason": "disabled by CFLAB_FUSED=0", "path": None}
    with pytest.raises(ValueError, match="kernel='fused' is not available here: disabled by CFLAB_FUSED=0"):
        GLMBackend(fed, kernel="fused")
    with pytest.raises(ValueError, match="kernel must be one of"):
        GLMBackend(fed, kernel="c")
    with pytest.raises(ValueError, match="threads"):
        GLMBackend(fed, threads=0)


def _python(code: str, env: dict, timeout: int = 300) -> str:
    full = {k: v for k, v in os.environ.items() if k not in ("CFLAB_FUSED", "CC")}
    full.update(env)
    full["PYTHONPATH"] = str(ROOT) + os.pathsep + full.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", code], env=full, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


_REPORT = ("from synth import _kernels; from synth.federation import MixedLinearRegression; "
           "be = MixedLinearRegression(K=2, clients_per_cluster=2, n=5, d=128).sample(0).backend(); "
           "import numpy as np; be.losses_and_weighted_gradients(np.ones((2, 128)), lambda L, r: L); "
           "print(be.kernel, '|', _kernels.status()['reason'])")


def test_silent_fallback_without_compiler(tmp_path):
    """No compiler on PATH, or one that fails: the numpy path, nothing printed, the reason on record."""
    cases = [({"PATH": str(tmp_path)}, "no C compiler")]
    if Path("/bin/false").exists():
        cases.append(({"CC": "/bin/false", "PATH": str(tmp_path)}, "build failed"))
    for env, why in cases:
        out = _python(_REPORT, {**env, "CFLAB_CACHE_DIR": str(tmp_path / "cache")})
        kernel, reason = (s.strip() for s in out.split("|"))
        assert kernel == "numpy" and why in reason, out


@needs_fused
def test_cache_build_is_atomic_under_concurrency(tmp_path):
    """Two processes building into one empty cache at once: both get the kernel, one complete library is left
    and no temporary file; a third process loads it from the cache without building."""
    cache = tmp_path / "cache"
    env = {**os.environ, "CFLAB_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("CFLAB_FUSED", None)
    procs = [subprocess.Popen([sys.executable, "-c", _REPORT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(o.startswith("fused |") and "built" in o for o, _ in outs), outs
    assert [p.name for p in cache.iterdir()] == [f.name for f in cache.glob("fused-*.so")] and \
        len(list(cache.iterdir())) == 1
    out = _python(_REPORT, {"CFLAB_CACHE_DIR": str(cache)})
    assert out.startswith("fused |") and "cached" in out, out


@needs_fused
@pytest.mark.parametrize("family", ["linear", "logistic"])
def test_guessed_single_model_gives_the_same_numbers(family, monkeypatch):
    """The kernel forms only the gradient of each client's last single model; right, wrong or no guesses
    must give bit-identical losses, weights and G (a wrong guess is redone in full)."""
    fed = _fed(family, np.float64, True, d=23)
    M = 4
    models = np.random.default_rng(3).standard_normal((M, fed.dim))
    one_hot = lambda L, r: np.eye(M)[L.argmin(1)] / fed.n_clients  # noqa: E731
    ref = GLMBackend(fed, kernel="fused")
    want = ref.losses_and_weighted_gradients(models, one_hot)
    last, guess = ref._guesses[M]
    assert (last == want[1].argmax(1)).all() and (guess == -1).all()  # no guess before two equal choices
    again = ref.losses_and_weighted_gradients(models, one_hot)
    assert (guess == want[1].argmax(1)).all()
    for a, b in zip(again, want, strict=True):
        np.testing.assert_array_equal(a, b)
    # a first block of 2 clients tests the guesses, then blocks of 3 (right guesses) or of 2 (dropped guesses)
    monkeypatch.setattr(backend_module, "_FUSED_BUFFER_BYTES", 2 * M * 23 * 8)
    monkeypatch.setattr(backend_module, "_FUSED_GUESSED_BUFFER_BYTES", 3 * M * 23 * 8)
    blocks = []
    real_run = GLMBackend._run_fused
    monkeypatch.setattr(GLMBackend, "_run_fused", lambda self, lib, idx, *a, **k: (blocks.append(len(idx)),
                                                                                   real_run(self, lib, idx, *a, **k)))
    rng = np.random.default_rng(4)
    wrong = (guess + 1) % M
    for guesses, sizes in ((guess.copy(), [2, 3, 3, 2]), (wrong, [2, 2, 2, 2, 2, 2]),
                           (rng.integers(-1, M, fed.n_clients), None)):
        be = GLMBackend(fed, kernel="fused")
        be._guesses[M] = np.stack([guesses, guesses]).astype(np.int64)
        blocks.clear()
        for a, b in zip(be.losses_and_weighted_gradients(models, one_hot), want, strict=True):
            np.testing.assert_array_equal(a, b)
        if sizes is not None:  # right guesses: large blocks; all wrong: the first block is redone, then dropped
            assert blocks == sizes, blocks
    # dense weights on two models: a single guess must not drop the other model's gradient
    dense = lambda L, r: np.where(np.arange(M) < 2, 0.5, 0.0)[None, :].repeat(len(r), 0)  # noqa: E731
    full = GLMBackend(fed, kernel="fused")
    for a, b in zip(ref.losses_and_weighted_gradients(models, dense), full.losses_and_weighted_gradients(models, dense),
                    strict=True):
        np.testing.assert_array_equal(a, b)
    assert (ref._guesses[M] == -1).all()  # dense weights: no single model, no guess
