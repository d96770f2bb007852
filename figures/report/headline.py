"""The tables that open the report: per paper and kind of data, what was compared and what came out.

Counts come from the verdicts of every target's rows (the words of :mod:`figures.verdicts.compare` and
:mod:`figures.verdicts.rules`), kept in each target's verified ``status-<size>.json`` (:mod:`figures.report.status`) so
that a resumed run counts the targets it did not rerun.  Rows are split by the data behind them, and each kind of data
has its own table and words, defined in the caption above it (:data:`CAPTIONS`):

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

from ..verdicts.rules import AGREES, DIFFERS, NOT_RESOLVED, SHOWN, STALE, SUSPECT, WIDE, head, wide

__all__ = ["CAPTIONS", "COMPARISON_SYSTEMS", "DATA_KINDS", "TABLES", "Tally", "classify", "data_kind",
           "headline_markdown", "paper_of", "paper_sentence_lines", "paper_sentences", "row_record", "system_rows",
           "tally"]

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
    """What the headline keeps of a :class:`figures.verdicts.compare.Row` (stored in the target's status file): its
    words, and whether it is a published number tested at the paper's setting (``number``), its protocol class
    (:mod:`figures.verdicts.protocol`) and whether it is the counted row of its published value."""
    return {"item": row.item, "verdict": row.verdict, "compared": getattr(row, "compared", ""),
            "source": getattr(row, "source", "") or "",
            "number": getattr(row, "paper_number", None) is not None
            or (head(row.verdict) in (STALE, SUSPECT) and not getattr(row, "compared", "")),
            "protocol": getattr(row, "protocol", "") or "", "counted": bool(getattr(row, "counted", True))}


def _head(verdict: str) -> str:
    return head(verdict)


def classify(record: dict) -> str:
    """The class of a row record: ``number`` (a published number tested at the paper's setting, or shown, stale,
    suspect there), ``ordering``, ``claim``, ``shown`` (not comparable: a reduced or stand-in run), ``finding``,
    ``theory``, ``not run`` or ``other`` (n/a, no published value, not matched)."""
    v = record["verdict"]
    h = _head(v)
    if record.get("number"):
        return "number"
    if record.get("compared") and h in (*_TESTED, STALE):
        return "ordering"
    if h in _TESTED:
        return "claim"
    return {"not comparable": "shown", "finding": "finding", "not run": "not run"}.get(
        h, "theory" if h in THEORY else "other")


_TESTED = (AGREES, DIFFERS, NOT_RESOLVED, SHOWN)
LOOSE = f"agrees {WIDE}"  # a published number's tally key: agreement within a margin wider than the informative limit


def _number_head(verdict: str) -> str:
    """A published number's verdict head for the counts: :data:`LOOSE` apart from ``agrees``."""
    return LOOSE if wide(verdict) else _head(verdict)


@dataclass
class Tally:
    """Counts of one (paper, data kind) cell of the headline.  ``numbers`` keeps one verdict per published value
    (its counted row): ``(protocol class, verdict head)``."""

    numbers: dict = field(default_factory=dict)
    compared: set = field(default_factory=set)
    order: Counter = field(default_factory=Counter)
    claims: Counter = field(default_factory=Counter)
    shown: int = 0
    findings: int = 0
    theory: Counter = field(default_factory=Counter)
    not_run: Counter = field(default_factory=Counter)
    other: int = 0

    def at(self, protocol: str) -> Counter:
        """Verdict heads of the published values whose rows are at the paper's setting (``"same"``) or near it
        (declared deviations, or no ledger: any other class)."""
        want = protocol == "same"
        return Counter(h for p, h in self.numbers.values() if (p == "same") == want and h in (*_TESTED[:3], LOOSE))

    def count(self, word: str) -> int:
        return sum(1 for _, h in self.numbers.values() if h == word)


def tally(entries: list[tuple[str, str, str, list[dict]]]) -> dict[tuple[str, str], Tally]:
    """``entries``: (target name, paper, data kind, row records); returns a :class:`Tally` per (paper, kind).

    A published number counts once, by its counted row (a value scored under a second protocol is shown beside it,
    not counted again), and only for real data and stored paper-scale runs; stand-in and synthetic numbers count
    as shown only (their tables have no such column).
    """
    out: dict[tuple[str, str], Tally] = {}
    for name, paper, kind, rows in entries:
        paper_data = kind in ("real data", "stored paper-scale runs")
        for r in rows:
            t = out.setdefault((paper_of(paper, r["item"]), kind), Tally())
            c, v = classify(r), r["verdict"]
            if c in ("ordering", "claim") and _second(r):
                t.shown += 1  # judged under a second protocol, beside the counted row
                continue
            if c == "ordering":
                t.order[_head(v)] += 1
            elif c == "number":
                if not paper_data:
                    t.shown += 1
                elif r.get("counted", True):
                    key = r.get("source") or f"{name}:{r['item']}"
                    t.numbers.setdefault(key, (r.get("protocol", ""), _number_head(v)))
                    if _head(v) in _TESTED[:3]:
                        t.compared.add(key)
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
    return " / ".join(str(c[k]) + (f" (+{c[LOOSE]} within the paper's spread only)" if k == AGREES and c[LOOSE] else "")
                      for k in keys)


def loose_text(c: Counter) -> str:
    """`` (+k only within the paper's own spread)`` after an agree count, when there are such agreements."""
    return f" (+{c[LOOSE]} {WIDE})" if c[LOOSE] else ""


def _why(t: Tally) -> str:
    return "; ".join(f"{n}: {reason}" for reason, n in t.not_run.most_common()) or "—"


_AGREE = (AGREES, DIFFERS, NOT_RESOLVED)

# table -> (data kinds, heading, [(column, definition, cell(t))])
TABLES = {
    "paper data": (("real data", "stored paper-scale runs"), "Real data and stored paper-scale runs", [
        ("published numbers tested", "distinct published values tested against reproduced runs with at least 3 "
         "seeds, each once (a value scored under two protocols, say IFCA's test beside each client's own, is one "
         "number, counted by its row at the paper's protocol; a value that also enters ordering rows is not "
         "counted again)", lambda t: str(len(t.compared))),
        ("at the paper's setting: agree / differ / not resolved", "published numbers whose runs follow the paper's "
         "protocol in every setting the paper states (the cell's ledger, `figures/published/protocols/`), with at "
         "least 3 seeds: agree = shown equivalent (TOST within the margin declared from the paper alone, "
         "`--verdict-power`, Holm over the table; in brackets, agreements within a margin wider than the unit's "
         "informative limit, where the paper's own spread over its seeds allows no tighter test), differ = a "
         "significant difference outside that margin (Welch, Holm), not resolved = neither",
         lambda t: _abc(t.at("same"), _AGREE)),
        ("near the paper: agree / differ / not resolved", "the same tests for published numbers whose runs "
         "deviate from the paper in a declared setting (or whose cell has no ledger)",
         lambda t: _abc(t.at("deviates"), _AGREE)),
        ("shown (n < 3) / stale / suspect", "published numbers with fewer than 3 seeds stored (values shown, no "
         "verdict); with stored runs of a protocol since corrected (shown until rerun); and published values that "
         "look like misprints (reason on the row): none of these is counted as agreeing or differing",
         lambda t: f"{t.count(SHOWN)} / {t.count(STALE)} / {t.count(SUSPECT)}"),
        ("orderings agree / differ / not resolved", "pairs of methods of one cell with at least 3 seeds each: the "
         "paper's order made significantly by the seeds (Welch, Holm over the cell's pairs), or a pair the "
         "paper's own numbers do not separate shown equivalent within the declared margin (TOST); differ: the "
         "opposite order, or such a tie the seeds order",
         lambda t: _abc(t.order, _AGREE)),
        ("claims agree / differ / not resolved", "the papers' qualitative statements, by the same rule as the "
         "orderings (at least 3 seeds, t-tests or TOST, Holm over the claim's tests)",
         lambda t: _abc(t.claims, _AGREE)),
        ("shown only (reduced setting)", "reproduced numbers of a run reduced from the paper's setting (fewer "
         "clients, samples, rounds, seeds): shown beside the paper's, never tested against it",
         lambda t: str(t.shown)),
        ("not run, and why", "published numbers the run could not reproduce, grouped by reason", _why)]),
    "stand-in": (("stand-in (8x8 digits)",), "Stand-in runs (8x8 digits in place of MNIST)", [
        ("orderings agree / differ / not resolved", "as for real data, on the stand-in's seeds (quick runs have 2 "
         "seeds: shown, no verdict)", lambda t: _abc(t.order, _AGREE)),
        ("claims agree / differ / not resolved", "the papers' qualitative statements tested on the stand-in by the "
         "orderings' rule", lambda t: _abc(t.claims, _AGREE)),
        ("stand-in numbers (shown, never compared)", "reproduced numbers on the digits: a different data set, so "
         "never tested against the paper's", lambda t: str(t.shown)),
        ("not run, and why", "published numbers the stand-in run could not reproduce, grouped by reason", _why)]),
    "synthetic": (("synthetic / theory",), "Synthetic experiments and theory", [
        ("claims agree / differ / not resolved", "the papers' statements about their synthetic experiments, over "
         "trials by the orderings' rule (success probabilities: one-sided Fisher tests on the trial counts)",
         lambda t: _abc(t.claims, _AGREE)),
        ("bounds hold / violated / vacuous / assumptions not met", "each lemma or theorem at each swept value: "
         "the verdict of `python -m theory check`", lambda t: _abc(t.theory, THEORY)),
        ("findings", "what the toolkit observed where no paper makes a claim (no verdict)", lambda t: str(t.findings)),
        ("not run, and why", "checks that could not run, grouped by reason", _why)]),
}


def verdict_sentences(tallies: dict[tuple[str, str], Tally]) -> list[str]:
    """One sentence per paper: its published numbers tested on real data or stored paper-scale runs, at the paper's
    setting and near it (declared deviations), and those shown without a verdict (each value once)."""
    out = []
    for paper in PAPERS[:3]:
        ts = [tallies[(paper, k)] for k in ("real data", "stored paper-scale runs") if (paper, k) in tallies]
        if not ts:
            continue
        numbers: dict = {}
        for t in ts:
            for src, v in t.numbers.items():
                numbers.setdefault(src, v)
        merged = Tally(numbers=numbers)
        same, near = merged.at("same"), merged.at("deviates")
        if not numbers:
            continue
        text = (f"**{paper}** at the paper's setting: {same[AGREES]} agree{loose_text(same)}, {same[DIFFERS]} differ, "
                f"{same[NOT_RESOLVED]} not resolved; near the paper (declared deviations): {near[AGREES]} agree"
                f"{loose_text(near)}, {near[DIFFERS]} differ, {near[NOT_RESOLVED]} not resolved")
        rest = [(merged.count(SHOWN), "shown with fewer than 3 seeds"), (merged.count(STALE), "stale"),
                (merged.count(SUSPECT), "paper value suspect")]
        rest_text = ", ".join(f"{n} {w}" for n, w in rest if n)
        out.append(text + (f"; {rest_text}" if rest_text else "") + " (published numbers, each counted once).")
    return out


def captions() -> dict[str, str]:
    """Each headline table's caption (a list under it): one definition per column."""
    return {key: "\n".join(f"- **{col}**: {text}." for col, text, _ in cols) for key, (_, _, cols) in TABLES.items()}


CAPTIONS = captions()


def headline_markdown(tallies: dict[tuple[str, str], Tally], pending: list[tuple[str, str, str]], size: str,
                      systems: dict[str, Counter] | None = None, where: str = "",
                      unreadable: list[tuple[str, str]] | None = None,
                      sentences: dict[str, dict[str, str]] | None = None) -> str:
    """The headline (Markdown): ``where`` (a paragraph saying where the real-data verdicts are), one table per kind
    of data with its caption, the targets not run, the unreadable status files and the rows of each comparison
    system."""
    lines = [f"## Headline ({size})", ""]
    if sentences:  # what holds, differs, is untested, per paper (:func:`paper_sentences`)
        lines += paper_sentence_lines(sentences) + [""]
    numbers = verdict_sentences(tallies)
    if numbers:
        lines += [f"- {s}" for s in numbers] + [""]
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


# ------------------------------------------------------------------------------------------------ quotable sentences
_KIND_WORDS = {"real data": "on the papers' data", "stored paper-scale runs": "on the stored paper-scale runs",
               "stand-in (8x8 digits)": "on the 8x8-digits stand-in", "synthetic / theory": "in the synthetic "
               "experiments"}
_PROTOCOL_WORDS = {"same": "at the paper's setting", "deviates": "with declared deviations from the paper",
                   "paper silent": "where the paper is silent on a setting"}


def _label(item: str) -> str:
    """Where a row sits, in a few words: ``IFCA Fig. 3(a) [x]: ...`` -> ``IFCA Fig. 3(a)``; a bound check
    ``srfca-prop4.1 at dist=0.5`` -> ``srfca-prop4.1``."""
    text = re.split(r" \[|: | at ", item, maxsplit=1)[0].strip()
    return text if len(text) <= 48 else text[:45].rstrip() + "..."


def _where(rows: list[tuple[str, dict]], limit: int = 3, labels: bool = False) -> str:
    """``target`` of the rows with their count (or, with ``labels`` or where rows share a label such as a figure's
    name, the labels), the targets with most rows first, at most ``limit`` of them."""
    by: dict[str, list[str]] = {}
    for name, r in rows:
        by.setdefault(name, []).append(_label(r["item"]))
    parts = []
    for name, items in sorted(by.items(), key=lambda kv: -len(kv[1]))[:limit]:
        uniq = list(dict.fromkeys(items))
        if labels or len(uniq) < len(items):
            parts.append(f"`{name}`: " + ", ".join(uniq[:4]) + (", ..." if len(uniq) > 4 else ""))
        else:
            parts.append(f"`{name}`, {len(items)} row{'s' * (len(items) > 1)}")
    more = len(by) - limit
    return "; ".join(parts) + (f"; {more} more target{'s' * (more > 1)}" if more > 0 else "")


def paper_sentences(entries: list[tuple[str, str, str, list[dict]]], pending: list[tuple[str, str, str]],
                    size: str, gaps: dict[str, float] | None = None) -> dict[str, dict[str, str]]:
    """Per paper, the three sentences a reader can quote: ``holds`` (what agrees, with the numbers and where),
    ``differs`` (what disagrees, with its protocol status) and ``untested`` (what was not tested, and why: data,
    compute, seeds, stale protocols, a stand-in in place of the data).

    ``entries`` as for :func:`tally`; ``pending``: (target, paper, reason) of the targets without results.  Papers
    with no rows and no pending target are left out; "beyond papers" only where it has a tested row."""
    good: dict = {}   # paper -> kind -> what -> [(target, row)]
    bad: dict = {}
    tested: dict = {}
    open_: dict = {}
    for name, paper, kind, rows in entries:
        paper_data = kind in ("real data", "stored paper-scale runs")
        for r in rows:
            p = paper_of(paper, r["item"])
            c, h = classify(r), _head(r["verdict"])
            if c == "number" and not (paper_data and r.get("counted", True)):
                c = "shown"
            if c in ("ordering", "claim") and _second(r):
                open_.setdefault(p, Counter())[f"{c}s judged under a second protocol (shown beside the counted "
                                               "rows)"] += 1
                continue
            what = {"number": "published numbers", "ordering": "orderings", "claim": "claims",
                    "theory": "bound checks"}.get(c)
            if what is None:
                open_.setdefault(p, Counter())[_open_reason(c, r, kind, size)] += 1
                continue
            if c == "number" and h in (SHOWN, STALE, SUSPECT):
                open_.setdefault(p, Counter())[{SHOWN: "published numbers with fewer than 3 seeds stored (shown)",
                                                STALE: "published numbers with stale stored runs (protocol since "
                                                       "corrected)",
                                                SUSPECT: "published values that look like misprints"}[h]] += 1
                continue
            if c == "theory" and h in ("vacuous", "assumptions not met"):
                why = "outside their assumptions" if h.startswith("assumptions") else h
                open_.setdefault(p, Counter())[f"bound checks {why}"] += 1
                continue
            if h == SHOWN:
                open_.setdefault(p, Counter())[f"{what} with fewer than 3 seeds (shown, no verdict)"] += 1
                continue
            key = (kind, what)
            tested.setdefault(p, Counter())[key] += 1
            if c == "number" and wide(r["verdict"]):
                open_.setdefault(p, Counter())["published numbers that agree only within the paper's own spread "
                                               "(wider than the informative margin)"] += 1
                continue
            if h in (AGREES, "holds"):
                good.setdefault(p, {}).setdefault(key, []).append((name, r))
            elif h in (DIFFERS, "violated"):
                bad.setdefault(p, {}).setdefault(key, []).append((name, r))
            else:
                open_.setdefault(p, Counter())[f"{what} the seeds do not resolve"] += 1
    waiting: dict[str, dict[str, list[str]]] = {}
    for name, paper, why in pending:
        waiting.setdefault(paper_of(paper, ""), {}).setdefault(_short(why), []).append(f"`{name}`")

    # what the reader weighs first: the papers' data, then synthetic and theory, then the stand-in
    rank = {k: i for i, k in enumerate(("real data", "stored paper-scale runs", "synthetic / theory",
                                        "stand-in (8x8 digits)"))}

    out: dict[str, dict[str, str]] = {}
    for paper in PAPERS:
        t = tested.get(paper, Counter())
        if not t and paper not in waiting and (paper == "beyond papers" or paper not in open_):
            continue
        keys = sorted(t, key=lambda k: (rank[k[0]], _WHAT.index(k[1])))
        holds = []
        for key in keys:
            rows = good.get(paper, {}).get(key, [])
            if rows:
                kind, what = key
                verb = "hold" if what == "bound checks" else "agree"
                status = _status(rows) if kind in ("real data", "stored paper-scale runs") else ""
                holds.append(f"{len(rows)} of {t[key]} {what} {verb} {_words(kind, what)}{status} ({_where(rows)})")
        differs = []
        for key in keys:
            rows = bad.get(paper, {}).get(key, [])
            if rows:
                kind, what = key
                verb = "violated" if what == "bound checks" else "differ"
                if kind in ("real data", "stored paper-scale runs"):
                    status = _status(rows)[2:]
                elif kind == "stand-in (8x8 digits)":
                    status = "not the paper's data"
                elif what == "bound checks":
                    status = "the bound against exact or empirical values"
                else:
                    status = "the paper's generator" + (f" at the reduced {size} size" if size not in
                                                        ("medium", "full") else "")
                where = _largest(rows, gaps) if what == "published numbers" and gaps else \
                    _where(rows, labels=True)
                differs.append(f"{len(rows)} of {t[key]} {what} {verb} {_words(kind, what)}, {status} ({where})")
        reasons = [(why, n) for why, n in open_.get(paper, Counter()).most_common() if why]
        # an agreement only within the paper's spread is named whatever its count: it qualifies the Holds sentence
        first = [rw for i, rw in enumerate(reasons) if i < 5 or "paper's own spread" in rw[0]]
        untested = [f"{n} {why}" for why, n in first]
        if len(reasons) > len(first):
            untested.append(f"{sum(n for rw in reasons if rw not in first for n in [rw[1]])} more rows (the count "
                            "tables of the report)")
        for why, names in waiting.get(paper, {}).items():
            untested.append(f"{len(names)} target{'s' * (len(names) > 1)} without results ({', '.join(names)}: "
                            f"{why})")
        out[paper] = {
            "holds": "Holds: " + ("; ".join(holds) if holds else "nothing tested here agrees with the paper") + ".",
            "differs": "Differs: " + ("; ".join(differs) if differs else "no tested row differs from the paper")
                       + ".",
            "untested": "Untested: " + ("; ".join(untested) if untested else "nothing") + "."}
    return out


_BRACKETS = re.compile(r" \[[^\]]*\]")  # "[paper scale]", "[second protocol: ...]"
_WHAT = ("published numbers", "claims", "orderings", "bound checks")


def _largest(rows: list[tuple[str, dict]], gaps: dict[str, float], n: int = 3) -> str:
    """The ``n`` rows with the largest gap to the paper (``gaps``: item -> reproduced minus published), each with
    its gap to 4 significant digits: ``largest: `measured-runs`: CLoVE Table 3: Amazon / FeSEM +32.46, ...``."""
    known = sorted(((abs(gaps[r["item"]]), name, r["item"]) for name, r in rows if r["item"] in gaps),
                   reverse=True)
    if not known:
        return _where(rows, labels=True)
    parts = [f"`{name}`: {_BRACKETS.sub('', item)} {gaps[item]:+.4g}" for _, name, item in known[:n]]
    return "largest gaps: " + "; ".join(parts)


def _second(r: dict) -> bool:
    """Whether a claim or ordering row is judged under a second protocol, beside its counted row (not counted)."""
    return not r.get("counted", True) and "[second protocol" in r["item"]


def _status(rows: list[tuple[str, dict]]) -> str:
    """``", 12 with declared deviations from the paper"``: the protocol classes of the rows, counted."""
    prot = Counter(r.get("protocol", "") for _, r in rows)
    return ", " + ", ".join(f"{n} {_PROTOCOL_WORDS.get(p, 'with no protocol ledger')}" for p, n in prot.most_common())


def _words(kind: str, what: str) -> str:
    return "in the theory checks" if what == "bound checks" else _KIND_WORDS[kind]


def _short(why: str) -> str:
    """A pending target's reason, its first clause (``FEMNIST is not embedded: runs with ...`` -> ``FEMNIST is not
    embedded``)."""
    why = why.split(": ", 1)[1] if why.startswith(("pending: ", "failed: ")) else why
    return why.split(": ", 1)[0].split("; ", 1)[0].strip()


def _open_reason(c: str, r: dict, kind: str, size: str) -> str:
    """Why a row that is not tested is not: a few words, grouped in the ``untested`` sentence."""
    if c == "not run":
        return "published numbers not run (" + _reason(r["verdict"]) + ")"
    if c == "shown":
        if kind == "stand-in (8x8 digits)":
            return f"numbers on the 8x8-digits stand-in, shown, never compared (no real data at the {size} size)"
        return "numbers of a reduced setting, shown, never compared"
    if c == "finding":
        return ""  # an observation with no claim to test: not untested
    return ""


def paper_sentence_lines(sentences: dict[str, dict[str, str]]) -> list[str]:
    """The sentences as Markdown list items, one per paper."""
    return [f"- **{paper}.** {s['holds']} {s['differs']} {s['untested']}" for paper, s in sentences.items()]
