"""The number verdicts' operating characteristics, simulated for every published value of figures/published/tables.csv
(a superset of the stored cells' values): a perfect reproduction at the paper's seed count agrees with probability
>= 0.8 wherever the declared margin is not capped, is called 'differs' with probability <= 0.05, and one 3 declared
margins off agrees with probability <= 0.05 -- with Holm over each table, as the report judges it.

The simulations use fixed seeds (deterministic).  Each estimate is a mean of 2000 simulated tables, so the bounds are
checked with 3 binomial standard errors of room (0.8 - 0.027, 0.05 + 0.015): were the random streams to change, a
value whose true probability sits exactly on its bound would fail with probability about 0.13 % per value.
"""

from __future__ import annotations

import math

import pytest

from figures.verdicts.compare import numeric_row
from figures.verdicts.power import DRAWS, characteristics
from figures.verdicts.published import lookup, tables
from figures.verdicts.rules import AGREES, PaperNumber, declared_margin, head, judge_numbers

ROOM_80 = 3 * math.sqrt(0.8 * 0.2 / DRAWS)
ROOM_05 = 3 * math.sqrt(0.05 * 0.95 / DRAWS)


@pytest.fixture(scope="module")
def rows():
    return characteristics(tables())


def test_every_value_has_a_declared_margin_and_a_row(rows):
    assert len(rows) == len(tables()) > 600
    assert all(r.margin > 0 and r.why for r in rows)


def test_a_perfect_reproduction_agrees_with_probability_at_least_080(rows):
    uncapped = [r for r in rows if "capped" not in r.why]
    assert len(uncapped) > 400
    low = [(r.source, r.agree_paper_n) for r in uncapped if r.agree_paper_n < 0.8 - ROOM_80]
    assert not low, low[:5]


def test_a_perfect_reproduction_differs_with_probability_at_most_005(rows):
    high = [(r.source, r.differ_paper_n) for r in rows if r.differ_paper_n > 0.05 + ROOM_05]
    assert not high, high[:5]


def test_three_margins_off_agrees_with_probability_at_most_005(rows):
    high = [(r.source, r.agree_3_margins_off) for r in rows if r.agree_3_margins_off > 0.05 + ROOM_05]
    assert not high, high[:5]


def test_capped_values_say_so_and_how_many_seeds_they_need(rows):
    capped = [r for r in rows if "capped" in r.why]
    assert capped  # CLoVE's wide ± over 3 seeds
    assert all(r.margin <= {"test accuracy %": 5.0, "ARI": 0.2}.get(r.unit, math.inf) for r in capped)


def _perfect(pub, n, sd=None):
    paper = PaperNumber(*pub.paper_number())
    return numeric_row(pub.row, pub, pub.value / 100 if "%" in pub.unit else pub.value,
                       (paper.sample_sd if sd is None else sd) / (100 if "%" in pub.unit else 1), n,
                       100.0 if "%" in pub.unit else 1.0)


def test_a_perfect_reproduction_agrees_in_the_report():
    """SR-FCA Table 1 reproduced exactly (1000 seeds, zero spread; and 5 seeds at the paper's spread): every number
    the margin does not cap agrees, judged as the report judges a table (Holm over it)."""
    pubs = [p for p in tables() if p.paper == "SR-FCA" and p.artifact == "Table 1"]
    for n, sd in ((1000, 0.0), (5, None)):
        judged = judge_numbers([_perfect(p, n, sd) for p in pubs])
        for p, r in zip(pubs, judged, strict=True):
            if "capped" in declared_margin(PaperNumber(*p.paper_number()))[1]:
                continue
            assert head(r.verdict) == AGREES, (p.source(), r.verdict)


def test_a_gap_beyond_the_margin_never_agrees():
    pub = lookup("SR-FCA", "Table 1", "SR-FCA", "MNIST (rotated)")
    margin = PaperNumber(*pub.paper_number()).margin
    row = numeric_row("x", pub, (pub.value + 1.5 * margin) / 100, 0.0001, 1000, 100.0)
    assert head(judge_numbers([row])[0].verdict) != AGREES
