"""The campaign's cells: the runs of one data set at one setting (:class:`Cell`), grouped from the targets'
run requests, each with the published numbers it answers (:func:`cell_of`), and the seeds of its minimal test.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from ..verdicts.published import PAPER_SEEDS, Published, tables
from .store import RunRequest

__all__ = ["Cell", "cell_of", "cells", "minimal_seeds", "power_seeds"]

_TABLE1_MN = re.compile(r"\(m,n\)=\((\d+),(\d+)\)")
_CLOVE_MIX = {"Label skew 1": "label-skew-1", "Concept shift": "concept-shift", "Label skew 2": "label-skew-2",
              "Feature skew": "feature-skew", "Label skew 3": "label-skew-3", "Label skew 4": "label-skew-4"}
_CLOVE_BASE = {"MNIST": "mnist", "FMNIST": "fmnist", "CIFAR-10": "cifar"}


def cell_of(pub: Published) -> tuple[str, int | None]:
    """The data set (nets name) and, where a table has several, the number of clients of a published number's
    runs; the paper's table layout decides (IFCA Table I's columns are (m, n) settings, CLoVE's groups mixings)."""
    col = pub.column
    if pub.paper == "IFCA":
        if pub.artifact == "Table I":
            m = _TABLE1_MN.search(col)
            base = "mnist" if "MNIST" in col else "cifar"
            return f"{base}-rotated", int(m.group(1)) if m else None
        return "femnist", None
    if pub.paper == "SR-FCA":
        for text, ds in (("MNIST (inverted)", "mnist-inverted"), ("MNIST (rotated)", "mnist-rotated"),
                         ("CIFAR (rotated)", "cifar-rotated"), ("FEMNIST", "femnist"),
                         ("Shakespeare", "shakespeare")):
            if col.startswith(text):
                return ds, None
        raise ValueError(f"no cell for SR-FCA {pub.artifact} column {col!r}")
    # CLoVE
    if pub.artifact in ("Table 3", "Table 10", "Table 11"):
        return ("amazon" if col.startswith("Amazon") else "agnews-label-skew-2"), None
    if pub.artifact == "Table 5":
        return f"{_CLOVE_BASE[col]}-one-class", None
    if pub.artifact == "Table 12":
        return "cifar-label-skew-3", None
    base = _CLOVE_BASE[col.split(":")[0]]
    return f"{base}-{_CLOVE_MIX[pub.group]}", None


@dataclass
class Cell:
    """The runs of one data set at one setting, and the published numbers they answer."""

    folder: str
    dataset: str
    clients: int
    requests: list[RunRequest]
    published: list[Published] = field(default_factory=list)
    all_targets: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.folder}:{self.dataset}:{self.clients}"

    @property
    def paper(self) -> str:
        return self.published[0].paper if self.published else ""

    @property
    def seeds(self) -> int:
        """The seeds the target runs at full size (the paper's count)."""
        return 1 + max(r.trial for r in self.requests)

    def points(self) -> dict[int, dict]:
        return {r.point_index: r.point for r in self.requests}


def cells(requests: list[RunRequest]) -> list[Cell]:
    """The requests grouped by (folder, data set, clients), each with its published numbers."""
    groups: dict[tuple, list[RunRequest]] = {}
    for r in requests:
        groups.setdefault((r.folder, r.point.get("dataset"), int(r.point.get("clients", 0))), []).append(r)
    out = []
    for (f, d, c), rs in groups.items():
        cell = Cell(f, d, c, _unique(rs))
        cell.all_targets = sorted({r.target for r in rs})  # every target built from these runs
        out.append(cell)
    for pub in tables():
        ds, clients = cell_of(pub)
        prefix = {"IFCA": "ifca-", "SR-FCA": "srfca-", "CLoVE": "clove-"}[pub.paper]
        matches = [c for c in out if c.dataset == ds and c.folder.startswith(prefix)
                   and (clients is None or c.clients == clients)]
        if len(matches) > 1:  # a data set run by several folders of one paper: the one of the table's own target
            matches = [c for c in matches if _artifact_target(pub) in c.all_targets] or matches[:1]
        if matches:
            matches[0].published.append(pub)
    return out


def _unique(requests: list[RunRequest]) -> list[RunRequest]:
    """One request per run (a run shared by several targets, say Tables 1 and 2 of one paper, is one run)."""
    seen, out = set(), []
    for r in requests:
        if r.key not in seen:
            seen.add(r.key)
            out.append(r)
    return out


_ROMAN = {"I": "1", "II": "2"}


def _artifact_target(pub: Published) -> str:
    """The registered target of a published table (``IFCA Table II`` -> ``ifca-table2``)."""
    paper = {"IFCA": "ifca", "SR-FCA": "srfca", "CLoVE": "clove"}[pub.paper]
    number = pub.artifact.split()[-1]
    return f"{paper}-table{_ROMAN.get(number, number)}"


def minimal_seeds(cell: Cell) -> int:
    """Seeds of a cell's minimal test: 3, the fewest that give a verdict (figures.verdicts.rules.MIN_SEEDS), or the
    paper's own count if smaller.  IFCA Table I's settings too: one of their seeds takes 3-7 CPU-hours here, so they
    need a GPU (29-57 s a run on an H100)."""
    from ..verdicts.rules import MIN_SEEDS

    return min(MIN_SEEDS, cell.seeds, PAPER_SEEDS.get(cell.paper, MIN_SEEDS))


def power_seeds(cell: Cell) -> int | None:
    """Seeds at which a perfect reproduction of each of the cell's published numbers agrees with probability 0.8
    within the unit's informative limit (:func:`figures.verdicts.power.seeds_needed` with Holm over its table, the
    number ``python paper_repro.py --verdict-power`` prints), the largest over the numbers that reach it within 100
    seeds; None when none does (the paper's own spread keeps their margins wider than the limit)."""
    needed = [n for n in (_seeds_needed(p.source()) for p in cell.published) if n is not None]
    return max(needed) if needed else None


@functools.cache
def _seeds_needed(source: str) -> int | None:
    from ..verdicts.power import seeds_needed

    for members in _families().values():
        for pub, paper in members:
            if pub.source() == source:
                return seeds_needed(paper)
    return None


@functools.cache
def _families() -> dict:
    from ..verdicts.power import families

    return families(tables())
