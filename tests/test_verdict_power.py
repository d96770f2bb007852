"""The number verdicts' operating characteristics, simulated for every published value of figures/published/tables.csv
(a superset of the stored cells' values): a perfect reproduction at the paper's seed count agrees with probability
>= 0.8, is called 'differs' with probability <= 0.05, and one 3 declared margins off agrees with probability <= 0.05
-- with Holm over each table, as the report judges it.  Where the margin this needs is wider than the unit's
informative limit, the agreement says so on its row and the headline counts it apart.

The simulations use fixed seeds (deterministic).  Each estimate is a mean of 2000 simulated tables, so the bounds are
checked with 3 binomial standard errors of room (0.8 - 0.027, 0.05 + 0.015): were the random streams to change, a
value whose true probability sits exactly on its bound would fail with probability about 0.13 % per value.
"""

from __future__ import annotations

import math

import pytest

from figures.report.headline import LOOSE, row_record, tally, verdict_sentences
from figures.verdicts.compare import numeric_row
from figures.verdicts.power import DRAWS, characteristics
from figures.verdicts.published import lookup, tables
from figures.verdicts.rules import AGREES, PaperNumber, head, informative_margin, judge_numbers, wide

ROOM_80 = 3 * math.sqrt(0.8 * 0.2 / DRAWS)
ROOM_05 = 3 * math.sqrt(0.05 * 0.95 / DRAWS)


@pytest.fixture(scope="module")
def rows():
    return characteristics(tables())


def test_every_value_has_a_declared_margin_and_a_row(rows):
    assert len(rows) == len(tables()) > 600
    assert all(r.margin > 0 and r.why for r in rows)


def test_a_perfect_reproduction_agrees_with_probability_at_least_080(rows):
    low = [(r.source, r.agree_paper_n) for r in rows if r.agree_paper_n < 0.8 - ROOM_80]
    assert not low, low[:5]


def test_a_perfect_reproduction_differs_with_probability_at_most_005(rows):
    high = [(r.source, r.differ_paper_n) for r in rows if r.differ_paper_n > 0.05 + ROOM_05]
    assert not high, high[:5]


def test_three_margins_off_agrees_with_probability_at_most_005(rows):
    high = [(r.source, r.agree_3_margins_off) for r in rows if r.agree_3_margins_off > 0.05 + ROOM_05]
    assert not high, high[:5]


def test_margins_beyond_the_informative_limit_say_so_and_how_many_seeds_bring_them_within_it(rows):
    loose = [r for r in rows if r.margin > r.informative]
    assert loose  # CLoVE's wide ± over 3 seeds
    assert all("the paper's own spread, wider than the informative" in r.why for r in loose)
    assert all(r.informative <= {"test accuracy %": 5.0, "ARI": 0.2}.get(r.unit, math.inf) for r in loose)
    assert all(r.margin == r.informative and "informative" not in r.why for r in rows if r not in loose)
    # the seeds column counts toward the informative limit: beyond the paper's count, or never
    assert all(r.seeds_needed is None or r.seeds_needed > 3 for r in loose if "(paper 004" in r.source)


def _perfect(pub, n, sd=None):
    paper = PaperNumber(*pub.paper_number())
    return numeric_row(pub.row, pub, pub.value / 100 if "%" in pub.unit else pub.value,
                       (paper.sample_sd if sd is None else sd) / (100 if "%" in pub.unit else 1), n,
                       100.0 if "%" in pub.unit else 1.0)


def test_a_perfect_reproduction_agrees_in_the_report():
    """SR-FCA Table 1 and CLoVE Tables 10 and 11 reproduced exactly (1000 seeds, zero spread) and at the paper's
    seeds with its spread (the seeds equal to the paper's mean and SD: a perfect reproduction of what the paper
    reports): every number agrees, judged as the report judges a table (Holm over it); a margin beyond the unit's
    informative limit says so on the row."""
    for paper, artifact in (("SR-FCA", "Table 1"), ("CLoVE", "Table 10"), ("CLoVE", "Table 11")):
        pubs = [p for p in tables() if p.paper == paper and p.artifact == artifact]
        n_paper = max(PaperNumber(*pubs[0].paper_number()).n, 3)
        for n, sd in ((1000, 0.0), (n_paper, None)):
            judged = judge_numbers([_perfect(p, n, sd) for p in pubs])
            for p, r in zip(pubs, judged, strict=True):
                assert head(r.verdict) == AGREES, (p.source(), r.verdict)
                paper_number = PaperNumber(*p.paper_number())
                assert wide(r.verdict) == (paper_number.margin > informative_margin(paper_number)), r.verdict


def test_an_agreement_only_within_the_papers_spread_is_counted_apart():
    pub = lookup("CLoVE", "Table 11", "FeSEM", "Amazon: first round when ARI >= 90%")
    row = _perfect(pub, 3)
    judged = judge_numbers([row])[0]
    assert wide(judged.verdict)
    record = {**row_record(judged), "protocol": "same"}
    t = tally([("t", "CLoVE", "stored paper-scale runs", [record])])[("CLoVE", "stored paper-scale runs")]
    assert t.at("same")[AGREES] == 0 and t.at("same")[LOOSE] == 1
    assert "(+1 only within the paper's own spread)" in verdict_sentences({("CLoVE", "stored paper-scale runs"): t})[0]


def test_a_gap_beyond_the_margin_never_agrees():
    pub = lookup("SR-FCA", "Table 1", "SR-FCA", "MNIST (rotated)")
    margin = PaperNumber(*pub.paper_number()).margin
    row = numeric_row("x", pub, (pub.value + 1.5 * margin) / 100, 0.0001, 1000, 100.0)
    assert head(judge_numbers([row])[0].verdict) != AGREES
