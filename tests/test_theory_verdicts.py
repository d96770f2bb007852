"""Verdicts and Monte Carlo intervals of the result objects."""

from __future__ import annotations

import pytest

from theory import get_result


def test_an_estimate_above_an_upper_bound_is_never_holds():
    # clove-thm-a.9 in the quick report: estimate 0.38, Wilson interval [0.259, 0.518], bound 0.317
    res = get_result("clove-thm-a.9")
    assert res.compare(0.38, 0.317, 0.259, 0.518) == "inconclusive"
    assert res.compare(0.38, 0.317, 0.33, 0.518) == "violated"
    assert res.compare(0.30, 0.317, 0.2, 0.4) == "holds"


def test_an_estimate_below_a_lower_bound_is_never_holds():
    res = get_result("clove-lemma-a.17")
    assert res.compare(1.3, 1.414, 1.2, 1.5) == "inconclusive"
    assert res.compare(1.3, 1.414, 1.2, 1.35) == "violated"


def test_intervals_stay_in_the_range_of_the_quantity():
    # srfca-thm4.14 (a norm, quantile estimate from 20 trials) reported a lower end of -inf
    chk = get_result("srfca-thm4.14").check({"n": 50}, trials=20, seed=0)
    assert chk.ci_low >= 0.0
    chk = get_result("clove-lemma-a.16").check({"n": 10}, trials=100, seed=0)
    assert 0.0 <= chk.ci_low <= chk.ci_high <= 1.0


@pytest.mark.parametrize("name", ["clove-lemma-a.6", "srfca-prop4.1"])
def test_nonnegative_quantities_have_nonnegative_intervals(name):
    chk = get_result(name).check({}, trials=2, seed=0)
    assert chk.ci_low is None or chk.ci_low >= 0.0


def test_a_fraction_mean_interval_stays_in_zero_one():
    # The head-to-head row "CLoVE from a random Gaussian initialisation" read "misclustering 0.042 [-0.065, 0.149]":
    # a Student-t interval of per-trial misclustering fractions (mostly 0, one 1/3) reaches below 0.  On the old
    # main figures.targets.head_to_head._summ gave that negative lower end; the interval is now clipped to [0, 1].
    from figures.targets.head_to_head import _summ

    values = [0.0] * 7 + [1 / 3]
    recs = [{"status": "ok", "result": {"CLoVE": {"misclustering_matched": v, "ari": 1.0 - v}}} for v in values]
    mis = _summ(recs, "CLoVE", "misclustering_matched")
    assert mis.mean == pytest.approx(1 / 24)
    assert mis["lo"] == 0.0 and 0.0 < mis["hi"] < 1.0
    ari = _summ(recs, "CLoVE", "ari")
    assert ari["hi"] == 1.0 and ari["lo"] < 1.0
