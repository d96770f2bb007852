"""The headline's tables count what their captions define; claims follow the orderings' rule; status files are
verified before anything of them is counted."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from figures.report.headline import CAPTIONS, TABLES, classify, headline_markdown, tally
from figures.report.headline import row_record as record
from figures.report.status import digest, done_status, read_status
from figures.verdicts.compare import Row
from figures.verdicts.rules import compare_pair, equal_claim, holm, level_claim, order_claim, ordering_rows, welch
from tests.test_verdicts import _pub

TARGET, OTHER = "ifca-fig3c", "ifca-fig3d"  # the targets of conftest's tiny_out run


def _tables(markdown: str) -> dict[str, list[dict]]:
    """Every table of the headline as ``{heading: [row dict]}``."""
    out, heading, lines = {}, None, markdown.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("### "):
            heading = line[4:]
        if line.startswith("| paper |") and heading:
            cols = [c.strip() for c in line.strip("|").split("|")]
            rows = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                rows.append(dict(zip(cols, [c.strip() for c in row.strip("|").split("|")], strict=True)))
            out[heading] = rows
    return out


def test_every_column_is_defined_in_its_caption():
    text = headline_markdown({}, [], "quick")
    for key, (_, heading, cols) in TABLES.items():
        assert f"### {heading}" in text and CAPTIONS[key] in text
        for col, _, _ in cols:
            assert f"**{col}**:" in CAPTIONS[key], col


_PN = (90.0, 1.0, 1, 5, "unstated")  # a published 90.0 ± 1.0, the mean of 5 seeds


def _rows() -> list[dict]:
    """Rows of every class, with the counts each column's definition gives."""
    rows = [Row("c: A vs B (ordering)", "", "", "—", "agrees (same order)", compared="c/A;c/B"),
            Row("c: A vs C (ordering)", "", "", "—", "differs (opposite order)", compared="c/A;c/C"),
            Row("c: B vs C (ordering)", "", "", "—", "not resolved (no significant order)", compared="c/B;c/C"),
            Row("d: A vs B (ordering)", "", "", "—", "shown (n = 2, 2: no verdict below 3 seeds)",
                compared="d/A;d/B"),
            Row("x1", "", "", "", "agrees (equivalent)", source="x1", paper_number=_PN, protocol="same"),
            Row("x2", "", "", "", "not resolved at n = 3 (gap +1)", source="x2", paper_number=_PN, protocol="same"),
            Row("y", "", "", "", "differs (gap +5)", source="y", paper_number=_PN, protocol="deviates"),
            Row("e", "", "", "", "agrees (equivalent)", source="e", paper_number=_PN, protocol="deviates"),
            Row("f", "", "", "", "shown (n = 1: no verdict below 3 seeds)", source="f", paper_number=_PN),
            Row("g", "", "", "", "stale (protocol corrected)", source="g"),
            Row("claim 1", "", "", "—", "agrees"), Row("claim 2", "", "", "—", "differs (B ahead of A)"),
            Row("claim 3", "", "", "—", "not resolved (no significant order after Holm)"),
            Row("claim 4", "", "", "—", "shown (fewer than 3 seeds: A 2; no verdict)"),
            Row("s1", "", "", "", "not comparable (medium run: 20 rounds)"),
            Row("n1", "", "", "", "not run (data not available: cifar10)"),
            Row("n2", "", "", "", "not run (algorithm not in the toolkit)"),
            Row("t1", "", "", "", "holds"), Row("t2", "", "", "", "vacuous (numerically: holds)"),
            Row("fi", "", "", "", "finding (CFL never split)"), Row("o", "", "", "", "no published value")]
    return [record(r) for r in rows]


def test_headline_counts_follow_the_captions():
    rows = _rows()
    entries = [("t1", "CLoVE", "real data", rows), ("t2", "CLoVE", "stand-in (8x8 digits)", rows),
               ("t3", "CLoVE", "synthetic / theory", rows)]
    tables = _tables(headline_markdown(tally(entries), [], "medium"))
    real = tables["Real data and stored paper-scale runs"][0]
    # the four published numbers tested with 3+ seeds (x1, x2, y, e), each once; orderings add none
    assert real["published numbers tested"] == "4"
    assert real["at the paper's setting: agree / differ / not resolved"] == "1 / 0 / 1"  # x1, x2
    assert real["near the paper: agree / differ / not resolved"] == "1 / 1 / 0"  # e, y
    assert real["shown (n < 3) / stale / suspect"] == "1 / 1 / 0"  # f, g
    assert real["orderings agree / differ / not resolved"] == "1 / 1 / 1"
    assert real["claims agree / differ / not resolved"] == "1 / 1 / 1"
    assert real["shown only (reduced setting)"] == "1"
    assert "1: data not available" in real["not run, and why"] and "1: algorithm not in the toolkit" in \
        real["not run, and why"]
    stand = tables["Stand-in runs (8x8 digits in place of MNIST)"][0]
    # the stand-in is a different data set: its numbers are shown, never tested against the paper's (x1 .. g)
    assert stand["stand-in numbers (shown, never compared)"] == "7"
    assert stand["orderings agree / differ / not resolved"] == "1 / 1 / 1"
    assert stand["claims agree / differ / not resolved"] == "1 / 1 / 1"
    synth = tables["Synthetic experiments and theory"][0]
    assert synth["bounds hold / violated / vacuous / assumptions not met"] == "1 / 0 / 1 / 0"
    assert synth["findings"] == "1"
    assert synth["claims agree / differ / not resolved"] == "1 / 1 / 1"


def test_one_published_value_under_two_protocols_is_one_number_compared():
    src = "IFCA Table I: IFCA / Rotated MNIST (m,n)=(2400,100) (paper 001, line 278)"
    pn = (95.05, 0.02, 2, 5, "unstated")
    rows = [record(Row("T-I / IFCA [own test]", "95.05 ± 0.02", "94.08", "", "differs (gap -1)", source=src,
                       paper_number=pn, protocol="same", counted=False)),
            record(Row("T-I / IFCA", "95.05 ± 0.02", "93.89", "", "not resolved at n = 3", source=src,
                       paper_number=pn, protocol="same")),
            record(Row("T-I / Global", "88.65 ± 0.08", "88.60", "", "agrees (equivalent)",
                       source=src.replace("IFCA /", "global /"), paper_number=pn, protocol="same"))]
    real = _tables(headline_markdown(tally([("t", "IFCA", "stored paper-scale runs", rows)]), [], "medium"))[
        "Real data and stored paper-scale runs"][0]
    assert real["published numbers tested"] == "2"
    # each value once, by its counted row: the second protocol's row is shown, not counted
    assert real["at the paper's setting: agree / differ / not resolved"] == "1 / 0 / 1"


def test_classes_of_the_verdict_words():
    assert classify({"verdict": "agrees (same order)", "compared": "c/A;c/B"}) == "ordering"
    assert classify({"verdict": "agrees", "compared": ""}) == "claim"
    assert classify({"verdict": "not resolved at n = 3 (gap +1)", "compared": "", "number": True}) == "number"
    assert classify({"verdict": "not resolved (no significant order)", "compared": ""}) == "claim"
    assert classify({"verdict": "finding (significant rise: both)", "compared": ""}) == "finding"
    assert classify({"verdict": "assumptions not met (numerically: holds)", "compared": ""}) == "theory"


@pytest.mark.parametrize("seed", range(12))
def test_a_claim_of_one_order_reads_as_the_ordering_row(seed):
    """The claim 'A > B' and the ordering row of A and B (paper: A above B) give the same verdict on any seeds."""
    rng = np.random.default_rng(seed)
    n = [2, 3, 4, 5][seed % 4]
    a = list(rng.normal(0.6 + 0.1 * (seed % 3), 0.05, n))
    b = list(rng.normal(0.6, 0.05, n))
    p = welch(a, b)[3] if n >= 2 else None
    row = compare_pair(1, a, b, holm([p])[0])
    claim = order_claim({"A": a, "B": b}, [("A", "B")])
    assert row.split(" (")[0] == claim.split(" (")[0], (row, claim)
    pubs = {"A": _pub("A", "90.0", "1.0"), "B": _pub("B", "80.0", "1.0")}
    ordering = ordering_rows("c", pubs, {"A": a, "B": b})[0].verdict
    assert ordering.split(" (")[0] == claim.split(" (")[0]


def test_two_seeds_never_decide_a_claim():
    big = {"IFCA": [0.9, 0.91], "Global": [0.1, 0.12], "Local": [0.2, 0.21]}
    assert order_claim(big, [("IFCA", "Global"), ("IFCA", "Local")]).startswith("shown (fewer than 3")
    assert level_claim({"x": [0.0, 0.0]}, 0.5, below=True).startswith("shown (fewer than 3")
    assert equal_claim({"x": [1.0, 1.0]}, 1.0, margin=0.1).startswith("shown (fewer than 3")
    three = {"IFCA": [0.9, 0.91, 0.92], "Global": [0.1, 0.12, 0.11], "Local": [0.2, 0.21, 0.22]}
    assert order_claim(three, [("IFCA", "Global"), ("IFCA", "Local")]) == "agrees"
    assert order_claim(three, [("Global", "IFCA")]).startswith("differs")
    assert level_claim({"x": [0.0, 0.01, 0.0]}, 0.5, below=True) == "agrees"
    assert level_claim({"x": [0.9, 0.91, 0.9]}, 0.5, below=True).startswith("differs")
    assert equal_claim({"x": [1.0, 1.0, 1.0]}, 1.0, margin=0.1).startswith("agrees")
    # not significantly different is no agreement: equality needs equivalence within the stated margin
    assert equal_claim({"x": [3.0, 4.0, 4.0]}, 3.0, margin=0.5).startswith("not resolved")
    assert equal_claim({"x": [4.0, 4.0, 4.0]}, 3.0, margin=0.5).startswith("differs")


# -- status files ----------------------------------------------------------------------------------------------



def _headline_cells(out):
    return _tables((out / "report.md").read_text().split("## Targets")[0])


def test_a_done_status_is_verified_against_its_rows_and_section(tiny_out):
    st = read_status(tiny_out, TARGET, "tiny")
    assert st.state == "done" and st.rows
    data = json.loads((tiny_out / TARGET / "status-tiny.json").read_text())
    assert data["digest"] == digest(data["rows"], data["title"], "tiny", data["run_size"],
                                    (tiny_out / TARGET / "section-tiny.md").read_text())
    assert done_status(data["rows"], data["title"], "tiny", "tiny", "other text", 1.0)["digest"] != data["digest"]


def test_a_fifo_in_place_of_a_status_does_not_hang(tmp_path):
    folder = tmp_path / TARGET
    folder.mkdir()
    os.mkfifo(folder / "status-tiny.json")
    st = read_status(tmp_path, TARGET, "tiny")
    assert st.state == "unreadable" and "not a regular file" in st.reason


def test_report_html_opens_with_the_headline_and_links_each_figure_above_its_table(tiny_out):
    page = (tiny_out / "report.html").read_text()
    assert page.index("Headline (tiny)") < page.index(f'id="{TARGET}"')
    assert "Where the real-data verdicts are" in page and "figures/measured/medium_run" in page
    section = page[page.index(f'id="{TARGET}"'):]
    grid = section[section.index('<div class="target">'):]
    # each figure at the page's width, above the table, a link to its full-size file (click to enlarge)
    assert grid.index(f'<a href="{TARGET}/') < grid.index('<img src="') < grid.index('<div class="verdicts"><table>')
    assert "data:image/png;base64" not in page  # linked, not embedded: the page opens at once
    assert len(page.encode()) < 2_000_000


def _visible_text(page: str) -> str:
    from html.parser import HTMLParser

    class Text(HTMLParser):
        def __init__(self):
            super().__init__()
            self.parts, self.skip = [], 0

        def handle_starttag(self, tag, attrs):
            self.skip += tag in ("style", "script")

        def handle_endtag(self, tag):
            self.skip -= tag in ("style", "script")

        def handle_data(self, data):
            if not self.skip:
                self.parts.append(data)

    p = Text()
    p.feed(page)
    return "".join(p.parts)


def test_report_html_shows_no_raw_markdown(tiny_out):
    text = _visible_text((tiny_out / "report.html").read_text())
    assert "**" not in text and "](" not in text, [line for line in text.splitlines() if "**" in line or "](" in
                                                    line][:5]


def test_bold_around_code_renders():
    from figures.report.html_report import inline

    text = _visible_text(inline("**IFCA Table I: `r.json` [stored run]**: seeds `[0]`; see [the README](a/README.md)"))
    assert "**" not in text and "](" not in text and "r.json" in text
    assert inline("*x* and `*y*`") == "<i>x</i> and <code>*y*</code>"


def test_a_caption_over_two_lines_stays_one_image_line():
    from figures.verdicts.compare import build_section

    sec = build_section("t", "intro", "f", [("a.png", "first line\nsecond line")], [], ["a.png"])
    assert "![first line second line](f/a.png)" in sec.markdown


def test_report_html_puts_real_data_and_paper_scale_targets_first(tmp_path):
    from figures import load_targets
    from figures.report.html_report import _order
    from figures.report.status import Status

    targets = load_targets()
    st = {"ifca-fig3a": Status("ifca-fig3a", tmp_path, "done", {"run_size": "quick"}),
          "clove-fig2": Status("clove-fig2", tmp_path, "done", {"run_size": "quick"}),
          "clove-table1": Status("clove-table1", tmp_path, "done", {"run_size": "medium"}),
          "clove-table3": Status("clove-table3", tmp_path, "pending", {}, "no data"),
          "measured-runs": Status("measured-runs", tmp_path, "done", {"run_size": "medium"})}
    assert _order(st, targets, "medium") == ["measured-runs", "clove-table1", "clove-fig2", "ifca-fig3a",
                                              "clove-table3"]


def test_a_quick_headline_points_to_the_real_data_and_shows_the_stored_rows(tmp_path):
    from figures import load_targets
    from figures.report.assemble import MEDIUM_RECORD, headline
    from figures.report.status import Status

    targets = load_targets()
    folder = tmp_path / "measured-runs"
    folder.mkdir()
    rows = [Row("IFCA Table I: IFCA / Rotated MNIST (m,n)=(2400,100) [stored run]", "94.20 ± 0.03",
                "94.21 ± 0.01 (n=3)", "+0.01", "agrees (equivalent within ±0.035)", source="IFCA Table I: x",
                paper_number=(94.20, 0.03, 2, 5, "unstated"), protocol="same")]
    from figures.verdicts.compare import write_rows

    write_rows(rows, folder / "comparison.csv")
    statuses = {name: Status(name, tmp_path, "not run", reason="none") for name in targets}
    statuses["measured-runs"] = Status("measured-runs", tmp_path, "done",
                                       {"rows": [record(r) for r in rows], "run_size": "quick"})
    text = headline(tmp_path, targets, "quick", statuses)
    assert "Where the real-data verdicts are" in text and "--size medium" in text and MEDIUM_RECORD in text
    assert "### Stored paper-scale rows" in text and "94.21 ± 0.01 (n=3)" in text
    paper = _tables(text)["Real data and stored paper-scale runs"]
    assert [(r["data"], r["at the paper's setting: agree / differ / not resolved"]) for r in paper] == \
        [("stored paper-scale runs", "1 / 0 / 0")]
    assert "Where the real-data verdicts are" not in headline(tmp_path, targets, "medium", statuses)


def test_targets_never_run_in_the_folder_are_left_out_of_the_headline(tmp_path):
    # `paper_repro.py --only X`: the other targets have no status file; the target table lists them, the headline not
    from figures import load_targets
    from figures.report.assemble import headline
    from figures.report.status import Status

    targets = load_targets()
    statuses = {name: Status(name, tmp_path, "not run", reason="no status file in this output folder")
                for name in targets}
    statuses["clove-table3"] = Status("clove-table3", tmp_path, "pending", {}, "no data")
    text = headline(tmp_path, targets, "quick", statuses)
    assert "`clove-table3`" in text and "no data" in text
    assert "no status file" not in text and "`ifca-fig3a`" not in text


def test_theory_rows_count_under_their_paper():
    from figures.report.headline import paper_of

    assert paper_of("beyond papers", "srfca-lemma4.6 at n=25") == "SR-FCA"
    assert paper_of("beyond papers", "clove-lemma-a.1 at sigma=0.1") == "CLoVE"
    assert paper_of("beyond papers", "ifca-thm1 at sigma=0.1") == "IFCA"
    assert paper_of("beyond papers", "SR-FCA: cells with misclustering <= 0.05") == "beyond papers"
    assert paper_of("all papers", "IFCA Table I: IFCA / Rotated MNIST") == "IFCA"
