"""Orderings and gaps of methods, paper versus toolkit, for runs that are reduced from the paper's setting.

A reduced run (fewer clients, rounds or seeds than the paper) cannot be held to the paper's ``±``; what it
can test is the paper's *ordering*: for every pair of methods of one cell (a data set and a mixing), does the
paper put A above B, B above A, or report a tie, and does the toolkit find the same over its seeds?

* the paper's pair is a **tie** when the published intervals ``value ± pm`` touch (or, without ``±``, the
  two values are equal at the paper's precision), else an **order**;
* the toolkit's pair is **ordered** when Welch's two-sided t-test on the per-seed values rejects equal means
  at level ``alpha`` = 0.05 after the Holm-Bonferroni correction over the pairs of the cell, else its
  95 % intervals are taken to **overlap**.

Verdicts: ``agrees`` (same significant order; or a paper tie and overlapping reproduced intervals),
``disagrees`` (significant opposite order; or a paper tie and a significant reproduced order),
``inconclusive`` (a paper order and overlapping reproduced intervals; or fewer than ``min_seeds`` = 3
finished seeds of either method).  Every row also shows the reproduced gap A - B with its 95 % Welch
interval beside the paper's gap.

The papers' qualitative claims are judged by the same rule (:func:`order_claim`, :func:`level_claim`,
:func:`equal_claim`): at least 3 seeds (or trials) of everything compared, two-sided t-tests (Welch's for two
samples, one-sample against a stated level), Holm-Bonferroni over the tests of one claim, ``alpha`` = 0.05.  A
claim of a strict order or a level *agrees* when every test is significant in the claimed direction, *disagrees*
when one is significant the other way, and is *inconclusive* otherwise; a claim of equality (a tie) agrees unless
a test finds a significant difference, as a tie in the paper does among the orderings.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import combinations

import numpy as np

from .compare import Row

__all__ = ["MIN_SEEDS", "PairResult", "all_of", "best_claim", "compare_pair", "equal_claim", "holm", "level_claim",
           "one_sample", "order_claim", "ordering_rows", "paper_relation", "seed_values", "welch"]

MIN_SEEDS = 3
ALPHA = 0.05


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


def paper_relation(a: float, pm_a: float | None, b: float, pm_b: float | None, decimals: int = 2) -> int:
    """+1 when the paper puts ``a`` above ``b``, -1 below, 0 for a tie (published intervals touch)."""
    tol = 0.5 * 10 ** (-decimals)  # the rounding of the printed values
    if pm_a is None or pm_b is None:
        if round(a, decimals) == round(b, decimals):
            return 0
    elif abs(a - b) <= pm_a + pm_b + tol:
        return 0
    return 1 if a > b else -1


def welch(x: Sequence[float], y: Sequence[float]) -> tuple[float, float, float, float]:
    """Welch's t-test of mean(x) = mean(y): (difference, 95 % interval low, high, two-sided p-value).

    Two constant samples give p = 1 when they are equal and p = 0 when they differ (no spread to test against).
    """
    from scipy.stats import t as student_t

    x, y = np.asarray(x, float), np.asarray(y, float)
    d = float(x.mean() - y.mean())
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    se2 = vx + vy
    if se2 == 0.0:
        return d, d, d, (1.0 if d == 0.0 else 0.0)
    df = se2 ** 2 / ((vx ** 2 / (len(x) - 1)) + (vy ** 2 / (len(y) - 1)))
    se = math.sqrt(se2)
    p = float(2 * student_t.sf(abs(d) / se, df))
    half = float(student_t.ppf(0.975, df)) * se
    return d, d - half, d + half, p


def one_sample(x: Sequence[float], level: float) -> tuple[float, float]:
    """Two-sided one-sample t-test of mean(x) = ``level``: (mean - level, p-value); a constant sample gives
    p = 1 at the level and p = 0 elsewhere (as :func:`welch`)."""
    from scipy.stats import t as student_t

    x = np.asarray(x, float)
    d = float(x.mean() - level)
    se = float(x.std(ddof=1)) / math.sqrt(len(x))
    if se == 0.0:
        return d, (1.0 if d == 0.0 else 0.0)
    return d, float(2 * student_t.sf(abs(d) / se, len(x) - 1))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values (same order as given)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adj = [1.0] * m
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adj[i] = running
    return adj


class PairResult(dict):
    """One pair's comparison: ``verdict`` and the numbers behind it (a dict, for CSV rows)."""


def compare_pair(paper: int, x: Sequence[float], y: Sequence[float], p_adjusted: float | None,
                 alpha: float = ALPHA, min_seeds: int = MIN_SEEDS) -> str:
    """The verdict of one pair: ``paper`` is :func:`paper_relation`'s +1/-1/0; ``x``, ``y`` the per-seed values
    (oriented so that larger is better); ``p_adjusted`` the pair's Holm-adjusted Welch p-value."""
    if len(x) < min_seeds or len(y) < min_seeds:
        return f"inconclusive (fewer than {min_seeds} seeds: {len(x)} and {len(y)})"
    significant = p_adjusted is not None and p_adjusted < alpha
    sign = int(np.sign(np.mean(x) - np.mean(y)))
    if paper == 0:
        return "disagrees (the paper ties, the toolkit orders)" if significant else \
            "agrees (tie in the paper, overlapping intervals)"
    if not significant:
        return "inconclusive (intervals overlap)"
    return "agrees (same order)" if sign == paper else "disagrees (opposite order)"


def ordering_rows(cell: str, published: dict, samples: dict[str, Sequence[float]], scale: float = 1.0,
                  higher_better: bool = True, reduced: str = "", alpha: float = ALPHA,
                  min_seeds: int = MIN_SEEDS, trained_above: float | None = None) -> list[Row]:
    """One row per pair of methods of ``cell`` that have both a published value and reproduced seeds.

    ``published`` maps method -> :class:`figures.published.Published`; ``samples`` method -> per-seed values
    (in the run's units; ``scale`` converts to the paper's, e.g. 100 for accuracies in %).  ``reduced`` says what
    the run changes from the paper's setting (shown in each row's note).  Holm-Bonferroni runs over the pairs
    of this cell.  ``trained_above`` (run units): where no method's mean exceeds it, the models are barely
    trained, and every row of the cell is ``inconclusive`` -- a tie of untrained models is no agreement.
    """
    names = [a for a in published if published[a] is not None and a in samples]
    pairs = list(combinations(names, 2))
    sgn = 1.0 if higher_better else -1.0
    stats = {}
    for a, b in pairs:
        xa = [scale * v for v in samples[a]]
        xb = [scale * v for v in samples[b]]
        stats[(a, b)] = welch(xa, xb) if len(xa) >= 2 and len(xb) >= 2 else None
    testable = [pr for pr in pairs if stats[pr] is not None]
    adj = dict(zip(testable, holm([stats[pr][3] for pr in testable]), strict=True))
    means = [sum(samples[a]) / len(samples[a]) for a in names if len(samples[a])]
    untrained = (trained_above is not None and bool(means) and max(means) <= trained_above)
    rows = []
    for a, b in pairs:
        pa, pb = published[a], published[b]
        dec = max(pa.decimals, pb.decimals, 1)
        rel = paper_relation(sgn * pa.value, pa.pm, sgn * pb.value, pb.pm, dec)
        word = {1: ">", -1: "<", 0: "≈"}[rel * (1 if higher_better else -1)]
        ptext = f"{a} {word} {b} ({_pm(pa.value, pa.pm, dec)} vs {_pm(pb.value, pb.pm, dec)}; gap " \
                f"{pa.value - pb.value:+.{dec}f})"
        xa = [sgn * scale * v for v in samples[a]]
        xb = [sgn * scale * v for v in samples[b]]
        st = stats[(a, b)]
        verdict = compare_pair(rel, xa, xb, adj.get((a, b)), alpha, min_seeds)
        if untrained and not verdict.startswith("inconclusive (fewer than"):
            verdict = (f"inconclusive (models barely trained: best mean {scale * max(means):.1f} <= "
                       f"{scale * trained_above:.1f})")
        if st is None:
            rep = f"n = {len(xa)}, {len(xb)} seeds"
        else:
            d, lo, hi, p = st
            rep = (f"gap {d:+.{dec}f} [{lo:+.{dec}f}, {hi:+.{dec}f}] (95% Welch CI), p = {p:.3g} "
                   f"(Holm {adj[(a, b)]:.3g}), n = {len(xa)}, {len(xb)}")
        rows.append(Row(f"{cell}: {a} vs {b} (ordering)", ptext, rep, "—", verdict,
                        f"{pa.source()}; {pb.source()}", reduced,
                        compared=f"{cell}/{a};{cell}/{b}"))
    return rows


def _pm(v: float, pm: float | None, dec: int) -> str:
    return f"{v:.{dec}f}" + (f" ± {pm:.{dec}f}" if pm is not None else "")


def _short(samples: dict[str, Sequence[float]], names, min_seeds: int) -> str | None:
    few = [n for n in dict.fromkeys(names) if len(samples.get(n, ())) < min_seeds]
    if not few:
        return None
    return (f"inconclusive (fewer than {min_seeds} seeds: "
            + ", ".join(f"{n} {len(samples.get(n, ()))}" for n in few) + ")")


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
        return f"disagrees ({'; '.join(wrong)})"
    if all(p < alpha and sgn * t[0] > 0 for t, p in zip(tests, adj, strict=True)):
        return "agrees"
    return "inconclusive (intervals overlap)"


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
        return f"disagrees ({', '.join(map(str, wrong))} {'above' if below else 'below'} {level:g})"
    if all(adj[k] < alpha and claimed * d > 0 for k, (d, _) in tests.items()):
        return "agrees"
    return f"inconclusive (intervals include {level:g})"


def equal_claim(samples: dict[str, Sequence[float]], level: float, alpha: float = ALPHA,
                min_seeds: int = MIN_SEEDS) -> str:
    """A claim that the mean of every case of ``samples`` equals ``level``: it disagrees when a one-sample t-test
    (Holm over the cases) finds a difference, else agrees (a tie, as in :func:`compare_pair`)."""
    short = _short(samples, samples, min_seeds)
    if short:
        return short
    tests = {k: one_sample(v, level) for k, v in samples.items()}
    adj = dict(zip(tests, holm([p for _, p in tests.values()]), strict=True))
    wrong = [k for k in tests if adj[k] < alpha]
    if wrong:
        return f"disagrees ({', '.join(map(str, wrong))} differ from {level:g})"
    return f"agrees (no case differs significantly from {level:g})"


def all_of(*verdicts: str) -> str:
    """One verdict for a claim made of parts: the first part that disagrees, else agrees when every part does,
    else the first inconclusive part."""
    for v in verdicts:
        if v.startswith("disagrees"):
            return v
    if all(v.startswith("agrees") for v in verdicts):
        return "agrees"
    return next(v for v in verdicts if not v.startswith("agrees"))
