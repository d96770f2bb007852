"""The canonical experiment spec: parsed once, stored beside its trials, read back unchanged by every reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import synth.sweep
from synth.report import build_report, load_sweep
from synth.spec import FORMAT, ExperimentSpec, default_outputs
from synth.store import read_meta
from synth.sweep import load_spec, parse_spec, run_sweep

SPECS = sorted((Path(__file__).resolve().parents[1] / "synth" / "specs").glob("*.toml"))

TINY = {"name": "spec-demo", "seed": 5, "trials": 2,
        "fixed": {"K": 2, "clients_per_cluster": 3, "d": 3, "n": 10, "sigma": 0.1, "rounds": 5},
        "grid": {"R": [0.5, 2.0]},
        "algorithms": [{"label": "IFCA", "algo": "ifca"}],
        "success": {"metric": "param_error", "max": "0.6 * sigma"},
        "outputs": {"metrics": ["param_error"], "curves": [{"x": "R", "title": "demo"}]}}


@pytest.mark.parametrize("path", SPECS, ids=[p.stem for p in SPECS])
def test_canonical_form_round_trips(path):
    spec = load_spec(path)
    assert spec.kind == "synth-sweep" and spec.source["trials"] == spec.trials
    data = spec.to_dict()
    assert data["format"] == FORMAT
    assert json.loads(json.dumps(data, allow_nan=False)) == data  # plain JSON, storable in meta.json
    assert ExperimentSpec.from_dict(data) == spec
    back = ExperimentSpec.from_toml(spec.to_toml())
    assert back == spec and back.fingerprint == spec.fingerprint


def test_fingerprint_is_what_determines_the_trials():
    spec = parse_spec(TINY)
    assert spec.fingerprint == parse_spec(dict(TINY)).fingerprint
    # more trials or another success rule: the same trials, extended or judged differently
    assert parse_spec({**TINY, "trials": 7}).fingerprint == spec.fingerprint
    assert parse_spec({**TINY, "success": {"metric": "success"}}).fingerprint == spec.fingerprint
    # another seed or another point: other trials
    assert parse_spec({**TINY, "seed": 6}).fingerprint != spec.fingerprint
    assert parse_spec({**TINY, "grid": {"R": [0.5, 3.0]}}).fingerprint != spec.fingerprint
    assert parse_spec({**TINY, "outputs": {**TINY["outputs"], "history": True}}).fingerprint != spec.fingerprint


def test_a_sweep_stores_its_canonical_spec_and_the_report_does_not_parse_again(tmp_path, monkeypatch):
    spec = parse_spec(TINY)
    run_sweep(spec, tmp_path, progress=False)
    stored = read_meta(tmp_path)["spec"]
    assert ExperimentSpec.from_dict(stored) == spec

    def no_parsing(*args, **kwargs):
        raise AssertionError("the report must read the stored canonical spec, not parse the TOML layout again")

    monkeypatch.setattr(synth.sweep, "parse_spec", no_parsing)
    sweep = load_sweep(tmp_path)
    assert sweep["experiment"] == spec and sweep["outputs"]["curves"][0]["title"] == "demo"
    assert (build_report(tmp_path)).exists()


def test_from_points_defaults_and_checks():
    pts = [{"a": 1, "b": 0.5, "s": "x"}, {"a": 2, "b": 0.5, "s": "y"}, {"a": 3, "b": 1.5, "s": "y"}]
    spec = ExperimentSpec.from_points("demo", pts, 3, 1, trial=len, metrics=["m"])
    assert spec.varying == ["a", "b", "s"] and spec.trial == "builtins.len" and spec.kind == "trials"
    assert spec.outputs == default_outputs(pts, ["a", "b", "s"], ["m"])
    assert [c["x"] for c in spec.outputs["curves"]] == ["a", "b"]  # "s" is not numeric
    assert spec.success == {"metric": ["success"]}
    # points with different keys (one algorithm's hyper-parameters, another's): only shared keys are axes
    mixed = ExperimentSpec.from_points("demo", [{"algo": "a", "x": 1}, {"algo": "b", "y": 2}], 1, 1, trial=len)
    assert mixed.varying == ["algo"] and mixed.outputs["curves"] == []
    with pytest.raises(ValueError, match="trials"):
        ExperimentSpec.from_points("demo", pts, 0, 1, trial=len)
    with pytest.raises(ValueError, match="non-finite"):
        ExperimentSpec.from_points("demo", [{"a": float("nan")}], 1, 1, trial=len)
    with pytest.raises(TypeError, match="callable"):
        ExperimentSpec.from_points("demo", pts, 1, 1, trial=3)


@pytest.mark.parametrize("change, match", [
    ({"format": "other/1"}, "not a canonical experiment spec"),
    ({"colour": "red"}, "unknown key 'colour'"),
    ({"trials": -1}, "trials"),
    ({"kind": "paper-repo"}, "did you mean 'paper-repro'"),
    ({"varying": ["nope"]}, "varying names 'nope'"),
    ({"success": {"metric": ["x"], "max": 1, "min": 0}}, "max or min, not both"),
])
def test_canonical_form_errors_name_the_key(change, match):
    data = {**parse_spec(TINY).to_dict(), **change}
    with pytest.raises((ValueError, TypeError), match=match):
        ExperimentSpec.from_dict(data)


def test_outputs_must_use_numeric_varying_axes():
    data = parse_spec(TINY).to_dict()
    data["outputs"] = {**data["outputs"], "curves": [{"x": "K", "y": "success"}]}  # K is fixed
    with pytest.raises(ValueError, match=r"outputs.curves\[0\].x must be a numeric varying parameter"):
        ExperimentSpec.from_dict(data)


def test_a_store_holding_the_toml_layout_is_still_read(tmp_path):
    """meta.json may hold the spec as the user wrote it instead of the canonical form: parsed from that layout."""
    from synth.store import seal_store, write_json_atomic

    spec = parse_spec(TINY)
    run_sweep(spec, tmp_path, progress=False)
    meta = {k: v for k, v in read_meta(tmp_path).items() if k != "digest"}  # written before stores kept digests
    write_json_atomic(tmp_path / "meta.json", {**meta, "spec": TINY})
    seal_store(tmp_path)  # an older store is read once its owner seals it
    sweep = load_sweep(tmp_path)
    assert sweep["experiment"] == spec and sweep["spec"] == TINY
