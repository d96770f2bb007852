"""The statistics behind every verdict: agreement needs an equivalence test, never a non-significant difference;
fewer than 3 seeds give no verdict; the paper's ± is read as the paper defines it; each published value has one
counted verdict."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from figures.verdicts.compare import numeric_row
from figures.verdicts.published import Published, lookup
from figures.verdicts.rules import (
    AGREES,
    DIFFERS,
    NOT_RESOLVED,
    SHOWN,
    PaperNumber,
    compare_pair,
    head,
    judge_numbers,
    number_test,
    number_verdict,
    tost,
)

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def _pub(value: str, pm: str | None, paper: str = "SR-FCA") -> Published:
    return Published(paper, "Table 1", "", "A", "col", value, pm or "", "%", "000", 1, 0, "pm", "")


@settings(derandomize=True, max_examples=300, deadline=None)
@given(st.lists(st.floats(-3.0, 3.0), min_size=3, max_size=3), st.floats(0.0, 4.0))
def test_a_five_point_gap_is_never_agreement(noise, spread):
    """3 seeds 5 points from a paper's 80.0 ± 0.3: whatever their spread, the row is never agreement (only a
    difference or not resolved); deterministic, so no false failures."""
    seeds = [85.0 + spread * z for z in noise]
    mean = float(np.mean(seeds))
    if abs(mean - 80.0) < 0.35:  # the draw moved the mean inside the margin: not the case under test
        return
    row = judge_numbers([numeric_row("x", _pub("80.0", "0.3"), mean, float(np.std(seeds, ddof=1)), 3)])[0]
    assert head(row.verdict) in (DIFFERS, NOT_RESOLVED), row.verdict


def test_five_points_off_with_a_wide_spread_is_not_resolved_and_says_what_it_could_detect():
    row = numeric_row("x", _pub("80.0", "0.3"), 85.0, 6.0, 3)
    assert row.verdict.startswith("not resolved at n = 3") and "smallest gap detectable" in row.verdict
    tight = numeric_row("x", _pub("80.0", "0.3"), 85.0, 0.2, 3)
    assert tight.verdict.startswith("differs")


@pytest.mark.parametrize("n", [0, 1, 2])
def test_fewer_than_three_seeds_carry_no_verdict(n):
    row = numeric_row("x", _pub("80.0", "0.3"), 80.0, 0.0 if n > 1 else None, n)
    assert head(row.verdict) in (SHOWN, "not run"), row.verdict
    assert compare_pair(1, [1.0] * n, [0.0] * 3, 1e-9).startswith("shown")


def test_agreement_is_equivalence_within_the_margin():
    paper = PaperNumber(80.0, 0.3, 1, 5, "unstated")
    close = number_test(80.05, 0.02, 10, paper)
    assert close.p_equivalent < 0.05 and number_verdict(close, paper).startswith(AGREES)
    # the same mean with a spread that cannot exclude a gap of the margin: not resolved, not agreement
    vague = number_test(80.05, 1.0, 3, paper)
    assert vague.p_differ > 0.05 and vague.p_equivalent > 0.05
    assert number_verdict(vague, paper).startswith(NOT_RESOLVED)


def test_tost_false_agreement_rate_at_the_margin():
    """Seeds drawn with a true gap exactly at the margin: TOST calls them equivalent at most alpha = 5 % of the time.
    4000 draws with a fixed seed; the bound checked is 5 % + 4 binomial SDs (0.069): a false failure has probability
    below 1e-4 even if the true rate were exactly 5 %."""
    rng = np.random.default_rng(20261128)
    margin, n = 1.0, 5
    hits = 0
    for _ in range(4000):
        x = rng.normal(margin, 1.0, n)
        se = x.std(ddof=1) / math.sqrt(n)
        hits += tost(float(x.mean()), se, n - 1, margin) < 0.05
    assert hits / 4000 <= 0.05 + 4 * math.sqrt(0.05 * 0.95 / 4000)


def test_a_paper_tie_agrees_only_when_shown_equivalent():
    x, y = [0.90, 0.95, 0.85], [0.70, 0.99, 0.80]  # overlapping, no significant order
    assert compare_pair(0, x, y, 0.6).startswith(NOT_RESOLVED)
    assert compare_pair(0, x, y, 0.6, p_equivalent=0.3, margin=0.01).startswith(NOT_RESOLVED)
    assert compare_pair(0, x, x, 1.0, p_equivalent=0.0, margin=0.01).startswith(AGREES)


def test_the_papers_pm_is_read_as_the_paper_defines_it():
    # CLoVE Table 11: 34.0 ± 46.7 is the population SD of 1, 1, 100 (the sample SD would be 57.2)
    assert math.isclose(float(np.std([1, 1, 100])), 46.67, abs_tol=0.01)
    pop = PaperNumber(34.0, 46.7, 1, 3, "population SD")
    assert math.isclose(pop.sample_sd, 46.7 * math.sqrt(1.5))
    assert lookup("CLoVE", "Table 11", "FeSEM", "Amazon: first round when ARI >= 90%").paper_number()[4] == \
        "population SD"
    assert PaperNumber(34.0, 46.7, 1, 3, "unstated").sample_sd == 46.7  # unstated: read as a sample SD


def test_the_ledgers_and_the_verdicts_read_the_papers_pm_alike():
    from figures.verdicts.protocol import load_ledgers
    from figures.verdicts.published import PAPER_SEEDS, PM_KIND

    for ledger in load_ledgers().values():
        if ledger.kind == "synthetic":  # success probabilities over trials: no ± to read
            continue
        assert PM_KIND[ledger.paper] == ledger.pm, ledger.path.name
        assert PAPER_SEEDS[ledger.paper] == ledger.paper_seeds, ledger.path.name


def test_holm_over_a_table_never_turns_a_difference_into_agreement():
    rows = [numeric_row(f"x{i}", _pub("80.0", "0.3"), 80.0 + gap, 0.1, 3) for i, gap in enumerate((0.0, 2.0, 6.0))]
    judged = judge_numbers(rows)
    assert [head(r.verdict) for r in judged][1:] == [DIFFERS, DIFFERS]


@pytest.mark.skipif(not (DATA / "mnist").is_dir(), reason="needs the benchmark data directory")
def test_the_stored_paper_scale_rows_count_each_published_value_once():
    from figures.campaign.measured import campaign_rows

    rows, _ = campaign_rows(data_dir=str(DATA))
    counted: dict[str, list[str]] = {}
    for r in rows:
        if r.counted and (r.paper_number is not None or head(r.verdict) in ("stale", "paper value suspect")):
            counted.setdefault(r.source, []).append(r.verdict)
    assert counted and all(len(v) == 1 for v in counted.values()), {k: v for k, v in counted.items() if len(v) > 1}
    # no row with fewer than 3 seeds carries a verdict
    for r in rows:
        if r.stats is not None and r.stats[2] < 3 and r.paper_number is not None:
            assert head(r.verdict) == SHOWN, r.item
    # CLoVE Table 5's FMNIST Local-only 0.170 is flagged, never an "outside" count
    suspect = [r for r in rows if "Table 5: FMNIST / Local-only" in r.item]
    assert suspect and head(suspect[0].verdict) == "paper value suspect"
