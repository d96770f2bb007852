"""The tightness atlas (theory.atlas, ``python -m theory atlas``): slack, violations, fitted constants, outputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from theory.atlas import GRIDS, build_cells, evaluate_cell, result_of, run_atlas
from theory.cli import main
from theory.results import REGISTRY, get_result


@pytest.fixture(scope="module")
def exact_atlas(tmp_path_factory):
    """CLoVE Lemma A.1 and SR-FCA Prop. 4.1 at the quick size (exact laws only: no Monte Carlo)."""
    out = tmp_path_factory.mktemp("atlas")
    return out, run_atlas(out, size="quick", only=["clove-lemma-a.1", "srfca-prop4.1"])


def _cell(res, name, x, y):
    (c,) = [c for c in res["cells"] if c["result"] == name and c["x"] == x and c["y"] == y]
    return c


def test_every_registered_result_has_a_documented_grid():
    get_result("ifca-lemma1")
    assert {result_of(k) for k in GRIDS} == set(REGISTRY) and set(REGISTRY) <= set(GRIDS)
    for name, g in GRIDS.items():
        res = get_result(result_of(name))
        assert g.x.param in res.params and g.y.param in res.params, name
        assert all(k in res.params for k in g.fixed), name
    # quick keeps the two ends of every axis: 2 x 2 cells per result
    assert len(build_cells(list(GRIDS), "quick")) == 4 * len(GRIDS)


def test_slices_show_where_lemma_a1_and_ifca_lemma1_fail():
    # CLoVE Lemma A.1 at Delta = 0.1, sigma = 0.1: still violated at n = 3, with its assumptions met
    cell = {"result": "clove-lemma-a.1@delta", "x_param": "n", "y_param": "delta", "x": 3, "y": 0.1, "ix": 2,
            "iy": 0, "params": {**GRIDS["clove-lemma-a.1@delta"].fixed, "n": 3, "delta": 0.1}, "trials": 0}
    rec = evaluate_cell(cell, 0)
    assert rec["violated"] and rec["assumptions_met"] and rec["exact"] < rec["bound"]
    # ... and up to n = 6 at sigma = 2 (outside sigma << 1, which that slice does not enforce)
    cell = {**cell, "result": "clove-lemma-a.1@sigma", "y_param": "sigma", "x": 6, "y": 2.0,
            "params": {**GRIDS["clove-lemma-a.1@sigma"].fixed, "n": 6, "sigma": 2.0}}
    assert evaluate_cell(cell, 0)["comparison"] == "violated"
    # IFCA Lemma 1 (k = 2): beyond its bound at alpha < 0, outside Assumption 1
    cell = {**cell, "result": "ifca-lemma1@rho", "x_param": "sigma", "y_param": "alpha", "x": 0.25, "y": -0.1,
            "params": {**GRIDS["ifca-lemma1@rho"].fixed, "sigma": 0.25, "alpha": -0.1}}
    rec = evaluate_cell(cell, 0)
    assert rec["comparison"] == "violated" and not rec["assumptions_met"]


def test_clove_lemma_a1_violated_at_n_1_with_its_assumptions_met(exact_atlas):
    _, res = exact_atlas
    c = _cell(res, "clove-lemma-a.1", 1, 0.0)
    assert c["source"] == "exact" and c["assumptions_met"] and c["violated"] and c["verdict"] == "violated"
    # independently: at Delta = 1, sigma = 0 the minimising unit optima in the plane of two ortho-normal models are
    # x = -(sin 15, cos 15), y = -(cos 15, sin 15) (|x - y| = 1); the paper's means sqrt(||theta* - q_j||^2) give
    # sqrt 2 (sqrt(2 + 2 cos 15) - sqrt(2 + 2 sin 15)), the exact means carry kappa_1 = E chi_1 = sqrt(2/pi)
    a = math.radians(15.0)
    sep = math.sqrt(2.0) * (math.sqrt(2 + 2 * math.cos(a)) - math.sqrt(2 + 2 * math.sin(a)))
    exact = math.sqrt(2.0 / math.pi) * sep
    bound = 1.0 / math.sqrt(4.0)
    assert exact < bound
    assert c["bound"] == pytest.approx(bound, rel=1e-12)
    assert c["exact"] == pytest.approx(exact, rel=1e-6)
    assert c["slack"] == pytest.approx(exact / bound, rel=1e-6)  # lower bound: slack = value / bound
    # at n = 100 the same placement clears the bound (kappa_100 ~ 0.9975)
    far = _cell(res, "clove-lemma-a.1", 100, 0.0)
    assert not far["violated"] and far["slack"] > 1.0
    summary = next(s for s in res["summaries"] if s["result"] == "clove-lemma-a.1")
    assert [1, 0.0] in summary["violated_cells"]
    # c* = the largest c with c * bound <= exact on every cell with the assumptions met (sigma = 0.5 fails them)
    met = [c for c in res["cells"] if c["result"] == "clove-lemma-a.1" and c["assumptions_met"]]
    assert {c["y"] for c in met} == {0.0}
    assert summary["c_star"] == pytest.approx(min(c["exact"] / c["bound"] for c in met), rel=1e-12)
    assert summary["c_star"] == pytest.approx(exact / bound, rel=1e-6)


def test_prop41_slack_is_the_stated_factor_d(exact_atlas):
    """Prop. 4.1 states KL = d/(2 sigma^2) ||w_i - w_j||^2; the exact KL is w^T Sigma w/(2 sigma^2)."""
    from synth.federation import anisotropic_cov

    _, res = exact_atlas
    spec = get_result("srfca-prop4.1").params
    sigma, dist = spec["sigma"].default, spec["dist"].default
    for d in (1, 50):
        c = _cell(res, "srfca-prop4.1", d, 1.0)
        assert c["assumptions_met"] and c["slack"] == pytest.approx(d, rel=1e-9)
        assert c["violated"] == (d != 1)  # an identity: any factor other than 1 violates it
        w = np.full(d, dist / math.sqrt(d))
        anis = _cell(res, "srfca-prop4.1", d, 10.0)
        kl = w @ anisotropic_cov(d, 10.0) @ w / (2 * sigma**2)
        assert not anis["assumptions_met"] and not anis["violated"]
        assert anis["exact"] == pytest.approx(kl, rel=1e-9)
        assert anis["slack"] == pytest.approx(d * dist**2 / (2 * sigma**2) / kl, rel=1e-9)


def test_outputs_and_resume(exact_atlas, tmp_path):
    out, res = exact_atlas
    table = (out / "atlas.md").read_text()
    assert "Lemma A.1 (`clove-lemma-a.1`)" in table and "Proposition 4.1 (`srfca-prop4.1`)" in table
    data = json.loads((out / "atlas.json").read_text())
    # a result's name selects its slices too: A.1's grid, its two slices and Prop. 4.1, 4 cells each
    assert len(data["cells"]) == 16 and len(data["summaries"]) == 4
    rows = (out / "atlas.csv").read_text().splitlines()
    assert len(rows) == 17 and rows[0].startswith("result,x_param,x,")
    # a rerun reads every cell from the cache and reproduces the same records
    seen = []
    again = run_atlas(out, size="quick", only=["clove-lemma-a.1", "srfca-prop4.1"], log=seen.append)
    assert "16 cached" in seen[0]
    assert json.dumps(again["cells"], default=str) == json.dumps(res["cells"], default=str)


def test_monte_carlo_cells_are_deterministic_and_carry_intervals(tmp_path):
    kw = dict(size="quick", only=["clove-lemma-a.7"], seed=3)
    a = run_atlas(tmp_path / "a", **kw)
    b = run_atlas(tmp_path / "b", **kw)
    timing = ("seconds", "cpu_seconds")
    strip = lambda cells: [{k: v for k, v in c.items() if k not in timing} for c in cells]  # noqa: E731
    assert json.dumps(strip(a["cells"]), default=str) == json.dumps(strip(b["cells"]), default=str)
    for c in a["cells"]:
        assert c["source"] == "monte carlo" and c["trials"] == GRIDS["clove-lemma-a.7"].trials[0]
        assert c["slack_low"] <= c["slack"] <= c["slack_high"]
    s = a["summaries"][0]
    assert s["c_star_low"] <= s["c_star"] <= s["c_star_high"]


def test_figures_are_written(tmp_path):
    from figures.targets.atlas import plot_atlas

    res = run_atlas(tmp_path, size="quick", only=["clove-lemma-a.2"], plot=plot_atlas)
    assert "atlas_clove.png" in res["files"] and (tmp_path / "atlas_clove.png").stat().st_size > 10_000


@pytest.mark.parametrize("argv, fragment", [
    (["atlas"], "--out"),
    (["atlas", "--out", "{tmp}", "--only", "clove-lemma-a.99"], "unknown result 'clove-lemma-a.99'"),
    (["atlas", "--out", "{tmp}", "--size", "huge"], "invalid choice"),
    (["atlas", "--out", "{tmp}", "--n-jobs", "0"], "--n-jobs must be >= 1"),
    (["atlas", "--out", "{tmp}", "--seed", "x"], "--seed expects an integer"),
    (["atlas", "--out", "{tmp}", "--only", ","], "--only needs at least one"),
    (["atlas", "--out", "{tmp}", "--quick", "--size", "medium"], "not allowed with"),
])
def test_cli_errors_are_one_line_exit_2(argv, fragment, tmp_path, capsys):
    code = main([a.replace("{tmp}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and fragment in err and err.count("\n") == 1, err


def test_cli_runs(tmp_path, capsys):
    assert main(["atlas", "--out", str(tmp_path), "--quick", "--only", "clove-lemma-a.2", "--no-figures"]) == 0
    assert "1 results, 4 cells" in capsys.readouterr().out
    assert (tmp_path / "atlas.md").exists() and not (tmp_path / "atlas_clove.png").exists()


def test_registered_as_a_paper_repro_target():
    from figures import load_targets

    targets = load_targets()
    assert "theory-atlas" in targets and targets["theory-atlas"].kind == "theory"
