"""Every command line's --help: exit status 0, plain text (no reST markup), each default stated once."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from synth.cli import main as synth_main
from theory.cli import main as theory_main

ROOT = Path(__file__).resolve().parents[1]
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _paper_repro_main():
    spec = importlib.util.spec_from_file_location("paper_repro_cli", ROOT / "paper_repro.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.main


def _nets_main():
    from nets.cli import main

    return main


CASES = [("theory", lambda: theory_main, argv) for argv in
         (["--help"], ["list", "--help"], ["show", "--help"], ["check", "--help"], ["sweep", "--help"],
          ["check", "ifca-lemma1", "--help"], ["sweep", "clove-cor-a.14", "--help"], ["atlas", "--help"],
          ["findings", "--help"], ["preference", "--help"], ["misassignment", "--help"], ["edge", "--help"])]
CASES += [("synth", lambda: synth_main, argv) for argv in
          (["--help"], ["run", "--help"], ["sweep", "--help"], ["report", "--help"])]
CASES += [("paper_repro.py", _paper_repro_main, ["--help"])]
if HAS_TORCH:
    CASES += [("nets", _nets_main, argv) for argv in (["--help"], ["run", "--help"], ["fetch", "--help"])]


def _help(capsys, get_main, argv) -> tuple[int, str]:
    try:
        rc = get_main()(argv)
    except SystemExit as exc:  # argparse's own --help exits
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out + out.err


@pytest.mark.parametrize("prog, get_main, argv", CASES, ids=[f"{c[0]} {' '.join(c[2])}" for c in CASES])
def test_help_exits_0_and_reads_cleanly(capsys, prog, get_main, argv):
    rc, text = _help(capsys, get_main, argv)
    assert rc == 0, text
    assert "usage" in text.lower() or "examples" in text.lower()
    assert "``" not in text and not re.search(r"::\s*$", text, re.MULTILINE), "raw reST markup in --help"
    flat = " ".join(text.split())
    assert not re.search(r"\(default:? [^()]*(\([^()]*\)[^()]*)*\) \(default", flat), "a default stated twice"
