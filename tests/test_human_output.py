"""Output meant for people rounds floats to 4 significant digits; ``--json`` keeps every digit (synth.cli.human, used by
``python -m theory check|sweep|preference|misassignment|edge``, ``python -m synth run`` and ``python -m nets run``)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from synth.cli import human
from synth.cli import main as synth_main
from theory.cli import main as theory_main

NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:e[+-]?\d+)?(?![\w.])")


def significant_digits(number: str) -> int:
    """``"0.0004439"`` -> 4, ``"1.386"`` -> 4, ``"4.011e-14"`` -> 4, ``"100"`` -> 1."""
    mantissa = number.lstrip("-").split("e")[0].replace(".", "")
    return len(mantissa.strip("0")) or 1


def test_human_rounds_floats_alone_and_in_containers():
    assert human(0.00044385664790311767) == "0.0004439"
    assert human(0.27067056647322524) == "0.2707"
    assert human(np.float32(1.3862943)) == "1.386"
    assert human(4.0105e-14) == "4.011e-14"
    assert human(float("inf")) == "inf" and human(float("nan")) == "nan"
    assert human(100) == "100" and human(True) == "True" and human("ifca") == "ifca" and human(None) == "None"
    assert human([0.18041237, 0.68041237]) == "[0.1804, 0.6804]"
    assert human({"lr": 0.123456, "name": "x"}) == "{'lr': 0.1235, 'name': 'x'}"
    assert human((0.5,)) == "(0.5,)" and human(["a", 2]) == "['a', 2]"


def test_theory_check_prints_4_digits_and_json_every_digit(capsys):
    argv = ["check", "ifca-lemma1", "--trials", "2000"]
    assert theory_main(argv) == 0
    text = capsys.readouterr().out
    numbers = {}
    for line in text.splitlines():
        key = line.split()[0] if line.strip() else ""
        if key in ("bound", "exact", "empirical", "CI", "fitted"):
            numbers[key] = NUMBER.findall(line.split(")", 1)[-1] if key == "CI" else line.split("(", 1)[0])
    assert set(numbers) == {"bound", "exact", "empirical", "CI", "fitted"}, text
    assert all(significant_digits(x) <= 4 for found in numbers.values() for x in found), numbers
    assert numbers["exact"] == ["0.0004439"] and numbers["bound"] == ["0.2707"]
    assert theory_main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["exact"] == pytest.approx(0.00044385664790311767, rel=1e-12)  # the JSON is not rounded
    assert len(repr(record["bound"])) > 10


def test_theory_law_commands_round_for_people_only(capsys):
    argv = ["misassignment", "--k", "3", "--alpha", "0.25", "--delta", "1", "--sigma", "0.5", "--n", "20"]
    assert theory_main(argv) == 0
    lines = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert all(significant_digits(x) <= 4 for key in ("shared", "lambdas", "prob", "abs_error")
               for x in NUMBER.findall(lines[key])), lines
    assert theory_main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert human(record["prob"]) == lines["prob"].strip() and significant_digits(repr(record["prob"])) > 4


def test_synth_run_prints_4_digits_and_json_every_digit(capsys):
    argv = ["run", "--rounds", "5", "--seed", "1"]
    assert synth_main(argv) == 0
    lines = dict(line.split(": ", 1) for line in capsys.readouterr().out.splitlines())
    assert synth_main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    floats = [k for k, v in record.items() if isinstance(v, float) and k != "seconds"]
    assert "param_error" in floats
    for key in floats:
        assert lines[key.rjust(len(max(record, key=len)))] == human(record[key])
        assert significant_digits(lines[key.rjust(len(max(record, key=len)))]) <= 4
    assert significant_digits(repr(record["param_error"])) > 4  # the JSON keeps the digits


def test_nets_run_prints_4_digits(capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main
    from tests.test_nets_cli import TINY

    assert nets_main(["run", *TINY, "--algo", "global"]) == 0
    lines = {k.strip(): v for k, v in (line.split(": ", 1) for line in capsys.readouterr().out.splitlines())}
    for key in ("test_accuracy", "test_loss", "seconds"):
        assert NUMBER.fullmatch(lines[key]) and significant_digits(lines[key]) <= 4, lines[key]
