"""The verdict-count blocks of FINDINGS.md and README.md, generated from the rows of the stored paper-scale runs.

::

    python -m figures.report.findings --write FINDINGS.md README.md

runs the ``measured-runs`` target (it reads ``figures/measured/``; a few CPU seconds) and writes, between the
markers :data:`BEGIN` and :data:`END` of each file, per paper the sentences of the report's headline (what holds,
what differs, what is untested and why: :func:`figures.report.headline.paper_sentences`) and its published-number
counts at the paper's setting and near it (:func:`figures.report.headline.verdict_sentences`, each published value
once), and the summary line of ``python paper_repro.py --verdict-power`` (how often a perfect reproduction agrees)
-- README.md gets the counts only.  ``tests/test_findings_block.py`` holds both files equal to what this
computes now, so no count in them is written by hand.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["BEGIN", "END", "blocks", "replace_block", "stored_verdicts"]

BEGIN = "<!-- verdict counts: begin (python -m figures.report.findings) -->"
END = "<!-- verdict counts: end -->"
TARGET = "measured-runs"


def stored_verdicts(data_dir: str | None = None) -> tuple[dict, dict]:
    """(per-paper sentences, per-(paper, kind) tallies) of the stored paper-scale runs, as the report computes them
    from the ``measured-runs`` target's rows."""
    from figures import Context, load_targets
    from figures.report.headline import data_kind, paper_sentences, row_record, tally

    target = load_targets()[TARGET]
    with tempfile.TemporaryDirectory(prefix="cflab-findings-") as tmp:
        section = target.run(Context(out=Path(tmp), size="quick", n_jobs=1, data_dir=data_dir, progress=False))
    rows = list(getattr(section, "rows", []))
    entries = [(TARGET, target.paper, data_kind(target.kind, "quick"), [row_record(r) for r in rows])]
    gaps = {}
    for r in rows:
        try:
            gaps[r.item] = float(str(r.difference).replace("−", "-"))
        except ValueError:
            continue
    return paper_sentences(entries, [], "quick", gaps), tally(entries)


def blocks(data_dir: str | None = None) -> dict[str, str]:
    """The generated text between the markers: ``"FINDINGS.md"`` (sentences and counts per paper) and
    ``"README.md"`` (the counts)."""
    from figures.campaign.planner import HERE, MANIFEST
    from figures.report.headline import paper_sentence_lines, verdict_sentences
    from figures.verdicts.power import power_table

    sentences, tallies = stored_verdicts(data_dir)
    counts = [f"- {s}" for s in verdict_sentences(tallies)]
    power = power_table(HERE / MANIFEST).splitlines()[-1]
    return {"FINDINGS.md": "\n".join(paper_sentence_lines(sentences) + counts
                                     + [f"- The instrument (`python paper_repro.py --verdict-power`): {power}."]),
            "README.md": _compact(tallies)}


def _compact(tallies: dict) -> str:
    """One line per paper: its published numbers at the paper's setting and near it (agree / differ / not
    resolved), and those shown without a verdict -- the counts of :func:`~figures.report.headline.verdict_sentences`
    in fewer words."""
    from figures.report.headline import PAPERS, Tally
    from figures.verdicts.rules import AGREES, DIFFERS, NOT_RESOLVED, SHOWN, STALE, SUSPECT

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
        lines.append(f"- **{paper}**: at the paper's setting {same[AGREES]} / {same[DIFFERS]} / {same[NOT_RESOLVED]}, "
                     f"near it {near[AGREES]} / {near[DIFFERS]} / {near[NOT_RESOLVED]} (agree / differ / not resolved)"
                     + (f"; {rest}" if rest else ""))
    return "\n".join(lines)


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


def main(argv: Sequence[str] | None = None) -> int:
    """Write (``--write``) or check (``--check``: exit 1 when a file's block differs) the generated blocks."""
    from synth.errors import run_main

    def body(args: list[str]) -> int:
        parser = argparse.ArgumentParser(prog="python -m figures.report.findings", description=__doc__.split("\n\n")[0])
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--write", nargs="+", metavar="FILE", help="FINDINGS.md and/or README.md to rewrite")
        mode.add_argument("--check", nargs="+", metavar="FILE", help="exit 1 when a file's block is not current")
        parser.add_argument("--data-dir", default=None, help="the data directory (the stored runs need none)")
        ns = parser.parse_args(args)
        files = [Path(f) for f in (ns.write or ns.check)]
        for f in files:
            if f.name not in ("FINDINGS.md", "README.md"):
                raise ValueError(f"FILE must be FINDINGS.md or README.md, got {str(f)!r}")
        generated = blocks(ns.data_dir)
        stale = []
        for f in files:
            text = f.read_text(encoding="utf-8")
            if ns.write:
                f.write_text(replace_block(text, generated[f.name], str(f)), encoding="utf-8")
                print(f"{f}: verdict counts written")
            elif current_block(text) != generated[f.name]:
                stale.append(str(f))
        if stale:
            print(f"not current: {', '.join(stale)} (python -m figures.report.findings --write {' '.join(stale)})",
                  file=sys.stderr)
            return 1
        return 0

    return run_main("python -m figures.report.findings", body, sys.argv[1:] if argv is None else list(argv))


if __name__ == "__main__":
    sys.exit(main())
