"""The papers' published numbers, as data: ``figures/published/tables.csv`` and ``claims.csv``.

``tables.csv`` holds every number of the reproduced tables (value and the reported ``±``) with its source:
paper, table, group (e.g. the data mixing), row, column, and where it stands in the plain-text paper
(``file`` = the paper's id in ``../shared/papers``, ``line``, ``position`` = the index of the value among
the values of that line as :func:`values_in_line` reads them).  ``claims.csv`` holds the statements the
papers make without a table (figures that are images, "around 30 rounds"), each with a verbatim quote.
``tests/test_figures_published.py`` checks every entry against the paper text.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PAPERS", "PAPER_SEEDS", "PM_KIND", "Claim", "Published", "claim", "claims", "lookup", "table", "tables",
           "values_in_line"]

HERE = Path(__file__).parent.parent / "published"
PAPERS = {
    "000": "SR-FCA (Vardhan, Ghosh, Mazumdar)",
    "001": "IFCA journal (Ghosh, Chung, Yin, Ramchandran; IEEE TIT 2022)",
    "003": "IFCA conference version (NeurIPS 2020)",
    "004": "CLoVE (Bhatia et al.)",
}

# the seeds each paper averages over (IFCA Sec. VI, SR-FCA Sec. 5: 5; CLoVE Sec. 5.1: 3) and what its ± is: CLoVE's
# is a population SD (its Table 11's 34.0 ± 46.7 is the population SD of 1, 1, 100; a sample SD would be 57.2);
# IFCA's public code prints np.std (a population SD; ifca mnist/run.py:209); SR-FCA does not say (read as a sample
# SD: figures.verdicts.rules.PaperNumber).  The protocol ledgers (figures/published/protocols) quote the evidence, and
# tests/test_verdict_statistics.py checks that they agree with this table.
PAPER_SEEDS = {"IFCA": 5, "SR-FCA": 5, "CLoVE": 3}
PM_KIND = {"IFCA": "population SD", "SR-FCA": "unstated", "CLoVE": "population SD"}


@dataclass(frozen=True)
class Published:
    """One published number: ``value ± pm`` (``pm`` None when the paper gives none) and its source."""

    paper: str
    artifact: str
    group: str
    row: str
    column: str
    text: str
    pm_text: str
    unit: str
    file: str
    line: int
    position: int
    parse: str
    note: str

    @property
    def value(self) -> float:
        return float(self.text)

    @property
    def pm(self) -> float | None:
        return float(self.pm_text) if self.pm_text else None

    @property
    def decimals(self) -> int:
        return len(self.text.split(".")[1]) if "." in self.text else 0

    def paper_number(self) -> tuple:
        """(value, pm, decimals, seeds, what the ± is, unit, family, paper, artifact): the fields of
        :class:`figures.verdicts.rules.PaperNumber` (the family of one; the tests set their table's)."""
        return (self.value, self.pm, self.decimals, PAPER_SEEDS.get(self.paper, 1),
                PM_KIND.get(self.paper, "unstated"), self.unit, 1, self.paper, self.artifact)

    def source(self) -> str:
        where = " / ".join(x for x in (self.group, self.row, self.column) if x)
        return f"{self.paper} {self.artifact}: {where} (paper {self.file}, line {self.line})"


@dataclass(frozen=True)
class Claim:
    """A statement a paper makes without a table entry, with a verbatim quote and its line."""

    paper: str
    artifact: str
    claim_id: str
    claim: str
    value: float | None
    pm: float | None
    file: str
    line: int
    quote: str
    note: str

    def source(self) -> str:
        return f"{self.paper} {self.artifact} (paper {self.file}, line {self.line}): \"{self.quote}\""


@functools.cache
def tables() -> tuple[Published, ...]:
    """Every row of ``tables.csv``; a value or ``±`` that is not a plain finite decimal of at most 12 digits (a ``±``
    also not negative) is a ValueError naming the file, line and field."""
    path = HERE / "tables.csv"
    out = []
    with open(path, newline="", encoding="utf-8") as fh:
        for line, r in enumerate(csv.DictReader(fh), start=2):  # line 1 is the header
            where = f"{path}: line {line}"
            _check_number(where, "value", r["value"], signed=True)
            if r["pm"]:
                _check_number(where, "pm", r["pm"], signed=False)
            out.append(Published(r["paper"], r["artifact"], r["group"], r["row"], r["column"], r["value"], r["pm"],
                                 r["unit"], r["file"], int(r["line"]), int(r["position"]), r["parse"], r["note"]))
    return tuple(out)


_DECIMAL = re.compile(r"-?\d{1,6}(\.\d{1,6})?")


def _check_number(where: str, field: str, text: str, signed: bool) -> None:
    if not _DECIMAL.fullmatch(text or "") or (not signed and text.startswith("-")):
        what = "a finite decimal of at most 6 + 6 digits" + ("" if signed else ", not negative")
        raise ValueError(f"{where}: field {field!r} must be {what}, got {text[:40]!r}")


@functools.cache
def claims() -> tuple[Claim, ...]:
    """Every row of ``claims.csv``."""
    with open(HERE / "claims.csv", newline="", encoding="utf-8") as fh:
        return tuple(Claim(r["paper"], r["artifact"], r["claim_id"], r["claim"],
                           float(r["value"]) if r["value"] else None, float(r["pm"]) if r["pm"] else None,
                           r["file"], int(r["line"]), r["quote"], r["note"])
                     for r in csv.DictReader(fh))


def table(paper: str, artifact: str) -> list[Published]:
    """The published numbers of one table, in file order."""
    return [p for p in tables() if p.paper == paper and p.artifact == artifact]


def lookup(paper: str, artifact: str, row: str, column: str, group: str = "") -> Published | None:
    """The published number at (row, column[, group]) of a table, or None if the paper has none there."""
    for p in tables():
        if (p.paper, p.artifact, p.group, p.row, p.column) == (paper, artifact, group, row, column):
            return p
    return None


def claim(paper: str, claim_id: str) -> Claim:
    """The claim ``claim_id`` of ``paper``."""
    for c in claims():
        if c.paper == paper and c.claim_id == claim_id:
            return c
    raise KeyError(f"no claim {claim_id!r} of {paper!r} in claims.csv")


# -- reading values out of the paper text (the same rules the transcription used) ------------------------------

# CLoVE's text repeats each cell as unicode then LaTeX: "87.4±0.987.4\pm 0.9"; the back-references pick the
# pair apart unambiguously (the unicode form drops a minus sign the LaTeX form keeps: "0.00±0.02-0.00\pm 0.02")
_CLOVE = re.compile(r"(\d+\.\d+)±(\d+\.\d+?)(?:\\mathbf\{)*(-?)\1\\pm\s*\2")
_PM = re.compile(r"(-?\d+\.\d+)\s*(?:±|\\pm)\s*(\d+\.\d+)")


def values_in_line(line: str, parse: str) -> list[tuple[str, str]]:
    """The ``(value, pm)`` pairs of a table line of the paper text, in order (``pm`` '' when there is none).

    ``parse`` is ``clove`` (CLoVE's duplicated unicode/LaTeX cells), ``pm`` (``a ± b`` or ``$a \\pm b$``,
    bold markup removed) or ``plain`` (every decimal number after the first ``| cell |``).
    """
    if parse == "clove":
        return [(sign + a, b) for a, b, sign in _CLOVE.findall(line)]
    if parse == "pm":
        clean = re.sub(r"\\textbf\{([^}]*)\}", r"\1", line).replace("$", "")
        return _PM.findall(clean)
    if parse == "plain":
        return [(x, "") for cell in line.split("|")[2:] for x in re.findall(r"-?\d+\.\d+", cell)]
    raise ValueError(f"parse must be one of clove, pm, plain, got {parse!r}")
