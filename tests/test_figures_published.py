"""The published numbers in figures/published/*.csv against the plain-text papers (../shared/papers).

Every transcribed value is checked, not a sample: its line must contain the value and the reported ± as
written, and the parser's reading of the line at the recorded position must give exactly that pair (so a
value filed under the wrong column is caught too).  Skipped when the papers are not available.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from figures.verdicts.published import claims, lookup, tables, values_in_line

PAPERS = Path(os.environ.get("CFLAB_PAPERS", Path(__file__).resolve().parents[1].parent / "shared" / "papers"))
pytestmark = pytest.mark.skipif(not PAPERS.is_dir(), reason=f"paper texts not available at {PAPERS}")


def _lines(file_id: str) -> list[str]:
    found = sorted(PAPERS.glob(f"{file_id}_*.txt"))
    assert found, f"no paper text {file_id}_*.txt in {PAPERS}"
    return found[0].read_text(encoding="utf-8").split("\n")


@pytest.fixture(scope="module")
def papers():
    return {fid: _lines(fid) for fid in ("000", "001", "003", "004")}


def test_every_table_value_is_in_its_line_at_its_position(papers):
    rows = tables()
    assert len(rows) > 600  # IFCA I-II, SR-FCA 1-4, CLoVE 1-5 and 7-12
    for p in rows:
        line = papers[p.file][p.line - 1]
        assert p.text in line, f"{p.source()}: {p.text!r} not in line {p.line}"
        if p.pm_text:
            assert p.pm_text in line, f"{p.source()}: ± {p.pm_text!r} not in line {p.line}"
        pairs = values_in_line(line, p.parse)
        assert p.position < len(pairs), f"{p.source()}: line {p.line} has only {len(pairs)} values"
        assert pairs[p.position] == (p.text, p.pm_text), f"{p.source()}: read {pairs[p.position]}"


def test_spot_values_read_by_hand():
    # independent of the parser: values read off the paper text by eye
    assert (lookup("IFCA", "Table I", "IFCA", "Rotated MNIST (m,n)=(4800,50)").value,
            lookup("IFCA", "Table I", "IFCA", "Rotated MNIST (m,n)=(4800,50)").pm) == (94.20, 0.03)
    assert lookup("IFCA", "Table I", "local model", "Rotated CIFAR (m,n)=(200,500)").value == 33.97
    assert lookup("IFCA", "Table II", "test accuracy", "global", "FEMNIST").value == 84.45
    assert lookup("SR-FCA", "Table 1", "IFCA", "CIFAR (rotated)").value == 86.05
    assert lookup("SR-FCA", "Table 2", "CFL", "MNIST (rotated)").value == 0.14
    assert lookup("SR-FCA", "Table 2", "IFCA", "CIFAR (rotated)").value == 0.50
    assert lookup("SR-FCA", "Table 3", "Global", "Shakespeare").value == 45.28
    assert lookup("CLoVE", "Table 1", "IFCA", "CIFAR-10", "Label skew 1").pm == 6.5
    assert lookup("CLoVE", "Table 1", "CLoVE", "CIFAR-10", "Concept shift").value == 58.4
    assert lookup("CLoVE", "Table 1", "FedAvg", "CIFAR-10", "Concept shift").value == 63.1
    assert lookup("CLoVE", "Table 2", "PACFL", "MNIST", "Concept shift").text == "-0.00"
    assert lookup("CLoVE", "Table 5", "Local-only", "FMNIST").value == 0.170
    assert lookup("CLoVE", "Table 7", "CLoVE", "CIFAR-10", "Label skew 4").value == 72.6
    assert lookup("CLoVE", "Table 12", "No matching", "test accuracy", "CIFAR-10 label skew 3").value == 55.8
    assert lookup("CLoVE", "Table 11", "CLoVE", "Amazon: first round when ARI >= 90%").value == 8.3
    # a first-round cell whose dataset is ambiguous in the text (lost dashes) is deliberately absent
    assert lookup("CLoVE", "Table 4", "CFL", "FMNIST: first round when ARI >= 90%", "Concept shift") is None


def test_entries_are_unique_and_well_formed():
    keys = [(p.paper, p.artifact, p.group, p.row, p.column) for p in tables()]
    assert len(keys) == len(set(keys))
    for p in tables():
        float(p.text)
        assert p.pm is None or p.pm >= 0
        assert p.parse in ("clove", "pm", "plain")


def test_every_claim_quote_is_in_its_line(papers):
    for c in claims():
        assert c.quote in papers[c.file][c.line - 1], f"{c.paper} {c.claim_id}: quote not in line {c.line}"
    ids = [(c.paper, c.claim_id) for c in claims()]
    assert len(ids) == len(set(ids))


def test_parser_reads_clove_duplicated_cells():
    line = r"IFCA 99.1±0.599.1\pm 0.5 85.7±6.585.7\pm 6.5 -0.00 0.00±0.02-0.00\pm 0.02 1.00±0.00\mathbf{1.00\pm 0.00}"
    assert values_in_line(line, "clove") == [("99.1", "0.5"), ("85.7", "6.5"), ("-0.00", "0.02"), ("1.00", "0.00")]
    assert values_in_line(r"| SR-FCA | 83.83 ± 1.49 | $\textbf{48.54} \pm \textbf{0.69}$ |", "pm") == [
        ("83.83", "1.49"), ("48.54", "0.69")]
    assert values_in_line("| SR-FCA CFL | 0.0 0.08 | 0.0 0.14 |", "plain") == [("0.0", ""), ("0.08", ""), ("0.0", ""),
                                                                              ("0.14", "")]
