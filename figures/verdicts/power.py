"""Operating characteristics of the number verdicts of :mod:`figures.verdicts.rules`, by simulation with fixed seeds.

For each published value: the probability that a *perfect* reproduction (seeds drawn with the paper's mean and
spread) is called ``agrees`` and ``differs``, with every other number of its table reproduced the same way (Holm over
the table, as :func:`~figures.verdicts.rules.judge_numbers` runs it), the probability that a reproduction whose mean
is off by 3 declared margins is called ``agrees``, and the seeds a value needs before a perfect reproduction agrees
with probability :data:`~figures.verdicts.rules.POWER` within the unit's informative limit.  ``python paper_repro.py
--verdict-power`` prints the table for the published values of the campaign's cells; the campaign's seed counts
come from its last column.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from .published import Published, tables
from .rules import (
    ALPHA,
    MIN_SEEDS,
    POWER,
    PaperNumber,
    declared_margin,
    holm_rows,
    informative_margin,
    number_pvalues,
    power_margin,
)

__all__ = ["Characteristics", "characteristics", "families", "power_table", "seeds_needed", "simulate"]

DRAWS = 2000


def families(published: Iterable[Published]) -> dict[tuple[str, str], list[tuple[Published, PaperNumber]]]:
    """The published values by table (paper, artifact): the Holm family of each, with its size set."""
    out: dict[tuple[str, str], list[Published]] = {}
    for p in published:
        out.setdefault((p.paper, p.artifact), []).append(p)
    return {k: [(p, replace(PaperNumber(*p.paper_number()), family=len(v))) for p in v] for k, v in out.items()}


def simulate(papers: list[PaperNumber], n: int, shift: float = 0.0, draws: int = DRAWS,
             seed: int = 20261207) -> tuple[np.ndarray, np.ndarray]:
    """``(P(agrees), P(differs))`` per number of one table, each reproduced by ``n`` seeds drawn from a normal with
    the paper's spread around its value plus ``shift`` declared margins; Holm over the table in every draw."""
    rng = np.random.default_rng(seed)
    pd = np.empty((draws, len(papers)))
    pe = np.empty((draws, len(papers)))
    for j, paper in enumerate(papers):
        margin = paper.margin
        x = paper.value + shift * margin + paper.spread * rng.standard_normal((draws, n))
        sd = x.std(axis=1, ddof=1) if n > 1 else np.zeros(draws)
        _, _, _, pd[:, j], pe[:, j] = number_pvalues(x.mean(axis=1), sd, n, paper, margin)
    agree = holm_rows(pe) < ALPHA
    differ = ~agree & (holm_rows(pd) < ALPHA)
    return agree.mean(0), differ.mean(0)


def seeds_needed(paper: PaperNumber, most: int = 100) -> int | None:
    """The fewest seeds (at least :data:`MIN_SEEDS`) at which a perfect reproduction agrees with probability
    :data:`POWER` within the informative margin (:func:`~figures.verdicts.rules.informative_margin`: the declared
    margin, at most the unit's informative limit); None: not within ``most`` seeds (the paper's own spread over its
    seeds keeps the test wider than the limit at any count of ours)."""
    margin = informative_margin(paper)
    # not a bisection: with few paper seeds the power margin need not fall with n (more seeds of ours shrink the
    # standard error but leave Welch's degrees of freedom to the paper's side, and its t quantile grows)
    for n in [*range(MIN_SEEDS, 31), *range(40, most + 1, 10)]:
        if power_margin(paper, n) <= margin:
            return n
    return None


@dataclass(frozen=True)
class Characteristics:
    """One published value's row of the ``--verdict-power`` table."""

    source: str
    value: float
    pm: float | None
    unit: str
    margin: float
    informative: float
    why: str
    family: int
    stored_n: int
    agree_stored: float | None
    agree_paper_n: float
    differ_paper_n: float
    agree_3_margins_off: float
    seeds_needed: int | None


def characteristics(published: Iterable[Published], stored: dict[str, int] | None = None,
                    draws: int = DRAWS) -> list[Characteristics]:
    """The operating characteristics of every value of ``published`` (``stored``: seeds stored per
    :meth:`Published.source`)."""
    stored = stored or {}
    out = []
    for (_, _), members in families(published).items():
        papers = [pn for _, pn in members]
        n_paper = max(max(pn.n for pn in papers), MIN_SEEDS)
        agree, differ = simulate(papers, n_paper, draws=draws)
        off, _ = simulate(papers, n_paper, shift=3.0, draws=draws, seed=20261208)
        by_n: dict[int, np.ndarray] = {}
        for (pub, pn), a, d, o in zip(members, agree, differ, off, strict=True):
            k = stored.get(pub.source(), 0)
            if k >= MIN_SEEDS and k not in by_n:
                by_n[k] = simulate(papers, k, draws=draws)[0]
            j = papers.index(pn)
            margin, why = declared_margin(pn)
            out.append(Characteristics(pub.source(), pub.value, pub.pm, pub.unit, margin, informative_margin(pn), why,
                                       pn.family, k,
                                       float(by_n[k][j]) if k in by_n else None, float(a), float(d), float(o),
                                       seeds_needed(pn)))
    return out


def _stored_seeds(manifest: Path) -> tuple[list[Published], dict[str, int]]:
    """The published values of the campaign's cells (its manifest) and their stored seeds."""
    index = {(p.paper, p.artifact, p.group, p.row, p.column): p for p in tables()}
    pubs, stored = [], {}
    with open(manifest, encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            p = index.get((row["paper"], row["artifact"], row.get("group", ""), row["row"], row["column"]))
            if p is None or p in pubs:
                continue
            pubs.append(p)
            stored[p.source()] = int(float(row.get("seeds_stored") or 0))
    return pubs, stored


def power_table(manifest: Path, draws: int = DRAWS) -> str:
    """The ``--verdict-power`` table of the campaign's published values, as text."""
    pubs, stored = _stored_seeds(manifest)
    rows = characteristics(pubs, stored, draws)
    head = ("value", "±", "margin", "informative limit", "family", "stored n", "P(agrees) stored n",
            "P(agrees) paper n", "P(differs) paper n", "P(agrees) 3 margins off",
            "seeds for P(agrees) >= 0.8 within the limit", "source; margin from")
    lines = ["\t".join(head)]

    def pct(x):
        return "—" if x is None else f"{100 * x:.0f}%"

    for r in rows:
        lines.append("\t".join((f"{r.value:g}", "" if r.pm is None else f"{r.pm:g}", f"{r.margin:.3g}",
                                f"{r.informative:.3g}", str(r.family), str(r.stored_n), pct(r.agree_stored),
                                pct(r.agree_paper_n), pct(r.differ_paper_n), pct(r.agree_3_margins_off),
                                "none up to 100" if r.seeds_needed is None else str(r.seeds_needed),
                                f"{r.source}; {r.why}")))
    loose = sum(r.margin > r.informative for r in rows)
    never = sum(r.seeds_needed is None for r in rows)
    lines.append(f"{len(rows)} published values in {len({r.source.split(':')[0] for r in rows})} tables; "
                 f"{sum(r.agree_paper_n >= POWER for r in rows)} agree with probability >= {POWER:.0%} when perfectly "
                 f"reproduced at the paper's seed count; {loose} of them only within the paper's own spread (a margin "
                 f"wider than the unit's informative limit), {never} of which no count up to 100 seeds of ours brings "
                 f"within the limit (the paper's own seeds limit the precision); {DRAWS} simulated tables per count, "
                 "fixed seeds")
    return "\n".join(lines)
