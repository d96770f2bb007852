"""Speed-ups of the quick run that must not change a number: each is checked against the code it replaces."""

from __future__ import annotations

import numpy as np

from synth.experiment import _matched, _matched_stack


def test_matched_distance_of_all_restarts_at_once_is_the_same_floats():
    """IFCA Fig. 3's stopping rule scores every restart each round: the stacked one-to-one matched distance equals
    the restart-by-restart one bit for bit (ties, NaN, infinities, fewer models than truths included)."""
    rng = np.random.default_rng(44)
    for _ in range(3000):
        k, K, A = (int(v) for v in rng.integers(1, [6, 6, 12]))
        d = rng.random((A, k, K)) * 10 ** rng.uniform(-3, 3)
        if rng.random() < 0.2:
            d = np.round(d, 1)  # ties between matchings
        if rng.random() < 0.1:
            d[rng.random(d.shape) < 0.1] = np.nan
        if rng.random() < 0.1:
            d[rng.random(d.shape) < 0.1] = np.inf
        want = np.array([_matched(x) for x in d])
        assert np.array_equal(_matched_stack(d), want, equal_nan=True), (k, K, d)


def test_clove_clusters_with_one_openmp_thread_through_one_controller():
    """CLoVE clusters its loss vectors every round with one OpenMP thread; the limiter comes from one controller
    per process (building one scans every loaded library), and still limits every OpenMP runtime to 1 thread."""
    import sklearn.cluster  # noqa: F401  (loads scikit-learn's OpenMP runtime, as cluster_vectors does)
    from threadpoolctl import threadpool_info

    from synth.algorithms import clove

    with clove._one_openmp_thread():
        openmp = [lib for lib in threadpool_info() if lib["user_api"] == "openmp"]
        assert openmp and all(lib["num_threads"] == 1 for lib in openmp)
    first = clove._OPENMP["controller"]
    with clove._one_openmp_thread():
        pass
    assert clove._OPENMP["controller"] is first
