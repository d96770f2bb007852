"""A paper target re-plotted from its result store alone: ``python -m synth report STORE`` computes nothing."""

from __future__ import annotations

import pytest

import figures.targets.phase
import paper_repro
from figures import Context
from figures.runs import run_points, stored_records
from figures.trials import shared_instance_trial
from synth.cli import main as synth_main
from synth.spec import ExperimentSpec
from synth.store import StoreError, read_meta

TARGET, FOLDER = "phase-diagrams", "phase-diagrams"


@pytest.fixture(scope="module")
def repro(tmp_path_factory):
    """One tiny run of a synthetic target (a few seconds)."""
    out = tmp_path_factory.mktemp("repro")
    assert paper_repro.main(["--tiny", "--only", TARGET, "--out", str(out), "--n-jobs", "1"]) == 0
    return out


def _no_trials(params, seed):
    raise AssertionError("re-plotting must not run a trial")


def test_store_holds_the_target_and_its_canonical_spec(repro):
    meta = read_meta(repro / FOLDER / "store-tiny")
    assert meta["kind"] == "paper-repro" and meta["targets"] == [TARGET] and meta["size"] == "tiny"
    spec = ExperimentSpec.from_dict(meta["spec"])
    assert spec.kind == "paper-repro" and spec.trial == "figures.trials.shared_instance_trial"
    assert spec.points == meta["points"] and spec.seed == meta["root_seed"]


@pytest.mark.parametrize("where", ["store", "target folder", "output folder"])
def test_replot_rebuilds_figure_and_tables_from_the_store_alone(repro, monkeypatch, capsys, where):
    folder = repro / FOLDER
    png, csv, section = folder / "phase_diagrams.png", folder / "phase.csv", folder / "section-tiny.md"
    before = {p: p.read_text() for p in (csv, folder / "comparison.csv", section)}
    trials = (folder / "store-tiny" / "trials.jsonl").read_bytes()
    png.unlink()
    monkeypatch.setattr(figures.targets.phase, "shared_instance_trial", _no_trials)
    arg = {"store": folder / "store-tiny", "target folder": folder, "output folder": repro}[where]
    assert synth_main(["report", str(arg)]) == 0, capsys.readouterr().err
    assert png.exists() and png.stat().st_size > 0
    assert {p: p.read_text() for p in before} == before  # the same numbers, the same section
    assert (folder / "store-tiny" / "trials.jsonl").read_bytes() == trials


def test_replot_of_an_incomplete_store_is_one_line_exit_2(repro, tmp_path, monkeypatch, capsys):
    import shutil

    folder = tmp_path / FOLDER
    shutil.copytree(repro / FOLDER, folder)
    records = folder / "store-tiny" / "trials.jsonl"
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:-1]))  # one finished trial fewer
    monkeypatch.setattr(figures.targets.phase, "shared_instance_trial", _no_trials)
    capsys.readouterr()
    assert synth_main(["report", str(folder / "store-tiny")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert f"lacks 1 of the {len(lines)} trials" in err and f"paper_repro.py --only {TARGET}" in err
    assert records.read_text() == "".join(lines[:-1])  # nothing was computed or appended


def test_replot_context_never_computes(tmp_path):
    ctx = Context(out=tmp_path, size="tiny", replot=True)
    pts = [{"generator": {"family": "linear"}, "algos": {}}]
    with pytest.raises(StoreError, match="no stored trials"):
        run_points(ctx, "nothing-here", shared_instance_trial, pts, 1, seed=0)
    spec = ExperimentSpec.from_points("x", pts, 1, 0, trial=shared_instance_trial)
    with pytest.raises(StoreError, match="no stored trials"):
        stored_records(tmp_path / "missing", spec)


def test_a_toml_spec_runs_as_a_paper_target_with_the_same_numbers_as_its_sweep(tmp_path, monkeypatch):
    """One engine: a spec run as a target (run_spec) gives the sweep's records, keeps its TOML layout, re-plots."""
    import synth.sweep
    from figures.runs import run_spec
    from synth.montecarlo import comparable
    from synth.sweep import parse_spec, run_sweep

    raw = {"name": "spec-target", "seed": 4, "trials": 2, "grid": {"R": [0.5, 2.0]},
           "fixed": {"K": 2, "clients_per_cluster": 3, "d": 3, "n": 10, "sigma": 0.1, "rounds": 5}}
    spec = parse_spec(raw)
    swept = run_sweep(spec, tmp_path / "sweep", progress=False)
    ctx = Context(out=tmp_path / "repro", size="tiny", target="demo")
    recs = run_spec(ctx, spec)
    assert comparable(recs) == comparable(swept)
    meta = read_meta(tmp_path / "repro" / "spec-target" / "store-tiny")
    stored = ExperimentSpec.from_dict(meta["spec"])
    assert stored.kind == "paper-repro" and stored.source == raw and stored.points == spec.points
    assert meta["targets"] == ["demo"]
    monkeypatch.setattr(synth.sweep, "experiment_trial", _no_trials)
    again = run_spec(Context(out=tmp_path / "repro", size="tiny", replot=True), spec)
    assert comparable(again) == comparable(recs)


def test_theory_atlas_is_replotted_from_its_store(tmp_path, monkeypatch, capsys):
    """The tightness atlas runs its cells through the same engine: its figures come back from the store alone."""
    import figures.trials
    import theory.atlas

    keep = ("clove-lemma-a.1", "srfca-prop4.1")  # two cheap exact-law results keep the run to seconds
    monkeypatch.setattr(theory.atlas, "GRIDS", {k: theory.atlas.GRIDS[k] for k in keep})
    assert paper_repro.main(["--tiny", "--only", "theory-atlas", "--out", str(tmp_path), "--n-jobs", "1"]) == 0
    folder = tmp_path / "theory-atlas"
    tables = {p: p.read_text() for p in (folder / "atlas.md", folder / "atlas.csv")}
    assert "violated" in tables[folder / "atlas.md"]  # Lemma A.1 at n = 1 (the atlas's own test has the numbers)
    for png in folder.glob("atlas_*.png"):
        png.unlink()
    monkeypatch.setattr(figures.trials, "atlas_cell_trial", _no_trials)
    capsys.readouterr()
    assert synth_main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in folder.glob("atlas_*.png")) == ["atlas_clove.png", "atlas_srfca.png"]
    assert {p: p.read_text() for p in tables} == tables
