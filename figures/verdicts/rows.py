"""One line of a comparison table (:class:`Row`), shared by :mod:`figures.verdicts.compare` (which builds the tables)
and :mod:`figures.verdicts.rules` (which judges their numbers)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Row"]


@dataclass
class Row:
    """One line of a comparison table."""

    item: str
    paper: str
    reproduced: str
    difference: str
    verdict: str
    source: str = ""
    note: str = ""
    compared: str = ""  # keys of the published numbers an ordering row compares (';'-separated), for the headline
    # (mean, std, n) of the reproduced number at the paper's scale (x scale), for tests against the paper's ±
    stats: tuple | None = None
    # a reproduced number at the paper's setting: the published number it is tested against (value, pm, decimals,
    # paper's seeds, what its ± is; figures.verdicts.rules.PaperNumber), for the tests with Holm over its table
    paper_number: tuple | None = None
    # the protocol class of a paper-scale row (figures.verdicts.protocol: "same", "deviates", ""), and whether the
    # headline counts it (False for a published value's second protocol, shown beside the counted row)
    protocol: str = ""
    counted: bool = True
