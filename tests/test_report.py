"""Sweep reports: Wilson and t intervals against scipy, the success rule, boundaries, and a rendered report.

All checks are exact or compare against scipy's own implementations to 1e-12; none is statistical.
"""

from __future__ import annotations

import csv
import math
import struct

import numpy as np
import pytest
from scipy import stats

from synth.cli import main
from synth.report import boundary_curve, build_report, load_sweep, mean_interval, wilson_interval
from synth.store import RECORDS_FILE
from synth.sweep import evaluate, parse_spec, run_sweep, success_of

RAW = {
    "name": "report-demo",
    "description": "a tiny sweep for the report tests",
    "seed": 3,
    "trials": 3,
    "fixed": {"K": 2, "clients_per_cluster": 4, "d": 5, "sigma": 0.1, "rounds": 25},
    "grid": {"R": [0.5, 2.0], "n": [10, 40]},
    "algorithms": [{"label": "IFCA", "algo": "ifca", "step_size": [0.1, 1.0], "n_init": 2},
                   {"label": "IFCA-diverging", "algo": "ifca", "step_size": 1e4}],
    # best of the restarts where there are several, else the single run's error
    "success": {"metric": ["param_error_best_restart", "param_error"], "max": "0.6 * sigma"},
    "outputs": {"metrics": ["param_error", "misclustering"], "history": True,
                "curves": [{"x": "R"}, {"x": "n", "y": "param_error"}],
                "heatmaps": [{"x": "R", "y": "n", "boundaries": [
                    {"label": "demo: n = 10 / R", "y": "10 / x"}, {"label": "demo: R = 1", "x": "1 + 0 * y"}]}]},
}


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep")
    run_sweep(parse_spec(RAW), out, progress=False)
    return out


@pytest.fixture(scope="module")
def report_dir(sweep_dir):
    """The report, rendered once through the command line."""
    assert main(["report", str(sweep_dir), "--out", str(sweep_dir / "r2")]) == 0
    return sweep_dir / "r2"


# -- intervals ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("k, n", [(0, 1), (0, 20), (3, 20), (10, 20), (20, 20), (7, 40), (1, 3)])
@pytest.mark.parametrize("confidence", [0.9, 0.95])
def test_wilson_matches_scipy(k, n, confidence):
    lo, hi = wilson_interval(k, n, confidence)
    ref = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert lo == pytest.approx(ref.low, abs=1e-12) and hi == pytest.approx(ref.high, abs=1e-12)


def test_wilson_vectorised_and_edge_cases():
    lo, hi = wilson_interval([0, 5], [0, 10])
    assert (lo[0], hi[0]) == (0.0, 1.0) and 0 < lo[1] < 0.5 < hi[1] < 1  # no trial: the whole range
    with pytest.raises(ValueError, match=r"successes must be in \[0, n\]"):
        wilson_interval(4, 3)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\), got 1.0"):
        wilson_interval(1, 3, confidence=1.0)


def test_mean_interval_matches_scipy_t():
    x = [0.3, 0.1, None, 0.7, float("nan"), 0.2, 0.9]
    mean, lo, hi, n = mean_interval(x, 0.95)
    clean = np.array([0.3, 0.1, 0.7, 0.2, 0.9])
    ref = stats.t.interval(0.95, len(clean) - 1, loc=clean.mean(), scale=stats.sem(clean))
    assert n == 5 and mean == pytest.approx(clean.mean()) and (lo, hi) == pytest.approx(ref, abs=1e-12)
    assert mean_interval([2.0]) == (2.0, -math.inf, math.inf, 1)  # one value: the whole line
    assert mean_interval([])[1:] == (-math.inf, math.inf, 0)


# -- success rule and expressions ----------------------------------------------------------------------------------

def test_success_rule():
    rule = {"metric": ["param_error_best_restart", "param_error"], "max": "0.6 * sigma"}
    assert success_of({"param_error": 0.05}, {"sigma": 0.1}, rule) is True
    assert success_of({"param_error": 0.07}, {"sigma": 0.1}, rule) is False
    assert success_of({"param_error_best_restart": 0.01, "param_error": 9.0}, {"sigma": 0.1}, rule) is True
    assert success_of({"param_error_best_restart": None, "param_error": 0.01}, {"sigma": 0.1}, rule) is True
    assert success_of({"param_error": 0.0}, {"sigma": 0.1}, rule, status="failed") is False  # diverged: no success
    assert success_of({"ari": 1.0}, {"sigma": 0.1}, rule) is None  # nothing to judge
    assert success_of({"success": True}, {}, {"metric": ["success"]}) is True
    with pytest.raises(ValueError, match="give success.max or success.min"):
        success_of({"param_error": 0.1}, {}, {"metric": ["param_error"]})
    with pytest.raises(ValueError, match="is true/false; success.max and success.min apply to numeric"):
        success_of({"success": False}, {}, {"metric": ["success"], "max": 0.1})


def test_expressions_are_arithmetic_only():
    assert evaluate("sqrt(d / (n - d - 1)) * sigma", {"d": 5, "n": 30, "sigma": 0.2}) == \
        pytest.approx(0.2 * math.sqrt(5 / 24))
    assert evaluate(3, {}) == 3.0
    for bad in ("__import__('os').system('true')", "sigma.real", "[1][0]", "(lambda: 1)()"):
        with pytest.raises(ValueError, match="only numbers, parameter names"):
            evaluate(bad, {"sigma": 1.0})
    with pytest.raises(ValueError, match=r"unknown name 'sigam' \(did you mean 'sigma'\?\)"):
        evaluate("sigam * 2", {"sigma": 1.0})


def test_boundary_curve_follows_the_expression():
    names = {"d": 50, "success_factor": 0.6, "n": 8, "clients_per_cluster": 2}
    b = {"y": "(d / success_factor**2 + d + 1) / x"}
    x, y = boundary_curve(b, names, "clients_per_cluster", "n", (1.0, 20.0), (5.0, 200.0), logx=True)
    assert x[0] == pytest.approx(1.0) and x[-1] == pytest.approx(20.0)
    np.testing.assert_allclose(y, (50 / 0.36 + 51) / x)
    xv, yv = boundary_curve({"x": "1 + 0 * y"}, names, "R", "n", (0.1, 5.0), (5.0, 200.0))
    np.testing.assert_array_equal(xv, 1.0)
    assert yv[0] == 5.0 and yv[-1] == 200.0


# -- the rendered report ---------------------------------------------------------------------------------------------

def _png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_report_tables_match_the_records(sweep_dir, report_dir):
    out = report_dir
    sweep = load_sweep(sweep_dir)
    with open(out / "summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    with open(out / "trials.csv") as fh:
        trials = list(csv.DictReader(fh))
    assert len(summary) == 8 and len(trials) == 24
    for row in summary:
        recs = [r for r in sweep["records"] if r["point"] == int(row["point"])]
        judged = [success_of(r["result"], r["params"], sweep["success"], r["status"]) for r in recs]
        assert int(row["successes"]) == sum(judged) and int(row["trials"]) == 3
        lo, hi = wilson_interval(sum(judged), 3)
        assert float(row["success_lo"]) == pytest.approx(float(lo)) and float(row["success_hi"]) == pytest.approx(hi)
        errs = [r["result"]["param_error"] for r in recs if r["status"] == "ok"]
        if errs:
            assert float(row["param_error_mean"]) == pytest.approx(np.mean(errs))
        assert int(row["failed"]) == sum(r["status"] != "ok" for r in recs)
    # the huge step size diverges: every such trial is failed, judged unsuccessful, and left out of the means
    diverging = [row for row in summary if row["algorithm"] == "IFCA-diverging"]
    assert all(row["failed"] == "3" and row["success"] == "0.0" and row["param_error_n"] == "0"
               for row in diverging)
    assert {t["status"] for t in trials if t["algorithm"] == "IFCA-diverging"} == {"failed"}
    assert all(t["reason"].startswith("DivergenceError") for t in trials if t["status"] == "failed")


def test_report_renders_figures_and_markdown(report_dir):
    out = report_dir
    md = (out / "report.md").read_text()
    pngs = sorted(p.name for p in out.glob("*.png"))
    assert pngs == ["curve_0_success_vs_R.png", "curve_1_param_error_vs_n.png", "history.png",
                    "phase_0_n_vs_R.png"]
    for name in pngs:
        w, h = _png_size(out / name)
        assert w > 300 and h > 200
        assert f"]({name})" in md
    assert "24 of 24 finished" in md and "failed trials (diverged / non-finite): 12 (DivergenceError: 12)" in md
    assert "dashed: demo: n = 10 / R; demo: R = 1" in md
    # compute summed from the trials' own clocks, as trials.csv lists them
    with open(out / "trials.csv") as fh:
        cpu = sum(float(t["cpu_seconds"]) for t in csv.DictReader(fh))
    assert f"{cpu / 3600:.2f} CPU-hours over the 24 of 24 trials that record CPU time" in md


def test_report_of_an_interrupted_sweep_says_so(sweep_dir, tmp_path, capsys):
    import shutil

    part = tmp_path / "part"
    shutil.copytree(sweep_dir, part, ignore=shutil.ignore_patterns("report*", "r2"))
    lines = (part / RECORDS_FILE).read_bytes().splitlines(keepends=True)
    (part / RECORDS_FILE).write_bytes(b"".join(lines[:10]) + lines[10][:7])  # killed mid-write
    assert main(["report", str(part)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("report written to")
    err = captured.err
    assert "warning: " in err and "torn last record" in err
    md = (part / "report" / "report.md").read_text()
    assert "10 of 24 finished" in md and "incomplete" in md


def test_report_errors_are_one_line(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "no meta.json" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--confidence", "1.5"]) == 2
    assert "confidence must be in (0, 1), got 1.5" in capsys.readouterr().err


def coin_trial(params: dict, seed: int) -> dict:
    """A Bernoulli(p) trial with a numeric side metric, for a store written by run_trials directly."""
    rng = np.random.default_rng(seed)
    return {"success": bool(rng.random() < params["p"]), "draw": float(rng.normal())}


def test_report_of_a_plain_run_trials_store(tmp_path):
    from synth.montecarlo import run_trials

    recs = run_trials(coin_trial, [{"p": 0.2}, {"p": 0.5}, {"p": 0.8}], 10, root_seed=1, store_dir=tmp_path)
    path = build_report(tmp_path)
    with open(path.parent / "summary.csv") as fh:
        summary = list(csv.DictReader(fh))
    assert [row["p"] for row in summary] == ["0.2", "0.5", "0.8"]
    for row in summary:
        wins = sum(r["result"]["success"] for r in recs if r["point"] == int(row["point"]))
        assert int(row["successes"]) == wins and int(row["judged"]) == 10
        assert "draw_mean" in row and row["draw_n"] == "10"
    assert (path.parent / "curve_0_success_vs_p.png").exists()


def test_save_figure_atomic_never_leaves_half_a_file(tmp_path):
    import matplotlib.pyplot as plt

    from synth.store import save_figure_atomic

    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    good = tmp_path / "f.png"
    save_figure_atomic(fig, good, dpi=50)
    before = good.read_bytes()
    assert before.startswith(b"\x89PNG")

    class Boom(Exception):
        pass

    def explode(*a, **k):
        raise Boom

    fig.savefig = explode  # a crash mid-write
    try:
        save_figure_atomic(fig, good, dpi=50)
    except Boom:
        pass
    assert good.read_bytes() == before  # the good file is untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.png"]  # and no temporary is left behind
    plt.close(fig)
