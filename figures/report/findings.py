"""The verdict-count blocks of FINDINGS.md and README.md, generated from the rows of the stored paper-scale runs.

::

    python paper_repro.py --write-findings FINDINGS.md README.md

runs the ``measured-runs`` target (it reads ``figures/measured/``; a few CPU seconds) and writes, between the
markers :data:`BEGIN` and :data:`END` of each file, per paper the sentences of the report's headline (what holds,
what differs, what is untested and why: :func:`figures.report.headline.paper_sentences`) and its published-number
counts at the paper's setting and near it (:func:`figures.report.headline.verdict_sentences`, each published value
once), and the summary line of ``python paper_repro.py --verdict-power`` (how often a perfect reproduction agrees)
-- README.md gets the counts only.  ``tests/test_findings_block.py`` holds both files equal to what this
computes now, so no count in them is written by hand.
"""

from __future__ import annotations

__all__ = ["BEGIN", "END", "FILES", "blocks", "current_block", "replace_block"]

BEGIN = "<!-- verdict counts: begin (python paper_repro.py --write-findings) -->"
END = "<!-- verdict counts: end -->"
FILES = ("FINDINGS.md", "README.md")


def blocks(rows: list, target: str, paper: str, kind: str, power: str) -> dict[str, str]:
    """The generated text between the markers, from the rows of the ``measured-runs`` target (``target``, its
    ``paper`` and data ``kind``, as the report counts them) and ``power``, the summary line of ``--verdict-power``:
    ``"FINDINGS.md"`` (sentences and counts per paper, the instrument's line) and ``"README.md"`` (the counts)."""
    from .headline import paper_sentence_lines, paper_sentences, row_record, tally, verdict_sentences

    entries = [(target, paper, kind, [row_record(r) for r in rows])]
    gaps = {}
    for r in rows:
        try:
            gaps[r.item] = float(str(r.difference).replace("−", "-"))
        except ValueError:
            continue
    sentences, tallies = paper_sentences(entries, [], "quick", gaps), tally(entries)
    counts = [f"- {s}" for s in verdict_sentences(tallies)]
    return {"FINDINGS.md": "\n".join(paper_sentence_lines(sentences) + counts
                                     + [f"- The instrument (`python paper_repro.py --verdict-power`): {power}."]),
            "README.md": _compact(tallies)}


def _compact(tallies: dict) -> str:
    """One line per paper: its published numbers at the paper's setting and near it (agree / differ / not
    resolved), and those shown without a verdict -- the counts of :func:`~figures.report.headline.verdict_sentences`
    in fewer words."""
    from ..verdicts.rules import AGREES, DIFFERS, NOT_RESOLVED, SHOWN, STALE, SUSPECT
    from .headline import PAPERS, Tally

    lines = []
    for paper in PAPERS[:3]:
        numbers: dict = {}
        for kind in ("real data", "stored paper-scale runs"):
            for src, v in getattr(tallies.get((paper, kind)), "numbers", {}).items():
                numbers.setdefault(src, v)
        if not numbers:
            continue
        t = Tally(numbers=numbers)
        same, near = t.at("same"), t.at("deviates")
        rest = ", ".join(f"{t.count(h)} {h}" for h in (SHOWN, STALE, SUSPECT) if t.count(h))
        lines.append(f"- **{paper}**: at the paper's setting {same[AGREES]}{_wide(same)} / {same[DIFFERS]} / "
                     f"{same[NOT_RESOLVED]}, near it {near[AGREES]}{_wide(near)} / {near[DIFFERS]} / "
                     f"{near[NOT_RESOLVED]} (agree / differ / not resolved)"
                     + (f"; {rest}" if rest else ""))
    return "\n".join(lines)


def _wide(c) -> str:
    from .headline import LOOSE

    return f" (+{c[LOOSE]} wide)" if c[LOOSE] else ""


def replace_block(text: str, block: str, where: str = "file") -> str:
    """``text`` with the lines between :data:`BEGIN` and :data:`END` replaced by ``block`` (ValueError naming
    ``where`` when the markers are missing or out of order)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{where}: needs the lines {BEGIN!r} and {END!r}, in that order, around the generated block")
    return text[:start + len(BEGIN)] + "\n" + block + "\n" + text[end:]


def current_block(text: str) -> str | None:
    """The text between the markers (None without them)."""
    start, end = text.find(BEGIN), text.find(END)
    return None if start < 0 or end < start else text[start + len(BEGIN):end].strip("\n")
