"""One reading of the papers' "x << y" for every result, and a margin for every assumption of every check."""

from __future__ import annotations

import pytest

from theory import get_result
from theory.results import REGISTRY
from theory.results.common import MUCH_LESS

get_result("ifca-lemma1")  # registers every result
NAMES = sorted(REGISTRY)


def _much_less_results():
    out = []
    for name in NAMES:
        res = REGISTRY[name]
        keys = res.assumptions(res.resolve({})[0]).keys()
        if any("<<" in k or ">>" in k for k in keys):
            out.append(name)
    return out


def test_every_much_less_hypothesis_has_the_one_flag():
    names = _much_less_results()
    assert len(names) >= 8, names
    for name in names:
        assert REGISTRY[name].params.get("much_less") is MUCH_LESS, name


def test_sigma_much_less_than_delta_over_4_follows_the_flag():
    # the old reading was sigma <= Delta/4 whatever --much-less said: sigma = 0.2, Delta = 1 passed
    res = get_result("clove-lemma-a.2")
    key = "sigma << Delta/4"
    strict = res.check({"sigma": 0.2, "delta": 1.0}, trials=0)
    loose = res.check({"sigma": 0.2, "delta": 1.0, "much_less": 1.0}, trials=0)
    assert strict.assumptions[key] is False and loose.assumptions[key] is True
    assert strict.assumption_margins[key]["margin"] == pytest.approx(0.1 * 0.25 - 0.2)
    assert loose.assumption_margins[key]["margin"] == pytest.approx(0.25 - 0.2)
    # "sigma << 1" is read by the same rule
    assert strict.assumption_margins["sigma << 1"]["rhs"] == pytest.approx(0.1)
    assert loose.assumption_margins["sigma << 1"]["rhs"] == pytest.approx(1.0)


@pytest.mark.parametrize("name", ["ifca-thm1", "ifca-thm2", "srfca-lemma4.6", "srfca-thm4.8", "clove-thm-a.9",
                                  "clove-lemma-a.16", "clove-thm4.1", "clove-thm4.2"])
def test_every_assumption_shows_its_margin(name):
    chk = get_result(name).check({}, trials=0)
    assert set(chk.assumption_margins) == set(chk.assumptions)
    numeric = 0
    for key, ok in chk.assumptions.items():
        m = chk.assumption_margins[key]
        if m is None:  # true by construction of the instance
            assert ok, key
            continue
        numeric += 1
        assert (m["margin"] >= 0) == ok or (m["relation"] in ("<", ">", "in") and m["margin"] == 0 and not ok), key
    assert numeric >= 1


def test_the_report_lists_failed_assumptions_with_their_margins():
    from figures.targets.theory_figs import _with_margin

    chk = get_result("clove-lemma-a.2").check({"sigma": 0.2}, trials=0).to_dict()
    key = "sigma << Delta/4"
    assert not chk["assumptions"][key]
    assert _with_margin(key, chk["assumption_margins"][key]) == f"{key} (margin {0.1 * 0.25 - 0.2:+.3g})"
    assert _with_margin("by construction", None) == "by construction"
