"""``python -m theory findings``: every finding recomputed live, with the command that regenerates it, and
FINDINGS.md's theory section equal to that output (so no quoted number can go stale)."""

from __future__ import annotations

import json

import pytest

from theory.cli import main
from theory.findings import FINDINGS, run_finding
from theory.laws import clove_moment_report


def test_every_finding_computes_and_names_its_command(capsys):
    rc = main(["findings", "--trials-scale", "0.05", "--json"])
    assert rc == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in recs] == list(FINDINGS)
    for r in recs:
        assert r["command"] == f"python -m theory findings --only {r['id']}"
        assert r["check"].startswith("python -m theory ")
        assert r["numbers"] and r["text"]


def test_numbers_are_the_live_computation():
    rec = run_finding("clove-stirling")
    assert rec["numbers"]["chi_n50"] == clove_moment_report(50)["mean_clove_sqrt_n_minus_1_rel_error"]
    assert f"{100 * clove_moment_report(1)['var_clove_rel_error']:+.1f}%" in rec["text"]
    prop = run_finding("srfca-prop4.1", 0.1)
    lo, hi = prop["numbers"]["ci"]
    assert prop["numbers"]["stated"] == pytest.approx(10.0) and prop["numbers"]["exact"] == pytest.approx(2.0)
    assert lo <= prop["numbers"]["mc"] <= hi


def test_only_list_and_bad_ids(capsys):
    assert main(["findings", "--list"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == len(FINDINGS)
    assert main(["findings", "--only", "clove-stirlin"]) == 2
    err = capsys.readouterr().err
    assert "clove-stirling" in err and err.count("\n") == 1
    assert main(["findings", "--trials-scale", "0"]) == 2


def test_findings_md_theory_section_is_the_commands_output():
    # FINDINGS.md's generated section must equal what `python -m theory findings --write FINDINGS.md` writes now
    from pathlib import Path

    from theory.findings import render_all, section_of

    live = render_all([run_finding(fid) for fid in FINDINGS]).strip()
    stored = section_of(Path(__file__).resolve().parents[1] / "FINDINGS.md")
    assert stored == live, "FINDINGS.md is stale: run `python -m theory findings --write FINDINGS.md`"


def test_write_needs_the_marker_lines(tmp_path, capsys):
    from theory.findings import BEGIN, END, section_of, write_section

    plain = tmp_path / "plain.md"
    plain.write_text("# no markers\n")
    assert main(["findings", "--write", str(plain)]) == 2
    assert "marker" in capsys.readouterr().err
    assert main(["findings", "--write", str(plain), "--only", "clove-stirling"]) == 2
    marked = tmp_path / "marked.md"
    marked.write_text(f"head\n{BEGIN}\nold\n{END}\ntail\n")
    write_section(marked, "new text")
    body = marked.read_text()
    assert body.startswith("head\n") and body.endswith("tail\n") and section_of(marked) == "new text"
