"""synth.intervals: Wilson, Clopper-Pearson and t intervals against scipy, and the one edge-case convention that
reports, theory checks and figures share."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from synth import intervals
from synth.intervals import clopper_pearson, column_mean_intervals, mean_interval, wilson


@pytest.mark.parametrize("k, n", [(0, 1), (1, 1), (0, 20), (3, 20), (19, 20), (20, 20), (7, 40)])
@pytest.mark.parametrize("confidence", [0.8, 0.95, 0.999])
def test_binomial_intervals_match_scipy(k, n, confidence):
    ref = stats.binomtest(k, n)
    w = ref.proportion_ci(confidence_level=confidence, method="wilson")
    cp = ref.proportion_ci(confidence_level=confidence, method="exact")
    assert wilson(k, n, confidence) == pytest.approx((w.low, w.high), abs=1e-12)
    assert clopper_pearson(k, n, confidence) == pytest.approx((cp.low, cp.high), abs=1e-12)


@pytest.mark.parametrize("fn", [wilson, clopper_pearson])
def test_proportion_edge_cases(fn):
    assert fn(0, 0) == (0.0, 1.0)  # no trial: the whole range, not NaN
    lo, hi = fn(0, 50)
    assert lo == 0.0 and 0 < hi < 0.2  # exact ends at 0 and n
    lo, hi = fn(50, 50)
    assert 0.8 < lo < 1 and hi == 1.0
    # vectorised, broadcast, and never outside [0, 1] whatever the counts
    n = np.arange(0, 60)
    k = n // 3
    lo, hi = fn(k, n, 0.99)
    assert lo.shape == hi.shape == n.shape
    assert np.all((0 <= lo) & (lo <= k / np.maximum(n, 1)) & (k / np.maximum(n, 1) <= hi) & (hi <= 1))
    assert (lo[0], hi[0]) == (0.0, 1.0)


@pytest.mark.parametrize("bad, err, match", [
    ((4, 3), ValueError, r"successes must be in \[0, n\]"),
    ((-1, 3), ValueError, r"successes must be in \[0, n\]"),
    ((1, -2), ValueError, r"n must be >= 0"),
    ((0.5, 3), TypeError, r"successes must be integer counts"),
])
def test_bad_counts_are_refused(bad, err, match):
    for fn in (wilson, clopper_pearson):
        with pytest.raises(err, match=match):
            fn(*bad)


@pytest.mark.parametrize("confidence", [0.0, 1.0, 1.5, float("nan")])
def test_confidence_must_be_inside_0_1(confidence):
    for call in (lambda: wilson(1, 3, confidence), lambda: mean_interval([1.0, 2.0], confidence),
                 lambda: intervals.z_value(confidence)):
        with pytest.raises(ValueError, match="confidence must"):
            call()


def test_mean_interval_matches_scipy_t_and_skips_missing():
    x = [0.3, 0.1, None, 0.7, float("nan"), 0.2, float("inf"), 0.9]
    mean, lo, hi, n = mean_interval(x, 0.9)
    clean = np.array([0.3, 0.1, 0.7, 0.2, 0.9])
    ref = stats.t.interval(0.9, len(clean) - 1, loc=clean.mean(), scale=stats.sem(clean))
    assert n == 5 and mean == pytest.approx(clean.mean()) and (lo, hi) == pytest.approx(ref, abs=1e-12)


def test_mean_interval_edge_cases():
    assert mean_interval([2.0]) == (2.0, -math.inf, math.inf, 1)
    mean, lo, hi, n = mean_interval([None, float("nan")])
    assert math.isnan(mean) and (lo, hi, n) == (-math.inf, math.inf, 0)
    assert mean_interval([3.0, 3.0, 3.0])[1:3] == (3.0, 3.0)  # no spread: a point


def test_column_intervals_equal_the_one_column_function():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 5))
    A[2:, 1] = np.nan  # two seeds in column 1
    A[1:, 3] = np.nan  # one seed in column 3
    A[:, 4] = np.nan  # none in column 4
    mean, lo, hi, n = column_mean_intervals(A, 0.95)
    for j in range(5):
        ref = mean_interval(A[:, j], 0.95)
        np.testing.assert_allclose([mean[j], lo[j], hi[j], n[j]], ref, rtol=1e-12, equal_nan=True)


def test_every_interval_user_shares_the_module():
    """Reports, theory checks and figures use these functions, not copies with their own edge cases."""
    import figures.targets.netcommon as netcommon
    import synth.report as report
    import theory.stats as tstats

    assert report.wilson_interval is wilson and report.mean_interval is mean_interval
    assert tstats.wilson is wilson and tstats.clopper_pearson is clopper_pearson
    assert tstats.mean_ci([1.0]) == (1.0, -math.inf, math.inf)
    assert netcommon.column_mean_intervals is column_mean_intervals
