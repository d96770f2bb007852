"""report.html of a real ``python paper_repro.py --quick`` run: the page a new user reads first.

A quick run takes about 7 minutes on 2 quiet cores (12 under load), more than the default test command can spend,
so these tests run only when asked: ``CFLAB_QUICK_PAGE=DIR`` checks the quick run already written to ``DIR`` (its
``report.html``), ``CFLAB_QUICK_PAGE=run`` runs one into a temporary folder first.  Otherwise they skip, saying so.
tests/test_report_page.py checks the same properties on a page assembled from realistic sections in every run.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from figures.report.html_report import png_size

WHERE = os.environ.get("CFLAB_QUICK_PAGE", "")


@pytest.fixture(scope="module")
def quick_page(tmp_path_factory) -> tuple[Path, str]:
    if not WHERE:
        pytest.skip("set CFLAB_QUICK_PAGE=DIR (a --quick run's output) or =run to check a real quick page")
    if WHERE == "run":
        import paper_repro

        out = tmp_path_factory.mktemp("quick")
        paper_repro.main(["--quick", "--out", str(out)])
    else:
        out = Path(WHERE)
    path = out / "report.html"
    return path, path.read_text(encoding="utf-8")


def test_the_quick_page_is_under_300_kb(quick_page):
    _, text = quick_page
    assert len(text.encode()) < 300_000, len(text.encode())


def test_the_quick_page_opens_with_the_headline_and_one_table_per_paper(quick_page):
    _, text = quick_page
    first = text[:text.index("<details")]
    assert "Headline (quick)" in first
    for paper in ("IFCA", "SR-FCA", "CLoVE"):
        assert f"<h3>{paper}</h3><table class='paper'>" in first
    assert first.count("What holds") == first.count("What differs") == first.count("What is untested") == 3


def test_the_quick_page_is_short_with_its_sections_closed(quick_page):
    from test_report_page import page_height

    path, _ = quick_page
    height = page_height(path)
    if height is None:
        pytest.skip("no headless Chromium")
    assert height < 8000, height


def test_no_image_of_the_quick_page_is_shown_wider_than_its_pixels(quick_page):
    from test_report_page import images

    path, text = quick_page
    found = images(text)
    assert found
    for a in found:
        assert (int(a["width"]), int(a["height"])) == png_size(path.parent / a["src"]), a


def test_each_protocol_sentence_of_the_quick_page_is_said_once_per_cell(quick_page):
    _, text = quick_page
    said = []
    for item in re.findall(r"<li.*?</li>", text, flags=re.S):
        plain = re.sub(r"<[^>]+>", "", item)
        cell = re.search(r"cell ([\w.:-]+)", plain)
        # a cell's protocol summary (figures.verdicts.protocol.Ledger.summary) in a row's note
        for sentence in re.findall(r"protocol: (?:near the paper|at the paper's setting)[^;]*", plain):
            said.append((cell.group(1) if cell else "", sentence))
    assert said
    repeated = [x for x in said if said.count(x) > 1]
    assert not repeated, repeated[:2]
