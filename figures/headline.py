"""The tables that open the report: per paper and kind of data, what was compared and what came out.

Counts come from the verdicts of every target's rows (the words of :mod:`figures.compare` and
:mod:`figures.verdicts`), kept in each target's verified ``status-<size>.json`` (:mod:`figures.status`) so that a
resumed run counts the targets it did not rerun.  Rows are split by the data behind them, and each kind of data has
its own table and words, defined in the caption above it (:data:`CAPTIONS`):

* **real data** (the papers' data sets: a medium or full run of a neural-network target) and **stored paper-scale
  runs** (``figures/measured``): the only rows whose numbers are held to the paper's ``±``;
* **stand-in (8x8 digits)**: tiny/quick runs of the neural-network targets on scikit-learn's digits, whose numbers
  are shown but never compared with the paper's;
* **synthetic / theory**: mixed linear regression (the papers' own synthetic experiments) and the bounds.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

__all__ = ["CAPTIONS", "COMPARISON_SYSTEMS", "DATA_KINDS", "TABLES", "Tally", "classify", "data_kind",
           "headline_markdown", "paper_of", "row_record", "system_rows", "tally"]

DATA_KINDS = ("real data", "stored paper-scale runs", "stand-in (8x8 digits)", "synthetic / theory")
PAPERS = ("IFCA", "SR-FCA", "CLoVE", "beyond papers")
THEORY = ("holds", "violated", "vacuous", "assumptions not met")


def paper_of(target_paper: str, item: str = "") -> str:
    """The paper a row belongs to: the target's, or the paper named at the start of the item (the stored runs' "IFCA
    Table I: ...", the theory checks' "ifca-lemma1 at n=10")."""
    for p in ("IFCA", "SR-FCA", "CLoVE"):
        if target_paper.startswith(p):
            return p
    for p in ("IFCA", "SR-FCA", "CLoVE"):
        if item.startswith(p + " ") or item.startswith(p.lower().replace("-", "") + "-"):
            return p
    return "beyond papers"


def data_kind(target_kind: str, size: str) -> str:
    """Which of :data:`DATA_KINDS` a target's rows count under at ``size``."""
    if target_kind == "measured":
        return "stored paper-scale runs"
    if target_kind == "nets":
        return "real data" if size in ("medium", "full") else "stand-in (8x8 digits)"
    return "synthetic / theory"


def row_record(row) -> dict:
    """What the headline keeps of a :class:`figures.compare.Row` (stored in the target's status file)."""
    return {"item": row.item, "verdict": row.verdict, "compared": getattr(row, "compared", ""),
            "welch": getattr(row, "welch", ""), "source": getattr(row, "source", "") or ""}


def _head(verdict: str) -> str:
    return verdict.split(" (")[0].strip()


def classify(record: dict) -> str:
    """The class of a row record: ``ordering``, ``within``, ``outside``, ``equal``, ``differs``, ``claim``,
    ``shown`` (not comparable), ``finding``, ``theory``, ``not run`` or ``other`` (n/a, no published value, not
    matched)."""
    v = record["verdict"]
    head = _head(v)
    if record.get("compared") and head in ("agrees", "disagrees", "inconclusive"):
        return "ordering"
    return {"within ±": "within", "outside ±": "outside", "equal": "equal", "differs": "differs",
            "agrees": "claim", "disagrees": "claim", "inconclusive": "claim", "not comparable": "shown",
            "finding": "finding", "not run": "not run"}.get(head, "theory" if head in THEORY else "other")


@dataclass
class Tally:
    """Counts of one (paper, data kind) cell of the headline."""

    compared: set = field(default_factory=set)
    within: int = 0
    outside: int = 0
    equal: int = 0
    differs: int = 0
    order: Counter = field(default_factory=Counter)
    claims: Counter = field(default_factory=Counter)
    shown: int = 0
    findings: int = 0
    theory: Counter = field(default_factory=Counter)
    not_run: Counter = field(default_factory=Counter)
    other: int = 0
    welch: Counter = field(default_factory=Counter)  # paper-scale numbers: consistent / differs


def tally(entries: list[tuple[str, str, str, list[dict]]]) -> dict[tuple[str, str], Tally]:
    """``entries``: (target name, paper, data kind, row records); returns a :class:`Tally` per (paper, kind).

    A number held to the paper's ``±`` (or compared at its precision) counts as such only for real data and stored
    paper-scale runs; for stand-in and synthetic rows it counts as shown only (their tables have no such column).
    """
    out: dict[tuple[str, str], Tally] = {}
    for name, paper, kind, rows in entries:
        paper_data = kind in ("real data", "stored paper-scale runs")
        for r in rows:
            t = out.setdefault((paper_of(paper, r["item"]), kind), Tally())
            c, v = classify(r), r["verdict"]
            if c == "ordering":
                t.order[_head(v)] += 1
                if not v.startswith("inconclusive (fewer than"):
                    t.compared.update(f"{name}:{k}" for k in r["compared"].split(";"))
            elif c in ("within", "outside", "equal", "differs"):
                if paper_data:
                    setattr(t, c, getattr(t, c) + 1)
                    # one published value scored under two protocols (IFCA's own test, a second initialisation)
                    # is one number compared
                    t.compared.add(r.get("source") or f"{name}:{r['item']}")
                    if r.get("welch"):
                        t.welch[_head(r["welch"])] += 1
                else:
                    t.shown += 1
            elif c == "claim":
                t.claims[_head(v)] += 1
            elif c == "shown":
                t.shown += 1
            elif c == "finding":
                t.findings += 1
            elif c == "theory":
                t.theory[_head(v)] += 1
            elif c == "not run":
                t.not_run[_reason(v)] += 1
            else:
                t.other += 1
    return out


def _reason(verdict: str) -> str:
    """A short class of a 'not run (...)' reason, to group them in the headline."""
    inner = verdict[len("not run ("):].rstrip(")") if verdict.startswith("not run (") else verdict
    low = inner.lower()
    if "not in the toolkit" in low:
        return "algorithm not in the toolkit"
    if "data not available" in low:
        return "data not available"
    if "not embedded" in low or "no embedded" in low or "substitute" in low:
        return "no embedded data at this size"
    if "budget" in low:
        return "outside the medium run's hour"
    if "no finished trial" in low or "failed" in low:
        return "every trial failed"
    return inner[:60]


# the comparison systems of the papers besides IFCA, SR-FCA, CLoVE and CFL, as the report's rows name them
COMPARISON_SYSTEMS = ("k-FED", "PACFL", "FlexCFL", "FeSEM", "FedSoft", "Per-FedAvg", "FedProto", "FedPAC", "FedALA")


def system_rows(entries: list[tuple[str, str, str, list[dict]]]) -> dict[str, Counter]:
    """Per comparison system, the verdict heads of the rows that name it (a whole word: FedPAC is not FedProto)."""
    out: dict[str, Counter] = {name: Counter() for name in COMPARISON_SYSTEMS}
    for _, _, _, rows in entries:
        for r in rows:
            for name in COMPARISON_SYSTEMS:
                if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", r["item"]):
                    out[name][_head(r["verdict"])] += 1
    return out


def _abc(c: Counter, keys: tuple[str, ...]) -> str:
    return " / ".join(str(c[k]) for k in keys)


def _why(t: Tally) -> str:
    return "; ".join(f"{n}: {reason}" for reason, n in t.not_run.most_common()) or "—"


_AGREE = ("agrees", "disagrees", "inconclusive")

# table -> (data kinds, heading, [(column, definition, cell(t))])
TABLES = {
    "paper data": (("real data", "stored paper-scale runs"), "Real data and stored paper-scale runs", [
        ("published numbers compared", "distinct published values held to the paper's ± (within / outside ±), "
         "compared at the paper's precision where it gives no ± (equal / differs), or entering an ordering row with "
         "at least 3 seeds of both methods (whatever that row's verdict); a value scored under two protocols (say "
         "IFCA's own test beside each client's) is one number here and a row in each verdict column",
         lambda t: str(len(t.compared))),
        ("within ±", "a reproduced mean, on the paper's data and setting, within the paper's ± of its value",
         lambda t: str(t.within)),
        ("outside ±", "the same, outside the paper's ±", lambda t: str(t.outside)),
        ("equal / differs", "a reproduced mean on the paper's data and setting where the paper gives no ±: equal or "
         "not at the paper's printed precision", lambda t: f"{t.equal} / {t.differs}"),
        ("Welch consistent / differs", "stored paper-scale numbers with at least 3 seeds on both sides: Welch's test "
         "of the reproduced mean against the paper's (its ± read as a standard deviation over its seeds), Holm over "
         "the numbers of one table, consistent at p >= 0.05", lambda t: f"{t.welch['consistent']} / "
         f"{t.welch['differs']}"),
        ("orderings agree / disagree / inconclusive", "pairs of methods of one cell: the paper's order (or tie) "
         "against Welch's t-test over seeds, Holm over the cell's pairs; fewer than 3 seeds or overlapping intervals "
         "under a paper order: inconclusive", lambda t: _abc(t.order, _AGREE)),
        ("claims agree / disagree / inconclusive", "the papers' qualitative statements, by the same rule as the "
         "orderings (at least 3 seeds, t-tests, Holm over the claim's tests)", lambda t: _abc(t.claims, _AGREE)),
        ("shown only (reduced setting)", "reproduced numbers of a run reduced from the paper's setting (fewer "
         "clients, samples, rounds, seeds): shown beside the paper's, never held to its ±", lambda t: str(t.shown)),
        ("not run, and why", "published numbers the run could not reproduce, grouped by reason", _why)]),
    "stand-in": (("stand-in (8x8 digits)",), "Stand-in runs (8x8 digits in place of MNIST)", [
        ("orderings agree / disagree / inconclusive", "as for real data, on the stand-in's seeds (quick runs have 2 "
         "seeds: inconclusive)", lambda t: _abc(t.order, _AGREE)),
        ("claims agree / disagree / inconclusive", "the papers' qualitative statements tested on the stand-in by the "
         "orderings' rule", lambda t: _abc(t.claims, _AGREE)),
        ("stand-in numbers (shown, never compared)", "reproduced numbers on the digits: a different data set, so "
         "never held to the paper's ±", lambda t: str(t.shown)),
        ("not run, and why", "published numbers the stand-in run could not reproduce, grouped by reason", _why)]),
    "synthetic": (("synthetic / theory",), "Synthetic experiments and theory", [
        ("claims agree / disagree / inconclusive", "the papers' statements about their synthetic experiments, over "
         "trials by the orderings' rule (success probabilities: one-sided Fisher tests on the trial counts)",
         lambda t: _abc(t.claims, _AGREE)),
        ("bounds hold / violated / vacuous / assumptions not met", "each lemma or theorem at each swept value: "
         "the verdict of `python -m theory check`", lambda t: _abc(t.theory, THEORY)),
        ("findings", "what the toolkit observed where no paper makes a claim (no verdict)", lambda t: str(t.findings)),
        ("not run, and why", "checks that could not run, grouped by reason", _why)]),
}


def captions() -> dict[str, str]:
    """Each headline table's caption (a list under it): one definition per column."""
    return {key: "\n".join(f"- **{col}**: {text}." for col, text, _ in cols) for key, (_, _, cols) in TABLES.items()}


CAPTIONS = captions()


def headline_markdown(tallies: dict[tuple[str, str], Tally], pending: list[tuple[str, str, str]], size: str,
                      systems: dict[str, Counter] | None = None, where: str = "",
                      unreadable: list[tuple[str, str]] | None = None) -> str:
    """The headline (Markdown): ``where`` (a paragraph saying where the real-data verdicts are), one table per kind
    of data with its caption, the targets not run, the unreadable status files and the rows of each comparison
    system."""
    lines = [f"## Headline ({size})", ""]
    if where:
        lines += [where, ""]
    for key, (kinds, heading, cols) in TABLES.items():
        cells = [(paper, kind, tallies[(paper, kind)]) for paper in PAPERS for kind in kinds if (paper, kind) in
                 tallies]
        lines += [f"### {heading}", ""]
        if cells:
            lines += ["| paper | data | " + " | ".join(c for c, _, _ in cols) + " |",
                      "|---|---|" + "---|" * len(cols)]
            lines += [f"| {paper} | {kind} | " + " | ".join(cell(t) for _, _, cell in cols) + " |"
                      for paper, kind, t in cells]
        else:
            lines.append("No rows of this kind at this size.")
        lines += ["", CAPTIONS[key], ""]
    if unreadable:
        lines.append("Status files that could not be read (their targets are counted nowhere; rerun them with "
                     "`--only`): " + "; ".join(f"`{n}`: {why}" for n, why in unreadable))
        lines.append("")
    if pending:
        by_reason: dict[str, list[str]] = {}
        for n, _, why in pending:
            by_reason.setdefault(why, []).append(f"`{n}`")
        lines += ["Targets without results at this size:", ""]
        lines += [f"- {why}: {', '.join(names)}" for why, names in by_reason.items()]
        lines.append("")
    if systems:
        parts = []
        for name, c in systems.items():
            total = sum(c.values())
            shown = ", ".join(f"{n} {v}" for v, n in sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))
            parts.append(f"{name} {total}" + (f" ({shown})" if total else ""))
        lines.append("Rows per comparison system: " + "; ".join(parts) + ".")
        lines.append("")
    return "\n".join(lines)
