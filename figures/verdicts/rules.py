"""One verdict vocabulary for paper-versus-toolkit rows: published numbers, orderings of methods and the papers'
qualitative claims, tested over seeds so that the absence of evidence is never read as agreement.

Words (the head of every verdict; :data:`HEADS`):

* ``agrees`` -- shown by a test: a reproduced number *equivalent* to the published one (two one-sided tests, TOST,
  at ``alpha`` = 0.05 with Holm over the numbers of one table, within the margin :func:`declared_margin` fixes from
  the paper alone before any run: the larger of the margin at which a perfect reproduction at the paper's seed count
  agrees with probability :data:`POWER`, and the unit's practical floor :data:`UNIT_MARGINS`; where that margin
  is wider than the unit's informative limit, the row says the agreement holds only within the paper's own spread,
  :data:`WIDE`, and the headline counts it apart); an ordering the seeds make significantly in the paper's
  direction (Welch, Holm over the pairs of a cell); a pair the paper's own numbers do not separate (a paper tie)
  shown equivalent within the declared margin, at most the informative limit; a claim every test of which is
  significant in the claimed direction (or, for a claimed equality, equivalent);
* ``differs`` -- a significant difference (Welch, Holm over the numbers of one table or the pairs of one cell)
  that equivalence does not absorb: a number outside the margin, an opposite order, a paper tie the toolkit
  orders, a claim a test contradicts;
* ``not resolved`` -- neither: the row says at what n, and the smallest gap its seeds could detect;
* ``shown`` -- fewer than :data:`MIN_SEEDS` seeds (or trials) on a side: the values with their n, no verdict,
  never counted;
* ``stale`` -- stored runs of a protocol since corrected (:mod:`figures.verdicts.protocol`): shown, not counted
  until rerun;
* ``paper value suspect`` -- a published value that looks like a misprint (reason given): shown, not counted.

Other words, for rows that are no comparison: ``not comparable (...)`` (a reduced or stand-in run), ``not run
(...)``, ``finding (...)``, ``no published value``, and the theory checks' own words (:mod:`theory`).

Two samples' tests are Welch's; a reproduced mean against a published ``value ± pm`` uses the paper's ``±`` as the
standard deviation over its seeds (:class:`PaperNumber`: population or sample SD as the paper defines it; a paper
that does not say is read as a sample SD, the larger reading, so its spread is never understated).  A spread of
zero (identical seeds, or a published value without ``±``) is never taken at face value: it is replaced by the
resolution limit, half a unit of the paper's last printed digit, so no test returns p = 0 on a zero-width interval.
The operating characteristics (P(agrees) of a perfect reproduction, of one 3 margins off; P(differs) of a perfect
one) are simulated in :mod:`figures.verdicts.power` and checked in tests/test_verdict_power.py.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import combinations

import numpy as np

from .rows import Row

__all__ = ["AGREES", "ALPHA", "DIFFERS", "HEADS", "MIN_SEEDS", "NOT_RESOLVED", "SHOWN", "STALE", "SUSPECT",
           "UNIT_MARGINS", "WIDE", "NumberTest", "PaperNumber", "UnitMargin", "all_of", "best_claim", "compare_pair",
           "counted", "declared_margin", "detectable_gap", "equal_claim", "head", "holm", "holm_rows",
           "informative_margin", "judge_numbers", "level_claim", "number_test", "number_verdict", "power_margin",
           "number_pvalues", "one_sample", "order_claim", "ordering_rows", "paper_relation", "seed_values", "shown",
           "tost", "unit_margin", "welch", "wide"]

MIN_SEEDS = 3
ALPHA = 0.05
POWER = 0.8  # the power at which :func:`detectable_gap` states the smallest gap a row's seeds could detect


@dataclass(frozen=True)
class UnitMargin:
    """The practical-equivalence bounds of one unit of figures/published/tables.csv, declared before any run:
    ``floor`` (absolute) or ``relative`` (a fraction of the published value), the smallest gap worth calling a
    difference; ``cap`` (absolute) or ``cap_relative``, the largest margin within which "agrees" still says
    something; ``why``, the reason."""

    floor: float = 0.0
    relative: float = 0.0
    cap: float = math.inf
    cap_relative: float = math.inf
    why: str = ""

    def bounds(self, value: float) -> tuple[float, float]:
        return (max(self.floor, self.relative * abs(value)),
                min(self.cap, self.cap_relative * abs(value)) if self.cap_relative < math.inf else self.cap)


UNIT_MARGINS = {
    "test accuracy %": UnitMargin(1.0, cap=5.0, why="one point of test accuracy is below the gaps the papers rank "
                                  "methods by; an agreement looser than 5 points says nothing about a table"),
    "ARI": UnitMargin(0.05, cap=0.2, why="0.05 of ARI is about one client of 20 in another cluster; 0.2 is the "
                      "loosest agreement that still tells a recovered clustering from a partly wrong one"),
    "misclustering": UnitMargin(0.05, cap=0.2, why="one client in 20; above 0.2 a clustering is no longer recovered"),
    "percent": UnitMargin(5.0, cap=20.0, why="percentages of a final ARI or of rounds: 5 points floor, 20 cap"),
    "round": UnitMargin(1.0, cap=5.0, why="rounds are integers: one round floor; 5 rounds cap"),
    "test reconstruction loss (MSE)": UnitMargin(relative=0.05, cap_relative=0.25,
                                                 why="5 % of the published loss floor, 25 % cap"),
}

AGREES, DIFFERS, NOT_RESOLVED, SHOWN = "agrees", "differs", "not resolved", "shown"
STALE, SUSPECT = "stale", "paper value suspect"
WIDE = "only within the paper's own spread"  # an agreement whose margin is wider than the informative limit
HEADS = (AGREES, DIFFERS, NOT_RESOLVED, SHOWN, STALE, SUSPECT)


def head(verdict: str) -> str:
    """The verdict's word: the text before any bracket (``"not resolved at n = 3 (...)"`` -> ``not resolved``)."""
    text = verdict.split(" (")[0].strip()
    return NOT_RESOLVED if text.startswith(NOT_RESOLVED) else text


def counted(verdict: str) -> bool:
    """Whether a verdict is a test's outcome that the headline counts (agrees, differs, not resolved)."""
    return head(verdict) in (AGREES, DIFFERS, NOT_RESOLVED)


def shown(*sizes: int, min_seeds: int = MIN_SEEDS, unit: str = "seeds") -> str:
    """The verdict of a comparison with fewer than ``min_seeds`` on a side: values shown with their n, no verdict."""
    ns = ", ".join(map(str, sizes))
    return f"{SHOWN} (n = {ns}: no verdict below {min_seeds} {unit})"


# -- tests ---------------------------------------------------------------------------------------------------------

def seed_values(records: list[dict], key: str) -> list[float]:
    """The finite per-seed values of ``result[key]`` of the finished trials of one point."""
    out = []
    for r in records:
        if r.get("status") != "ok":
            continue
        res = r.get("result") or {}
        if "error" in res:
            continue
        v = res.get(key)
        if v is not None and not isinstance(v, bool) and math.isfinite(float(v)):
            out.append(float(v))
    return out


def paper_relation(a: float, pm_a: float | None, b: float, pm_b: float | None, decimals: int = 2,
                   n: int = MIN_SEEDS, pm_kind: str = "unstated") -> int:
    """+1 when the paper's own numbers put ``a`` significantly above ``b``, -1 below, 0 for a tie: Welch's test of
    the two published means over the paper's ``n`` seeds each (their ``±`` read as ``pm_kind``; a spread below half
    a unit of the last printed digit, or no ``±``, counts as that resolution), two-sided at :data:`ALPHA`."""
    if round(a, decimals) == round(b, decimals):
        return 0
    pa = PaperNumber(a, pm_a, decimals, n, pm_kind)
    pb = PaperNumber(b, pm_b, decimals, n, pm_kind)
    se, df = _welch_se(pa.spread ** 2, max(n, 2), pb.spread ** 2, max(n, 2))
    if _t_two_sided(a - b, se, df)[0] >= ALPHA:
        return 0
    return 1 if a > b else -1


def welch(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float, float]:
    """Welch's t-test of mean(x) = mean(y): (difference, 95 % interval low, high, two-sided p-value).

    Two constant samples give p = 1 when they are equal and p = 0 when they differ (no spread to test against).
    """
    x, y = np.asarray(x, float), np.asarray(y, float)
    d = float(x.mean() - y.mean())
    se, df = _welch_se(x.var(ddof=1), len(x), y.var(ddof=1), len(y))
    p, half = _t_two_sided(d, se, df)
    return d, d - half, d + half, p


def _welch_se(var_x: float, n_x: int, var_y: float, n_y: float) -> tuple[float, float]:
    """Standard error of a difference of two means and its Welch-Satterthwaite degrees of freedom (a side with
    ``n`` = inf or variance 0 adds nothing)."""
    vx, vy = var_x / n_x, (var_y / n_y if n_y != math.inf else 0.0)
    se2 = vx + vy
    if se2 == 0.0:
        return 0.0, math.inf
    den = (vx ** 2 / (n_x - 1) if vx else 0.0) + (vy ** 2 / (n_y - 1) if vy else 0.0)
    return math.sqrt(se2), se2 ** 2 / den


def _t_two_sided(d: float, se: float, df: float) -> tuple[float, float]:
    """(two-sided p-value of d = 0, half-width of the 95 % interval); se = 0 gives p = 1 at d = 0, else 0."""
    from scipy.stats import t as student_t

    if se == 0.0:
        return (1.0 if d == 0.0 else 0.0), 0.0
    return float(2 * student_t.sf(abs(d) / se, df)), float(student_t.ppf(1 - ALPHA / 2, df)) * se


def tost(d: float, se: float, df: float, margin: float) -> float:
    """Two one-sided tests of equivalence, ``|true difference| < margin``, from an estimate ``d`` with standard error
    ``se`` on ``df`` degrees of freedom: the larger of the two one-sided p-values (equivalent at ``alpha`` when it is
    below).  ``se`` = 0 gives 0 inside the margin and 1 outside."""
    from scipy.stats import t as student_t

    if se == 0.0:
        return 0.0 if abs(d) < margin else 1.0
    return float(max(student_t.sf((d + margin) / se, df), student_t.cdf((d - margin) / se, df)))


def detectable_gap(se: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true gap a two-sided test at ``alpha`` detects with probability ``power``, for a difference with
    standard error ``se`` on ``df`` degrees of freedom: ``(t_{1-alpha/2} + t_{power}) se``."""
    from scipy.stats import t as student_t

    if se == 0.0:
        return 0.0
    return float((student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df)) * se)


def one_sample(x: Sequence[float], level: float) -> tuple[float, float]:
    """Two-sided one-sample t-test of mean(x) = ``level``: (mean - level, p-value); a constant sample gives
    p = 1 at the level and p = 0 elsewhere (as :func:`welch`)."""
    x = np.asarray(x, float)
    d = float(x.mean() - level)
    se = float(x.std(ddof=1)) / math.sqrt(len(x))
    return d, _t_two_sided(d, se, len(x) - 1)[0]


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given); a NaN p-value takes no part and stays NaN."""
    if len(pvalues) == 0:
        return []
    return [float(v) for v in holm_rows(np.asarray(pvalues, dtype=float)[None, :])[0]]


def holm_rows(P: np.ndarray) -> np.ndarray:
    """Holm-Bonferroni over each row of ``P`` (families side by side, e.g. simulated tables): NaN p-values are
    no member of their family (so one undefined test never inflates the others) and stay NaN."""
    P = np.asarray(P, dtype=float)
    finite = ~np.isnan(P)
    m = finite.sum(1, keepdims=True)
    order = np.argsort(np.where(finite, P, np.inf), axis=1, kind="stable")
    S = np.take_along_axis(np.where(finite, P, np.nan), order, 1)
    adj = np.minimum(1.0, (m - np.arange(P.shape[1])[None, :]) * S)
    adj = np.fmax.accumulate(adj, axis=1)  # the running maximum; NaN (at the end of each row) never enters it
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, 1)
    return np.where(finite, out, np.nan)


# -- a reproduced number against a published one -------------------------------------------------------------------

@dataclass(frozen=True)
class PaperNumber:
    """A published ``value ± pm`` (``pm`` None when the paper gives none) printed at ``decimals`` decimals, the mean
    of ``n`` seeds, its ``±`` a ``pm_kind`` ("population SD", "sample SD" or "unstated"), in ``unit`` (a key of
    :data:`UNIT_MARGINS`), tested in a table (Holm family) of ``family`` numbers."""

    value: float
    pm: float | None
    decimals: int
    n: int
    pm_kind: str = "unstated"
    unit: str = ""
    family: int = 1
    paper_name: str = ""  # the paper and artifact the number is from: their ledger may declare the unit's margin
    artifact: str = ""

    @property
    def resolution(self) -> float:
        """Half a unit of the paper's last printed digit: the finest spread its printed numbers can show."""
        return 0.5 * 10 ** (-self.decimals)

    @property
    def sample_sd(self) -> float:
        """The paper's ``±`` as a sample standard deviation over its ``n`` seeds (0 without a ``±``)."""
        if self.pm is None:
            return 0.0
        if self.pm_kind == "population SD" and self.n > 1:
            return self.pm * math.sqrt(self.n / (self.n - 1))
        return self.pm

    @property
    def spread(self) -> float:
        """The paper's seed SD for the tests: :attr:`sample_sd`, never below :attr:`resolution`."""
        return max(self.sample_sd, self.resolution)

    @property
    def margin(self) -> float:
        """The declared equivalence margin (:func:`declared_margin`)."""
        return declared_margin(self)[0]

    def margin_text(self) -> str:
        m, why = declared_margin(self)
        return f"±{m:.{self.decimals + 1}g} ({why})" if m < 1e-3 else f"±{_round_sig(m)} ({why})"


def power_margin(paper: PaperNumber, n: int | None = None, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest margin within which TOST, at Holm's strictest level ``alpha / family``, finds a perfect
    reproduction of ``n`` seeds (default the paper's count, at least :data:`MIN_SEEDS`) equivalent with probability
    ``power``: seeds drawn around the paper's value with its spread, 4000 fixed draws.  A draw agrees at margin ``M``
    exactly when ``M > |gap| + se t_{1-alpha/family}(df)`` (its own Welch statistics), so the margin is the
    ``power`` quantile of that threshold over the draws."""
    n = max(paper.n, MIN_SEEDS) if n is None else n
    return _power_quantile(paper.spread, paper.resolution, n, max(paper.n, 2), max(paper.family, 1), alpha, power)


@functools.lru_cache(maxsize=4096)
def _power_quantile(spread: float, resolution: float, n: int, n_paper: int, family: int, alpha: float,
                    power: float) -> float:
    from scipy.stats import t as student_t

    x = spread * np.random.default_rng(20261207).standard_normal((4000, n))
    vx = np.maximum(x.std(axis=1, ddof=1), resolution) ** 2 / n
    vy = spread ** 2 / n_paper
    se = np.sqrt(vx + vy)
    df = (vx + vy) ** 2 / (vx ** 2 / (n - 1) + vy ** 2 / (n_paper - 1))
    threshold = np.abs(x.mean(axis=1)) + se * student_t.ppf(1 - alpha / family, df)
    return float(np.quantile(threshold, power))


def declared_margin(paper: PaperNumber) -> tuple[float, str]:
    """The equivalence margin of a published number and how it was fixed, from the paper alone (never from the
    toolkit's runs): the larger of :func:`power_margin` at the paper's seed count and the unit's floor
    (:data:`UNIT_MARGINS`), so that a perfect reproduction at the paper's seed count agrees with probability
    :data:`POWER`.  Where that margin is wider than the unit's informative limit (its declared cap: the loosest
    agreement that still tells a table's methods apart), the paper's own spread over its seeds is what limits the
    test; an agreement within it says so on its row (:data:`WIDE`) and is counted apart."""
    unit, where = unit_margin(paper)
    floor, cap = unit.bounds(paper.value)
    pm = power_margin(paper)
    margin = max(pm, floor, paper.resolution)
    n = max(paper.n, MIN_SEEDS)
    if margin > cap:
        why = (f"{POWER:.0%} power at the paper's {n} seeds, Holm over {paper.family}: the paper's own spread, wider "
               f"than the informative ±{_round_sig(cap)} of {where}")
    elif pm >= floor:
        why = f"{POWER:.0%} power at the paper's {n} seeds, Holm over {paper.family}"
    else:
        why = f"floor, {where}" if floor > 0 else "the paper's printed precision"
    return margin, why


def informative_margin(paper: PaperNumber) -> float:
    """The declared margin, at most the unit's informative limit (its cap): the width within which an agreement
    tells a table's methods apart.  A paper tie is judged within it, and the seeds a value needs
    (:func:`figures.verdicts.power.seeds_needed`) are those that bring the power margin down to it."""
    return min(declared_margin(paper)[0], unit_margin(paper)[0].bounds(paper.value)[1])


def wide(verdict: str) -> bool:
    """Whether a verdict is an agreement only within the paper's own spread (a margin wider than the unit's
    informative limit): it says the paper's seeds cannot tell the reproduction from the published value, not that
    they agree at the precision the table ranks methods by."""
    return verdict.startswith(f"{AGREES} ({WIDE}")


def unit_margin(paper: PaperNumber) -> tuple[UnitMargin, str]:
    """The bounds of ``paper``'s margin and where they are declared: its cell's ledger (``[margin."<unit>"]``,
    :func:`figures.verdicts.protocol.declared_margin_of`) or, for a table no ledger covers, the project's default
    for the unit (:data:`UNIT_MARGINS`)."""
    from .protocol import declared_margin_of

    found = declared_margin_of(paper.paper_name, paper.artifact, paper.unit) if paper.paper_name else None
    if found is not None:
        fields, file = found
        return UnitMargin(**dict(fields)), file
    return UNIT_MARGINS.get(paper.unit, UnitMargin()), "project default"


def _round_sig(x: float) -> str:
    return f"{x:.3g}"


@dataclass(frozen=True)
class NumberTest:
    """The tests of one reproduced mean (``n`` seeds) against a :class:`PaperNumber`: gap, its standard error and
    degrees of freedom, Welch's p-value of a difference, TOST's p-value of equivalence within ``margin``."""

    gap: float
    se: float
    df: float
    n: int
    margin: float
    p_differ: float
    p_equivalent: float

    @property
    def detectable(self) -> float:
        return detectable_gap(self.se, self.df)


def number_test(mean: float, sd: float | None, n: int, paper: PaperNumber) -> NumberTest:
    """Welch's test of ``mean`` (± ``sd`` over ``n`` seeds) against the paper's mean (± its seed SD over its
    seeds) and TOST within :attr:`PaperNumber.margin`.  Either spread is at least the paper's resolution (half a
    unit of its last printed digit): identical seeds or a value printed without ``±`` give no p = 0."""
    sd = 0.0 if sd is None or not math.isfinite(sd) else sd
    margin = paper.margin
    d, se, df, p_differ, p_equivalent = number_pvalues(np.array([mean]), np.array([sd]), n, paper, margin)
    return NumberTest(float(d[0]), float(se[0]), float(df[0]), n, margin, float(p_differ[0]),
                      float(p_equivalent[0]))


def number_pvalues(mean: np.ndarray, sd: np.ndarray, n: int, paper: PaperNumber, margin: float):
    """:func:`number_test`'s statistics for arrays of reproduced means and SDs (``n`` seeds each): ``(gap, se, df,
    Welch's two-sided p, TOST's p)``, each an array."""
    from scipy.stats import t as student_t

    n_p = max(paper.n, 2)
    vx = (np.maximum(sd, paper.resolution) ** 2 / n) if n >= 2 else np.zeros_like(sd)  # one seed: no own spread
    vy = paper.spread ** 2 / n_p
    se = np.sqrt(vx + vy)
    df = (vx + vy) ** 2 / ((vx ** 2 / (n - 1) if n >= 2 else 0.0) + vy ** 2 / (n_p - 1))
    d = mean - paper.value
    p_differ = 2 * student_t.sf(np.abs(d) / se, df)
    p_equivalent = np.maximum(student_t.sf((d + margin) / se, df), student_t.cdf((d - margin) / se, df))
    return d, se, df, p_differ, p_equivalent


def number_verdict(test: NumberTest, paper: PaperNumber, p_differ: float | None = None,
                   p_equivalent: float | None = None, alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> str:
    """The verdict of one reproduced number (module docstring); ``p_differ`` / ``p_equivalent`` are the
    Holm-adjusted p-values of its table (default: the test's own)."""
    if test.n < min_seeds:
        return shown(test.n, min_seeds=min_seeds)
    pd = test.p_differ if p_differ is None else p_differ
    pe = test.p_equivalent if p_equivalent is None else p_equivalent
    dec = max(paper.decimals, 2)
    gap = f"gap {test.gap:+.{dec}f}"
    margin = paper.margin_text()
    if pe < alpha:
        loose = f"{WIDE}: " if paper.margin > informative_margin(paper) else ""
        return f"{AGREES} ({loose}equivalent within {margin}: {gap}, TOST p = {pe:.3g}, n = {test.n})"
    if pd < alpha:
        return f"{DIFFERS} ({gap}, Welch p = {pd:.3g} with Holm over the table, outside {margin}, n = {test.n})"
    return (f"{NOT_RESOLVED} at n = {test.n} ({gap}: no significant difference (p = {pd:.3g}) and not shown within "
            f"{margin} (TOST p = {pe:.3g}); smallest gap detectable with {POWER:.0%} power: "
            f"{test.detectable:.{dec}f})")


def judge_numbers(rows: list[Row], alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> list[Row]:
    """Rows with :attr:`Row.paper_number` (a reproduced number at the paper's setting) re-judged with Holm over the
    counted numbers of each table (paper and artifact of the row's source): over the difference tests and,
    separately, over the equivalence tests; rows not counted (second protocols) are judged alone.  Other rows are
    returned unchanged."""
    families: dict[str, list[int]] = {}
    judged = [i for i, r in enumerate(rows) if r.paper_number is not None and r.stats is not None
              and head(r.verdict) not in (STALE, SUSPECT)]
    for i in judged:
        # a table's family is its counted numbers: a second-protocol row (not counted) is judged on its own
        if int(rows[i].stats[2]) >= min_seeds and rows[i].counted:
            families.setdefault(rows[i].source.split(":")[0], []).append(i)
    size = {i: len(idx) for idx in families.values() for i in idx}
    tests: dict[int, tuple[NumberTest, PaperNumber]] = {}
    for i in judged:
        r = rows[i]
        paper = replace(PaperNumber(*r.paper_number), family=size.get(i, 1))
        tests[i] = (number_test(r.stats[0], r.stats[1], int(r.stats[2]), paper), paper)
    out = list(rows)
    for i, (t, paper) in tests.items():
        out[i] = replace(rows[i], verdict=number_verdict(t, paper, alpha=alpha, min_seeds=min_seeds))
    for idx in families.values():
        pd = holm([tests[i][0].p_differ for i in idx])
        pe = holm([tests[i][0].p_equivalent for i in idx])
        for i, a, b in zip(idx, pd, pe, strict=True):
            out[i] = replace(rows[i], verdict=number_verdict(tests[i][0], tests[i][1], a, b, alpha, min_seeds))
    return out


# -- orderings of two methods -------------------------------------------------------------------------------------

def compare_pair(paper: int, x: Sequence[float], y: Sequence[float], p_adjusted: float | None,
                 alpha: float = ALPHA, min_seeds: int = MIN_SEEDS, p_equivalent: float | None = None,
                 margin: float | None = None) -> str:
    """The verdict of one pair: ``paper`` is :func:`paper_relation`'s +1/-1/0; ``x``, ``y`` the per-seed values
    (oriented so that larger is better); ``p_adjusted`` the pair's Holm-adjusted Welch p-value; for a paper tie,
    ``p_equivalent`` the Holm-adjusted TOST p-value of the gap within ``margin`` (the tie's width)."""
    if len(x) < min_seeds or len(y) < min_seeds:
        return shown(len(x), len(y), min_seeds=min_seeds)
    significant = p_adjusted is not None and p_adjusted < alpha
    sign = int(np.sign(np.mean(x) - np.mean(y)))
    if paper == 0:
        if p_equivalent is not None and p_equivalent < alpha:
            return f"{AGREES} (a tie in the paper, equivalent within ±{margin:.3g}: TOST p = {p_equivalent:.3g})"
        if significant:
            return f"{DIFFERS} (the paper ties, the toolkit orders)"
        return (f"{NOT_RESOLVED} (a tie in the paper; the seeds neither order the pair nor show it within "
                f"±{margin:.3g})" if margin is not None else f"{NOT_RESOLVED} (a tie in the paper)")
    if not significant:
        return f"{NOT_RESOLVED} (no significant order after Holm over the cell's pairs)"
    return f"{AGREES} (same order)" if sign == paper else f"{DIFFERS} (opposite order)"


def ordering_rows(cell: str, published: dict, samples: dict[str, Sequence[float]], scale: float = 1.0,
                  higher_better: bool = True, reduced: str = "", alpha: float = ALPHA,
                  min_seeds: int = MIN_SEEDS, trained_above: float | None = None) -> list[Row]:
    """One row per pair of methods of ``cell`` that have both a published value and reproduced seeds.

    ``published`` maps method -> :class:`figures.verdicts.published.Published`; ``samples`` method -> per-seed values
    (in the run's units; ``scale`` converts to the paper's, e.g. 100 for accuracies in %).  ``reduced`` says what
    the run changes from the paper's setting (shown in each row's note).  Holm-Bonferroni runs over the pairs
    of this cell (difference tests; and, for the paper's ties, equivalence tests within the tie's width).
    ``trained_above`` (run units): where no method's mean exceeds it, the models are barely trained, and every
    row of the cell is ``not resolved`` -- a tie of untrained models is no agreement.
    """
    names = [a for a in published if published[a] is not None and a in samples]
    pairs = list(combinations(names, 2))
    sgn = 1.0 if higher_better else -1.0
    stats, rel, margins, equiv = {}, {}, {}, {}
    for a, b in pairs:
        pa, pb = published[a], published[b]
        dec = max(pa.decimals, pb.decimals, 1)
        na, kind = pa.paper_number()[3], pa.paper_number()[4]
        rel[(a, b)] = paper_relation(sgn * pa.value, pa.pm, sgn * pb.value, pb.pm, dec, na, kind)
        # a tie agrees only within the declared margin of the two numbers (the larger, at most the informative limit),
        # never the ±'s width
        margins[(a, b)] = max(informative_margin(PaperNumber(*pa.paper_number())),
                              informative_margin(PaperNumber(*pb.paper_number())))
        xa = [scale * v for v in samples[a]]
        xb = [scale * v for v in samples[b]]
        stats[(a, b)] = welch(xa, xb) if len(xa) >= 2 and len(xb) >= 2 else None
        if stats[(a, b)] is not None and rel[(a, b)] == 0:
            x, y = np.asarray(xa), np.asarray(xb)
            se, df = _welch_se(x.var(ddof=1), len(x), y.var(ddof=1), len(y))
            equiv[(a, b)] = tost(stats[(a, b)][0], se, df, margins[(a, b)])
    testable = [pr for pr in pairs if stats[pr] is not None]
    adj = dict(zip(testable, holm([stats[pr][3] for pr in testable]), strict=True))
    adj_eq = dict(zip(equiv, holm(list(equiv.values())), strict=True))
    means = [sum(samples[a]) / len(samples[a]) for a in names if len(samples[a])]
    untrained = (trained_above is not None and bool(means) and max(means) <= trained_above)
    rows = []
    for a, b in pairs:
        pa, pb = published[a], published[b]
        dec = max(pa.decimals, pb.decimals, 1)
        word = {1: ">", -1: "<", 0: "≈"}[rel[(a, b)] * (1 if higher_better else -1)]
        ptext = f"{a} {word} {b} ({_pm(pa.value, pa.pm, dec)} vs {_pm(pb.value, pb.pm, dec)}; gap " \
                f"{pa.value - pb.value:+.{dec}f})"
        xa = [sgn * scale * v for v in samples[a]]
        xb = [sgn * scale * v for v in samples[b]]
        st = stats[(a, b)]
        verdict = compare_pair(rel[(a, b)], xa, xb, adj.get((a, b)), alpha, min_seeds, adj_eq.get((a, b)),
                               margins[(a, b)])
        if untrained and head(verdict) != SHOWN:
            verdict = (f"{NOT_RESOLVED} (models barely trained: best mean {scale * max(means):.1f} <= "
                       f"{scale * trained_above:.1f})")
        if st is None:
            rep = f"n = {len(xa)}, {len(xb)} seeds"
        else:
            d, lo, hi, p = st
            rep = (f"gap {d:+.{dec}f} [{lo:+.{dec}f}, {hi:+.{dec}f}] (95% Welch CI, unadjusted), p = {p:.3g} "
                   f"(Holm {adj[(a, b)]:.3g}), n = {len(xa)}, {len(xb)}")
        rows.append(Row(f"{cell}: {a} vs {b} (ordering)", ptext, rep, "—", verdict,
                        f"{pa.source()}; {pb.source()}", reduced,
                        compared=f"{cell}/{a};{cell}/{b}"))
    return rows


def _pm(v: float, pm: float | None, dec: int) -> str:
    return f"{v:.{dec}f}" + (f" ± {pm:.{dec}f}" if pm is not None else "")


# -- the papers' qualitative claims -------------------------------------------------------------------------------

def _short(samples: dict[str, Sequence[float]], names, min_seeds: int) -> str | None:
    names = list(names)
    if not names:  # a claim over nothing is no evidence for it
        return f"{SHOWN} (nothing to test: no case or pair has seeds)"
    few = [n for n in dict.fromkeys(names) if len(samples.get(n, ())) < min_seeds]
    if not few:
        return None
    return (f"{SHOWN} (fewer than {min_seeds} seeds: "
            + ", ".join(f"{n} {len(samples.get(n, ()))}" for n in few) + "; no verdict)")


def order_claim(samples: dict[str, Sequence[float]], pairs: Sequence[tuple[str, str]], higher_better: bool = True,
                alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> str:
    """A claim that in every pair ``(a, b)`` method ``a`` is better than ``b`` (per-seed ``samples``): Welch per
    pair, Holm over the pairs (module docstring)."""
    short = _short(samples, [m for pr in pairs for m in pr], min_seeds)
    if short:
        return short
    sgn = 1.0 if higher_better else -1.0
    tests = [welch(samples[a], samples[b]) for a, b in pairs]
    adj = holm([t[3] for t in tests])
    wrong = [f"{b} ahead of {a}" for (a, b), t, p in zip(pairs, tests, adj, strict=True) if p < alpha and
             sgn * t[0] < 0]
    if wrong:
        return f"{DIFFERS} ({'; '.join(wrong)})"
    if all(p < alpha and sgn * t[0] > 0 for t, p in zip(tests, adj, strict=True)):
        return AGREES
    return f"{NOT_RESOLVED} (no significant order after Holm)"


def best_claim(samples: dict[str, Sequence[float]], best: Sequence[str], higher_better: bool = True,
               alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> str:
    """A claim that the methods ``best`` (the paper's best, ties included) are ahead of every other method of
    ``samples``: :func:`order_claim` over every (best, other) pair."""
    others = [m for m in samples if m not in best]
    return order_claim(samples, [(b, o) for b in best for o in others], higher_better, alpha, min_seeds)


def level_claim(samples: dict[str, Sequence[float]], level: float, below: bool, alpha: float = ALPHA,
                min_seeds: int = MIN_SEEDS) -> str:
    """A claim that the mean of every case of ``samples`` lies below (``below``) or above ``level``: one-sample
    t-tests, Holm over the cases."""
    short = _short(samples, samples, min_seeds)
    if short:
        return short
    tests = {k: one_sample(v, level) for k, v in samples.items()}
    adj = dict(zip(tests, holm([p for _, p in tests.values()]), strict=True))
    claimed = -1.0 if below else 1.0
    wrong = [k for k, (d, _) in tests.items() if adj[k] < alpha and claimed * d < 0]
    if wrong:
        return f"{DIFFERS} ({', '.join(map(str, wrong))} {'above' if below else 'below'} {level:g})"
    if all(adj[k] < alpha and claimed * d > 0 for k, (d, _) in tests.items()):
        return AGREES
    return f"{NOT_RESOLVED} (intervals include {level:g} after Holm)"


def equal_claim(samples: dict[str, Sequence[float]], level: float, margin: float, alpha: float = ALPHA,
                min_seeds: int = MIN_SEEDS) -> str:
    """A claim that the mean of every case of ``samples`` equals ``level``, to within a stated practical ``margin``:
    it agrees when every case is shown equivalent (one-sample TOST, Holm over the cases), differs when a case
    differs significantly from the level beyond what equivalence absorbs, and is not resolved otherwise."""
    short = _short(samples, samples, min_seeds)
    if short:
        return short
    eq, diff = {}, {}
    for k, v in samples.items():
        x = np.asarray(v, float)
        d = float(x.mean() - level)
        se = float(x.std(ddof=1)) / math.sqrt(len(x))
        eq[k] = tost(d, se, len(x) - 1, margin)
        diff[k] = _t_two_sided(d, se, len(x) - 1)[0]
    adj_eq = dict(zip(eq, holm(list(eq.values())), strict=True))
    adj_diff = dict(zip(diff, holm(list(diff.values())), strict=True))
    if all(p < alpha for p in adj_eq.values()):
        return f"{AGREES} (every case within ±{margin:g} of {level:g}: TOST with Holm)"
    wrong = [k for k in samples if adj_diff[k] < alpha and adj_eq[k] >= alpha]
    if wrong:
        return f"{DIFFERS} ({', '.join(map(str, wrong))} differ from {level:g} beyond ±{margin:g})"
    return f"{NOT_RESOLVED} (not shown within ±{margin:g} of {level:g}, nor different)"


def all_of(*verdicts: str) -> str:
    """One verdict for a claim made of parts: the first part that differs, else agrees when every part does,
    else the first part that does not agree; no part at all is no verdict."""
    if not verdicts:
        return f"{SHOWN} (nothing to test)"
    for v in verdicts:
        if head(v) == DIFFERS:
            return v
    if all(head(v) == AGREES for v in verdicts):
        return AGREES
    return next(v for v in verdicts if head(v) != AGREES)
