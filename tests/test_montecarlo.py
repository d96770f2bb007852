"""Monte Carlo engine and result store: seeds, determinism across n_jobs/backends, resume, torn records, failures.

All checks here are exact (bit-identical records, counts); none is statistical, so none can fail by chance.
"""

from __future__ import annotations

import functools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from synth.algorithms import DivergenceError
from synth.montecarlo import comparable, fingerprint, run_trials, show_progress, trial_seed
from synth.store import RECORDS_FILE, StoreError, TornRecordWarning, TrialStore, read_records, write_json_atomic
from synth.sweep import experiment_trial

# a small but real IFCA experiment (restarts over 2 inits x 2 step sizes): ~10-30 ms per trial
SMALL = dict(K=2, clients_per_cluster=4, n=20, d=5, sigma=0.1, rounds=30, n_init=2, step_size=[0.1, 1.0])
POINTS = [{**SMALL, "algorithm": "IFCA", "R": r} for r in (0.5, 2.0)]
TRIAL = functools.partial(experiment_trial, history=True)


def counting_trial(params: dict, seed: int) -> dict:
    """A cheap trial that logs every call to params['log'] (to count recomputations)."""
    with open(params["log"], "a") as fh:
        fh.write(f"{params['x']} {seed}\n")
    rng = np.random.default_rng(seed)
    return {"value": float(rng.normal() + params["x"]), "hit": bool(rng.random() < 0.5)}


def failing_trial(params: dict, seed: int) -> dict:
    """Diverges, returns a non-finite metric, or works, depending on params['mode']."""
    mode = params["mode"]
    if mode == "diverge":
        raise DivergenceError("all 3 IFCA runs diverged (non-finite loss); lower step_size")
    if mode == "nan":
        return {"param_error": float("nan"), "ari": 1.0, "history": {"loss": [1.0, float("nan")]}}
    if mode == "inf":
        return {"param_error": np.float64(np.inf)}
    if mode == "bug":
        return {"x": 1 / 0}
    return {"param_error": np.float64(0.5), "ari": np.float32(1.0), "labels": np.arange(3)}


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


# -- seeds ------------------------------------------------------------------------------------------------------

def test_trial_seed_is_keyed_by_point_and_trial():
    # stores written earlier replay these seeds on resume: a change of the seeding scheme would silently give
    # a resumed sweep trials from another stream, so the scheme is pinned by two of its values
    assert trial_seed(7, 3, 4) == 1462221144091735755
    assert trial_seed(0, 0, 0) == 1317536309490288386
    assert trial_seed(7, 4, 3) != trial_seed(7, 3, 4)  # point and trial are not interchangeable
    seeds = {trial_seed(7, p, t) for p in range(20) for t in range(20)}
    assert len(seeds) == 400  # no collisions in a 20 x 20 sweep
    assert all(0 <= s < 2**63 for s in seeds)
    assert trial_seed(8, 3, 4) != trial_seed(7, 3, 4)
    root = np.random.SeedSequence(7)
    assert trial_seed(root, 3, 4) == trial_seed(7, 3, 4)


def test_records_sorted_and_seeded_by_position(tmp_path):
    log = tmp_path / "calls.log"
    pts = [{"x": i, "log": str(log)} for i in range(3)]
    recs = run_trials(counting_trial, pts, 4, root_seed=11)
    assert [(r["point"], r["trial"]) for r in recs] == [(p, t) for p in range(3) for t in range(4)]
    for r in recs:
        assert r["seed"] == trial_seed(11, r["point"], r["trial"])
        assert r["status"] == "ok" and r["reason"] is None
        assert 0.0 <= r["cpu_seconds"] and 0.0 <= r["seconds"]  # what the trial cost, left out of comparisons
        assert r["result"] == counting_trial({**pts[r["point"]], "log": str(tmp_path / "x")}, r["seed"])
    # more trials later: the first four of each point are unchanged
    more = run_trials(counting_trial, pts, 6, root_seed=11)
    assert comparable([r for r in more if r["trial"] < 4]) == comparable(recs)


# -- determinism across n_jobs and backends ------------------------------------------------------------------------

def test_bit_identical_across_n_jobs_and_local_backends():
    one = run_trials(TRIAL, POINTS, 3, root_seed=5, n_jobs=1)
    loky = run_trials(TRIAL, POINTS, 3, root_seed=5, n_jobs=2, backend="loky")
    threads = run_trials(TRIAL, POINTS, 3, root_seed=5, n_jobs=2, backend="threading")
    assert all(r["status"] == "ok" for r in one)
    assert "history" in one[0]["result"] and "labels" not in one[0]["result"]["history"]
    assert comparable(loky) == comparable(one)
    assert comparable(threads) == comparable(one)
    # the trials differ from each other (the comparison is not vacuous)
    assert len({r["result"]["param_error"] for r in one}) == len(one)


def test_any_registered_joblib_backend_gives_the_same_records():
    # the path Ray's backend takes (ray.util.joblib.register_ray registers "ray" the same way)
    from joblib import register_parallel_backend
    from joblib._parallel_backends import MultiprocessingBackend

    register_parallel_backend("cflab-test-mp", MultiprocessingBackend)
    local = run_trials(TRIAL, POINTS, 2, root_seed=5, n_jobs=1)
    other = run_trials(TRIAL, POINTS, 2, root_seed=5, n_jobs=2, backend="cflab-test-mp")
    assert comparable(other) == comparable(local)


def test_ray_backend_without_ray_is_a_clear_error():
    pytest.importorskip("joblib")
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match=r"backend 'ray' needs Ray: pip install 'ray\[default\]'"):
            run_trials(TRIAL, POINTS, 1, n_jobs=2, backend="ray")
    else:  # pragma: no cover - Ray is not installed in the project's environments
        pytest.skip("ray is installed: this checks the message shown without it")


def test_dask_local_cluster_matches_local_run():
    distributed = pytest.importorskip("dask.distributed")
    local = run_trials(TRIAL, POINTS, 3, root_seed=5, n_jobs=1)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster):  # the current client: used by backend="dask"
            via_client = run_trials(TRIAL, POINTS, 3, root_seed=5, backend="dask")
        # by address, as `--backend dask --scheduler tcp://host:port` does
        via_address = run_trials(TRIAL, POINTS, 3, root_seed=5, backend="dask",
                                 scheduler=cluster.scheduler_address)
    assert comparable(via_client) == comparable(local)
    assert comparable(via_address) == comparable(local)


# -- the store: resume, torn records, refusal ----------------------------------------------------------------------

def test_resume_of_a_finished_run_does_no_work(tmp_path):
    log = tmp_path / "calls.log"
    pts = [{"x": i, "log": str(log)} for i in range(2)]
    first = run_trials(counting_trial, pts, 5, root_seed=3, store_dir=tmp_path / "out")
    assert _lines(log) == 10 and _lines(tmp_path / "out" / RECORDS_FILE) == 10
    again = run_trials(counting_trial, pts, 5, root_seed=3, store_dir=tmp_path / "out", resume=True)
    assert _lines(log) == 10  # nothing recomputed
    assert comparable(again) == comparable(first)
    # key order too: a table whose columns follow a record's keys is the same fresh or resumed
    assert json.dumps(comparable(again)) == json.dumps(comparable(first))
    meta = json.loads((tmp_path / "out" / "meta.json").read_text())
    assert len(meta["sessions"]) == 2 and meta["fingerprint"] == fingerprint(pts, 3, counting_trial)
    assert meta["sessions"][0]["versions"]["numpy"] == np.__version__
    # extending the number of trials computes only the new ones
    run_trials(counting_trial, pts, 7, root_seed=3, store_dir=tmp_path / "out", resume=True)
    assert _lines(log) == 14


def test_resume_with_changed_code_warns(tmp_path, monkeypatch):
    import synth.montecarlo as mc

    log = tmp_path / "calls.log"
    pts = [{"x": 0, "log": str(log)}]
    run_trials(counting_trial, pts, 2, root_seed=3, store_dir=tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # same code, nothing to add: silent
        run_trials(counting_trial, pts, 2, root_seed=3, store_dir=tmp_path / "out", resume=True)
    monkeypatch.setattr(mc, "code_hash", lambda fn=None: "0123456789abcdef")
    with pytest.warns(mc.CodeChangedWarning, match="code changed .* -> 0123456789abcdef"):
        run_trials(counting_trial, pts, 3, root_seed=3, store_dir=tmp_path / "out", resume=True)


def test_refuses_to_mix_runs(tmp_path):
    log = tmp_path / "calls.log"
    pts = [{"x": 0, "log": str(log)}]
    run_trials(counting_trial, pts, 2, root_seed=3, store_dir=tmp_path / "out")
    with pytest.raises(StoreError, match="already holds 2 finished trial.*--resume"):
        run_trials(counting_trial, pts, 2, root_seed=3, store_dir=tmp_path / "out")
    with pytest.raises(StoreError, match="different sweep"):
        run_trials(counting_trial, pts, 2, root_seed=4, store_dir=tmp_path / "out", resume=True)
    with pytest.raises(StoreError, match="different sweep"):
        run_trials(counting_trial, [{"x": 1, "log": str(log)}], 2, root_seed=3, store_dir=tmp_path / "out",
                   resume=True)
    assert _lines(log) == 2


def test_torn_last_record_is_dropped_with_warning_and_recomputed(tmp_path):
    log = tmp_path / "calls.log"
    pts = [{"x": i, "log": str(log)} for i in range(2)]
    out = tmp_path / "out"
    full = run_trials(counting_trial, pts, 3, root_seed=9, store_dir=out)
    path = out / RECORDS_FILE
    data = path.read_bytes()
    last = json.loads(data.splitlines()[-1])
    path.write_bytes(data[:-15])  # the writer died 15 bytes before the end of the last record
    with pytest.warns(TornRecordWarning, match="torn last record"):
        assert len(read_records(out)) == 5
    with pytest.warns(TornRecordWarning, match="recomputed"):
        resumed = run_trials(counting_trial, pts, 3, root_seed=9, store_dir=out, resume=True)
    assert _lines(log) == 7  # exactly the torn trial ran again
    assert log.read_text().splitlines()[-1] == f"{pts[last['point']]['x']} {last['seed']}"
    assert comparable(resumed) == comparable(full)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # repaired: no warning any more
        assert comparable(read_records(out)) == comparable(full)


def test_garbled_final_line_is_torn_but_garbage_in_the_middle_is_an_error(tmp_path):
    out = tmp_path / "out"
    pts = [{"x": 0, "log": str(tmp_path / "calls.log")}]
    run_trials(counting_trial, pts, 2, root_seed=1, store_dir=out)
    path = out / RECORDS_FILE
    good = path.read_bytes()
    path.write_bytes(good + b"\x00\x00\x00\n")  # zero-filled block after a crash
    with pytest.warns(TornRecordWarning):
        assert len(read_records(out)) == 2
    lines = good.splitlines(keepends=True)
    path.write_bytes(lines[0][:10] + b"\n" + lines[1])
    with pytest.raises(StoreError, match="line 1 .*corrupt"):
        read_records(out)


def test_store_is_locked_while_a_run_appends(tmp_path):
    with TrialStore(tmp_path) as first:
        first.open({"fingerprint": "a"}, resume=False)
        with pytest.raises(StoreError, match="in use"):
            TrialStore(tmp_path).open({"fingerprint": "a"}, resume=True)
        with pytest.raises(ValueError, match="non-finite"):
            first.append({"x": float("nan")})
    with TrialStore(tmp_path) as again:  # released on close
        assert again.open({"fingerprint": "a"}, resume=True) == []


def test_write_json_atomic_replaces_whole_file(tmp_path):
    target = tmp_path / "meta.json"
    write_json_atomic(target, {"a": 1})
    write_json_atomic(target, {"b": [1, 2]})
    assert json.loads(target.read_text()) == {"b": [1, 2]}
    assert [p.name for p in tmp_path.iterdir()] == ["meta.json"]  # no temp files left behind


# -- failures --------------------------------------------------------------------------------------------------

def test_divergence_and_non_finite_results_are_recorded_and_the_run_goes_on(tmp_path):
    pts = [{"mode": m} for m in ("ok", "diverge", "nan", "inf", "ok")]
    recs = run_trials(failing_trial, pts, 2, root_seed=0, store_dir=tmp_path / "out")
    status = {r["point"]: (r["status"], r["reason"]) for r in recs}
    assert status[0] == ("ok", None) and status[4] == ("ok", None)
    assert status[1] == ("failed", "DivergenceError: all 3 IFCA runs diverged (non-finite loss); lower step_size")
    assert status[2] == ("failed", "non-finite result: param_error=nan")
    assert status[3] == ("failed", "non-finite result: param_error=inf")
    nan_rec = next(r for r in recs if r["point"] == 2)
    # the finite parts are kept; NaN inside a history list marks "not recorded" and is not itself a failure
    assert nan_rec["result"] == {"param_error": None, "ari": 1.0, "history": {"loss": [1.0, None]}}
    ok = recs[0]["result"]
    assert ok == {"param_error": 0.5, "ari": 1.0, "labels": [0, 1, 2]}
    assert comparable(read_records(tmp_path / "out")) == comparable(recs)


def test_real_ifca_divergence_is_a_failed_trial():
    pts = [{**SMALL, "R": 1.0, "step_size": 1e4, "n_init": 1}, {**SMALL, "R": 1.0}]
    recs = run_trials(experiment_trial, pts, 1, root_seed=0)
    assert recs[0]["status"] == "failed" and recs[0]["reason"].startswith("DivergenceError: all 1 IFCA runs")
    assert recs[1]["status"] == "ok" and math.isfinite(recs[1]["result"]["param_error"])


def test_other_exceptions_stop_the_run_but_keep_finished_trials(tmp_path):
    pts = [{"mode": "ok"}, {"mode": "bug"}]
    with pytest.raises(ZeroDivisionError):
        run_trials(failing_trial, pts, 2, root_seed=0, store_dir=tmp_path / "out")
    assert len(read_records(tmp_path / "out")) == 2  # point 0's trials are safe; --resume continues


# -- validation and progress -------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, exc, match", [
    ({"trials": 0}, ValueError, r"trials must be an integer in \[1, inf\), got 0"),
    ({"n_jobs": 0}, ValueError, r"n_jobs must be -1 \(all cores\) or an integer in \[1, inf\), got 0"),
    ({"n_jobs": -2}, ValueError, r"n_jobs must be an integer in \[-1, inf\), got -2"),
    ({"backend": "lokky"}, ValueError, r"backend must be one of loky, threading, dask, ray, .*; got 'lokky' "
                                       r"\(did you mean 'loky'\?\)"),
    ({"scheduler": "tcp://127.0.0.1:1"}, ValueError, "scheduler is only used with backend 'dask'"),
    ({"resume": True}, ValueError, "resume=True needs a store_dir"),
    ({"root_seed": -1}, ValueError, r"root_seed must be an integer in \[0, inf\), got -1"),
    ({"blas_threads": 0}, ValueError, r"blas_threads must be an integer in \[1, inf\)"),
])
def test_bad_arguments_name_the_parameter_and_range(kwargs, exc, match):
    args = {"trials": 1, **kwargs}
    with pytest.raises(exc, match=match):
        run_trials(failing_trial, [{"mode": "ok"}], **args)


def test_bad_points_and_results():
    with pytest.raises(ValueError, match="points must not be empty"):
        run_trials(failing_trial, [], 1)
    with pytest.raises(TypeError, match=r"points\[0\] must be a dict"):
        run_trials(failing_trial, [3], 1)
    with pytest.raises(TypeError, match="must return a dict"):
        run_trials(lambda p, s: 3, [{}], 1)
    with pytest.raises(TypeError, match="field 'x' has type object"):
        run_trials(lambda p, s: {"x": object()}, [{}], 1)


def test_progress_bar_is_quiet_outside_a_terminal(monkeypatch, capsys):
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("CFLAB_QUIET", "1")
    assert show_progress() is False and show_progress(True) is True
    monkeypatch.delenv("CFLAB_QUIET")
    monkeypatch.setenv("CI", "true")
    assert show_progress() is False
    run_trials(failing_trial, [{"mode": "ok"}], 3, progress=True, desc="demo")
    err = capsys.readouterr().err
    assert "demo" in err and "3/3" in err
    run_trials(failing_trial, [{"mode": "ok"}], 3)
    assert capsys.readouterr().err == ""
