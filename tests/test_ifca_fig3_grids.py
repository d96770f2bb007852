"""IFCA Fig. 3 grids: the sweep specs hold the public code's grids, and the paper targets read them from there."""

import pytest

from figures.targets.ifca_synthetic import load_grid
from synth.sweep import load_spec

# the public code's grids (github.com/jichan3751/ifca, synthetic/run_p{2,4}_{r_noise,m_n}.py): m, n, noise, r, lr
PUBLIC = {
    "a": dict(K=2, m=[100], n=[100], sigma=[0.0, 0.1, 0.2, 0.4], R=[0.1, 0.25, 0.5, 0.75, 1.0], lr=[1.0, 0.1, 0.01]),
    "b": dict(K=4, m=[400], n=[100], sigma=[0.0, 0.1, 0.2, 0.4], R=[0.1, 0.25, 0.5, 0.75, 1.0], lr=[2.0, 1.0, 0.5]),
    "c": dict(K=2, m=[50, 70, 100, 150, 200, 300, 400], n=[50, 100, 200], sigma=[0.1], R=[0.1, 0.25],
              lr=[1.0, 0.1, 0.01]),
    "d": dict(K=4, m=[100, 200, 300, 400, 800], n=[50, 100, 200], sigma=[0.1], R=[0.5, 0.75], lr=[2.0, 1.0, 0.5]),
}
RUNS = {"a": 24_000, "b": 24_000, "c": 50_400, "d": 36_000}  # 40 data seeds x 10 inits x 3 step sizes per cell


@pytest.mark.parametrize("panel", "abcd")
@pytest.mark.parametrize("variant, theta", [("code", "bernoulli-code"), ("text", "bernoulli")])
def test_full_specs_are_the_public_grids(panel, variant, theta):
    spec = load_spec(f"synth/specs/ifca_fig3{panel}_full_{variant}.toml")
    want = PUBLIC[panel]
    pts = spec.points
    assert {p["K"] for p in pts} == {want["K"]}
    assert sorted({p["K"] * p["clients_per_cluster"] for p in pts}) == want["m"]
    assert sorted({p["n"] for p in pts}) == want["n"]
    assert sorted({p["sigma"] for p in pts}) == want["sigma"]
    assert sorted({p["R"] for p in pts}) == want["R"]
    assert all(p["step_size"] == want["lr"] and p["n_init"] == 10 and p["d"] == 1000 and p["rounds"] == 300
               and p["theta"] == theta for p in pts)
    assert len(pts) * spec.trials * 30 == RUNS[panel]
    # the public code's success slack: 0.001 in its R-noise grids, none in its m-n grids
    assert {p["code_slack"] for p in pts} == ({0.001} if panel in "ab" else {0.0})


@pytest.mark.parametrize("panel", "abcd")
def test_paper_targets_read_the_spec_grid(panel, monkeypatch):
    monkeypatch.delenv("CFLAB_IFCA_STOPPING", raising=False)
    full = load_grid(panel, "bernoulli-code", "full")
    assert full.points == load_spec(f"synth/specs/ifca_fig3{panel}_full_code.toml").points
    quick = load_grid(panel, "bernoulli-code", "quick")
    # reduced: same protocol and step sizes, axes a subset (or m scaled with d), fewer trials
    assert {p["step_size"] == full.points[0]["step_size"] and p["stopping"] == "converged" for p in quick.points} \
        == {True}
    assert set(quick.varying) <= set(full.varying) and quick.trials < full.trials
    monkeypatch.setenv("CFLAB_IFCA_STOPPING", "fixed")
    assert {p["stopping"] for p in load_grid(panel, "bernoulli", "tiny").points} == {"fixed"}
    monkeypatch.setenv("CFLAB_IFCA_STOPPING", "early")
    with pytest.raises(ValueError, match="CFLAB_IFCA_STOPPING"):
        load_grid(panel, "bernoulli", "tiny")


def test_projection_agreement_over_several_samples(tmp_path):
    """The bench's agreement count joins samples by distinct data seed, with the exact one-sided lower bound;
    a seed whose verdicts differ between files counts as a disagreement."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    def row(grid, cell, trial, conv, fixed):
        res = lambda ok: {"success_code_rule": ok, "success_any_restart": ok, "cpu_seconds": 1.0,  # noqa: E731
                          "iterations": 9000, "param_error_best_restart": 0.0}
        return {"grid": grid, "cell": cell, "trial": trial, "cells_in_grid": 20, "trials_per_cell": 40, "point": {},
                "m": 100, "n": 100, "K": 2, "converged": res(conv), "fixed": res(fixed)}

    def write(name, rows):
        path = tmp_path / name
        path.write_text(json.dumps({"trials": rows}))
        return str(path)

    main = write("main.json", [row("a", c, c, True, True) for c in range(5)])
    other = write("other.json", [row("a", 0, 0, True, True), row("a", 0, 1, False, False), row("a", 1, 2, True, False)])
    script = str(Path(__file__).resolve().parents[1] / "bench" / "ifca_projection.py")
    out = subprocess.run([sys.executable, script, "--summary-only", "--grids", "a", "--protocols",
                          "converged,fixed", "--json", main, "--agreement-with", other],
                         capture_output=True, text=True, check=True)
    union = json.loads(out.stdout)["agreement_with_other_samples"]
    assert union["data_seeds"] == 7 and union["inconsistent_seeds"] == []
    rule = union["success_code_rule"]
    assert rule["agree"] == 6 and rule["of"] == 7 and not rule["meets_99.5_percent"]
    # Clopper-Pearson: the rate p at which 6 or more agreements of 7 have probability 0.05
    p = rule["lower_95_one_sided"]
    assert abs(7 * p**6 * (1 - p) + p**7 - 0.05) < 1e-9
    # one grid: its simultaneous bound is the pooled one, and the weighted bound is that grid's
    assert rule["per_grid"]["a"]["of"] == 7 and rule["per_grid"]["a"]["lower_simultaneous"] == p
    assert rule["grid_weighted_lower_95"] == p
    # two grids sampled unevenly (grid b: 2 seeds of 800, all agreeing): each grid's bound at level 1 - 0.05/2,
    # weighted by the grids' sizes, far below the pooled bound of 9 agreements in 9
    two = write("two.json", [row("a", c, c, True, True) for c in range(7)] + [row("b", c, c, True, True)
                                                                                for c in range(2)])
    out = subprocess.run([sys.executable, script, "--summary-only", "--grids", "a,b", "--protocols",
                          "converged,fixed", "--json", two, "--agreement-with", two],
                         capture_output=True, text=True, check=True)
    union = json.loads(out.stdout)["agreement_with_other_samples"]
    rule = union["success_code_rule"]
    assert abs(rule["lower_95_one_sided"] - 0.05 ** (1 / 9)) < 1e-12
    assert abs(rule["grid_weighted_lower_95"] - (0.025 ** (1 / 7) + 0.025 ** (1 / 2)) / 2) < 1e-12
    # two grids: the fewest all-agreeing seeds per grid whose simultaneous bound reaches 0.995
    need = union["all_agreeing_seeds_per_grid_for_weighted_99.5"]
    assert 0.025 ** (1 / need) >= 0.995 > 0.025 ** (1 / (need - 1))
    clash = write("clash.json", [row("a", 3, 3, False, True)])
    out = subprocess.run([sys.executable, script, "--summary-only", "--grids", "a", "--protocols",
                          "converged,fixed", "--json", main, "--agreement-with", clash],
                         capture_output=True, text=True, check=True)
    union = json.loads(out.stdout)["agreement_with_other_samples"]
    assert union["inconsistent_seeds"] == [["a", 3, 3]] and union["success_code_rule"]["agree"] == 4
    # a protocol run on part of the sample: its agreement counts the seeds that have it, and it has no total
    rows = [row("a", c, c, True, True) for c in range(5)]
    for r in rows[:2]:
        r["float64"] = dict(r["converged"])
    part = write("part.json", rows)
    out = subprocess.run([sys.executable, script, "--summary-only", "--grids", "a", "--protocols",
                          "converged,fixed,float64", "--json", part], capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout)
    assert summary["agreement_converged_vs_float64_success_code_rule_count"].startswith("2/2 ")
    assert summary["projected_hours_all_grids_on_2_cores"]["float64"] is None
    assert summary["projected_hours_all_grids_on_2_cores"]["converged"] == 5 * 20 * 40 / 5 / 2 / 3600
    assert summary["protocols_on_part_of_the_sample"] == {"float64": ["a"]}


def test_projection_file_keeps_its_provenance_when_rewritten(tmp_path):
    """A resumed projection rewrites its JSON after every trial; the note on how its protocols were filled in stays."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench" / "ifca_projection.py"
    spec = importlib.util.spec_from_file_location("ifca_projection", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "p.json"
    bench._write(out, [{"grid": "a"}])
    assert "provenance" not in json.loads(out.read_text())
    out.write_text(json.dumps({**json.loads(out.read_text()), "provenance": "fixed at commit X"}))
    bench._write(out, [{"grid": "a"}, {"grid": "b"}])
    doc = json.loads(out.read_text())
    assert doc["provenance"] == "fixed at commit X" and len(doc["trials"]) == 2
