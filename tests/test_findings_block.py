"""The verdict-count blocks of FINDINGS.md and README.md equal what ``python -m figures.report.findings`` computes
from the stored paper-scale runs now: no count in them is written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from figures.report import findings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return findings.blocks()


@pytest.mark.parametrize("name", ["FINDINGS.md", "README.md"])
def test_the_verdict_block_is_what_the_stored_runs_give(generated, name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert findings.current_block(text) == generated[name], (
        f"{name} is not current: python -m figures.report.findings --write {name}")


def test_the_block_counts_each_paper_and_the_instrument(generated):
    text = generated["FINDINGS.md"]
    for paper in ("IFCA", "SR-FCA", "CLoVE"):
        assert f"- **{paper}.** Holds:" in text and f"- **{paper}** at the paper's setting:" in text
    assert "--verdict-power" in text and "published values in" in text


def test_replace_block_needs_both_markers_in_order():
    good = f"a\n{findings.BEGIN}\nold\n{findings.END}\nb\n"
    assert findings.replace_block(good, "new") == f"a\n{findings.BEGIN}\nnew\n{findings.END}\nb\n"
    for bad in ("no markers", f"{findings.END}\n{findings.BEGIN}"):
        with pytest.raises(ValueError, match="FILE.md: needs the lines"):
            findings.replace_block(bad, "new", "FILE.md")


def test_check_says_which_file_is_not_current(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(findings, "blocks", lambda data_dir=None: {"README.md": "- new"})
    path = tmp_path / "README.md"
    path.write_text(f"{findings.BEGIN}\n- old\n{findings.END}\n")
    assert findings.main(["--check", str(path)]) == 1
    assert "not current" in capsys.readouterr().err
    assert findings.main(["--write", str(path)]) == 0 and findings.main(["--check", str(path)]) == 0
    assert findings.main(["--write", str(tmp_path / "other.md")]) == 2
