"""The verdict-count blocks of FINDINGS.md and README.md equal what ``python paper_repro.py --write-findings``
computes from the stored paper-scale runs now: no count in them is written by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from figures.report import findings

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    import paper_repro

    return paper_repro.findings_blocks()


@pytest.mark.parametrize("name", findings.FILES)
def test_the_verdict_block_is_what_the_stored_runs_give(generated, name):
    text = (ROOT / name).read_text(encoding="utf-8")
    assert findings.current_block(text) == generated[name], (
        f"{name} is not current: python paper_repro.py --write-findings {name}")


def test_the_block_counts_each_paper_and_the_instrument(generated):
    text = generated["FINDINGS.md"]
    for paper in ("IFCA", "SR-FCA", "CLoVE"):
        assert f"- **{paper}.** Holds:" in text and f"- **{paper}** at the paper's setting:" in text
        assert f"- **{paper}**: at the paper's setting" in generated["README.md"]
    assert "--verdict-power" in text and "published values in" in text


def test_replace_block_needs_both_markers_in_order():
    good = f"a\n{findings.BEGIN}\nold\n{findings.END}\nb\n"
    assert findings.replace_block(good, "new") == f"a\n{findings.BEGIN}\nnew\n{findings.END}\nb\n"
    for bad in ("no markers", f"{findings.END}\n{findings.BEGIN}"):
        with pytest.raises(ValueError, match="FILE.md: needs the lines"):
            findings.replace_block(bad, "new", "FILE.md")


def test_write_findings_rewrites_the_block_and_refuses_other_files(tmp_path, capsys, monkeypatch):
    import paper_repro

    monkeypatch.setattr(paper_repro, "findings_blocks", lambda data_dir=None: {"README.md": "- new"})
    path = tmp_path / "README.md"
    path.write_text(f"x\n{findings.BEGIN}\n- old\n{findings.END}\ny\n")
    assert paper_repro.main(["--write-findings", str(path)]) == 0
    assert findings.current_block(path.read_text()) == "- new" and path.read_text().startswith("x\n")
    other = tmp_path / "other.md"
    other.write_text("z")
    assert paper_repro.main(["--write-findings", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--write-findings takes FINDINGS.md or README.md" in err
