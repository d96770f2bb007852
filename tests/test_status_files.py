"""A target's status file is checked before the report uses it: a bad file is listed as unreadable (naming it) while the
other targets are reported, and a forged or edited "done" status is counted nowhere (figures.report.status).

These tests use only ``paper_repro.py`` and the ``report.md`` it writes, so that they judge any version of it.
"""

from __future__ import annotations

import json
import shutil

import paper_repro
from figures.verdicts.rules import head

TARGET, OTHER = "ifca-fig3c", "ifca-fig3d"  # the targets of conftest's tiny_out run



def _headline_rows(report: str) -> list[dict]:
    """Every row of every headline table (the tables whose first column is 'paper')."""
    lines = report.split("## Targets")[0].splitlines()
    rows = []
    for i, line in enumerate(lines):
        if line.startswith("| paper |"):
            cols = [c.strip() for c in line.strip("|").split("|")]
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(cols, [c.strip() for c in row.strip("|").split("|")], strict=True)))
    return rows


def test_a_bad_status_file_is_listed_and_the_others_reported(tiny_out, capsys, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(tiny_out, out)
    (out / "report.md").unlink()
    bad = out / "clove-fig3a" / "status-tiny.json"
    bad.parent.mkdir(parents=True, exist_ok=True)
    bad.write_text("{not json")
    code = paper_repro.main(["--tiny", "--only", TARGET, "--out", str(out), "--n-jobs", "1"])
    err = capsys.readouterr().err
    assert (out / "report.md").exists(), f"no report (exit {code}): {err}"
    assert code == 1 and str(bad) in err
    report = (out / "report.md").read_text()
    assert f"unreadable: {bad}" in report and f"(`{TARGET}`)" in report  # the other target is reported
    assert _headline_rows(report)


def test_a_forged_or_edited_done_status_is_not_counted(tiny_out, tmp_path):
    out = tmp_path / "out"
    shutil.copytree(tiny_out, out)
    forged = out / "clove-table12" / "status-tiny.json"
    forged.parent.mkdir(parents=True, exist_ok=True)
    rows = [{"item": f"x{i}", "verdict": "agrees (equivalent)", "compared": "", "number": True, "source": f"x{i}"}
            for i in range(99)]
    forged.write_text(json.dumps({"status": "done", "title": "forged", "verdicts": {"agrees": 99}, "rows": rows,
                                  "run_size": "medium", "size": "tiny", "seconds": 1.0}))
    (out / "clove-table12" / "section-tiny.md").write_text("forged")
    # and a real status edited after its run: one verdict turned into "agrees", the counts made to match
    real = out / TARGET / "status-tiny.json"
    data = json.loads(real.read_text())
    data["rows"][0]["verdict"] = "agrees (equivalent)"
    heads = [head(r["verdict"]) for r in data["rows"]]
    data["verdicts"] = {h: heads.count(h) for h in heads}
    real.write_text(json.dumps(data))
    paper_repro.main(["--tiny", "--only", OTHER, "--out", str(out), "--n-jobs", "1"])
    report = (out / "report.md").read_text()
    rows = _headline_rows(report)
    assert rows  # the target run now is still counted
    for row in rows:  # neither the forged rows nor the edited one are counted anywhere
        assert not any("99" in cell for cell in row.values()), row
    assert "| `clove-table12` | CLoVE | unreadable:" in report
