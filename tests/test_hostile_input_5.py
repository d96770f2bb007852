"""Hostile input: a failed target exits non-zero on every path, and flags every algorithm reads are never refused."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")


# -- --seed drives every algorithm's data, initial weights and minibatch order ------------------------------------
def test_seed_is_a_flag_of_every_algorithm():
    from nets.algorithms import ALGOS
    from nets.cli import algo_flags

    assert all("seed" in algo_flags(a) for a in ALGOS)


def test_local_runs_over_seeds_from_the_command_line(capsys):
    from nets.cli import main

    records = []
    for seed in (0, 1):
        code = main(["run", "--dataset", "digits-rotated", "--algo", "local", "--clients", "8", "--n-per-client", "20",
                     "--rounds", "2", "--seed", str(seed), "--json"])
        out = capsys.readouterr()
        assert code == 0, out.err
        records.append(json.loads(out.out))
    # the seed reached the run: other data, other initial weights, another accuracy
    assert records[0]["test_accuracy"] != records[1]["test_accuracy"]


@pytest.mark.parametrize("algo", ["global", "perfedavg", "fedproto"])
def test_the_seed_changes_every_kind_of_run(algo):
    from nets.experiment import run_experiment

    p = {"dataset": "digits-rotated", "algo": algo, "clients": 8, "n_per_client": 20, "rounds": 2}
    a, b = run_experiment({**p, "seed": 0}), run_experiment({**p, "seed": 1})
    assert (a["test_accuracy"], a["test_loss"]) != (b["test_accuracy"], b["test_loss"])


# -- a failed target never exits 0 ----------------------------------------------------------------------------------
def _failing(monkeypatch, name: str):
    import dataclasses

    import figures
    from figures.registry import TARGETS

    figures.load_targets()

    def boom(ctx):
        raise ValueError("a ledger that does not parse")

    monkeypatch.setitem(TARGETS, name, dataclasses.replace(TARGETS[name], run=boom))


@pytest.mark.parametrize("extra", [["--n-jobs", "1"], ["--n-jobs", "2"], ["--size", "medium", "--n-jobs", "1"]])
def test_a_failed_target_exits_non_zero(extra, tmp_path, monkeypatch, capsys):
    """One target, serial or side by side, any size: 'targets 1 failed' and exit 1 (the serial path tested the
    (name, done) pair, always true, and exited 0)."""
    import paper_repro

    _failing(monkeypatch, "measured-runs")
    code = paper_repro.main(["--only", "measured-runs", "--out", str(tmp_path), *extra])
    out = capsys.readouterr()
    assert code == 1, out.out + out.err
    assert "FAILED" in out.err and "a ledger that does not parse" in out.err


# -- statistics on degenerate input --------------------------------------------------------------------------------
def test_a_claim_over_nothing_is_never_agreement():
    from figures.verdicts.rules import AGREES, all_of, best_claim, equal_claim, head, level_claim, order_claim

    assert head(best_claim({}, ["A"])) != AGREES  # no seeds at all
    assert head(best_claim({"A": [1.0, 1.0, 1.0]}, ["A"])) != AGREES  # nothing to be ahead of
    assert head(order_claim({}, [])) != AGREES
    assert head(level_claim({}, 0.5, below=True)) != AGREES
    assert head(equal_claim({}, 0.5, margin=0.1)) != AGREES
    assert head(all_of()) != AGREES


def test_one_nan_p_value_leaves_its_holm_family_alone():
    import math

    from figures.verdicts.rules import holm

    adj = holm([0.001, float("nan"), 0.01, 0.04])
    assert math.isnan(adj[1])
    assert adj[0] == pytest.approx(0.003) and adj[2] == pytest.approx(0.02) and adj[3] == pytest.approx(0.04)
    assert holm([]) == []


# -- tables.csv is validated -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, bad", [("pm", "-0.3"), ("pm", "nan"), ("value", "inf"), ("value", "1" * 120),
                                        ("value", "1e307"), ("pm", "abc")])
def test_a_malformed_published_number_is_refused_naming_file_line_and_field(field, bad, tmp_path, monkeypatch):
    import csv

    import figures.verdicts.published as published

    src = published.HERE / "tables.csv"
    rows = list(csv.DictReader(src.open(encoding="utf-8", newline="")))
    rows[3][field] = bad
    (tmp_path / "tables.csv").write_text("")
    with (tmp_path / "tables.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    monkeypatch.setattr(published, "HERE", tmp_path)
    published.tables.cache_clear()
    try:
        with pytest.raises(ValueError, match=rf"tables.csv: line 5: field '{field}' must be"):
            published.tables()
    finally:
        published.tables.cache_clear()


# -- ledgers: text, nesting, keys -------------------------------------------------------------------------------------
def test_ledger_text_reaches_report_md_as_text():
    from figures.verdicts.compare import markdown_table
    from figures.verdicts.rows import Row

    md = markdown_table([Row("x", "1", "2", "+1", "stale (<script>alert(1)</script> | & more)")])
    assert "<script>" not in md and "&lt;script>" in md and "\\|" in md


def _minimal_ledger(tmp_path, extra: str) -> str:
    src = (__import__("figures.verdicts.protocol", fromlist=["HERE"]).HERE / "srfca-simulated.toml").read_text()
    path = tmp_path / "srfca-simulated.toml"
    path.write_text(src + extra)
    return str(path)


def test_a_deeply_nested_ledger_is_one_line_naming_the_file(tmp_path):
    from figures.verdicts.protocol import load_ledger

    path = _minimal_ledger(tmp_path, "\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(ValueError, match="srfca-simulated.toml.*nested too deeply"):
        load_ledger(path)


def test_stale_changed_keys_must_name_point_keys(tmp_path):
    from figures.verdicts.protocol import load_ledger

    bad = '\n[stale]\nreason = "r"\nchanged_keys = ["<b>not a key</b>"]\nrerun = "x"\n'
    with pytest.raises(ValueError, match="changed_keys"):
        load_ledger(_minimal_ledger(tmp_path, bad))
    good = '\n[stale]\nreason = "r"\nchanged_keys = ["validation"]\nrerun = "x"\n'
    assert load_ledger(_minimal_ledger(tmp_path, good)).stale.changed_keys == ("validation",)


# -- stored runs: digest required, ranges, regular files, sealing --------------------------------------------------
def _run_file(root, name="x-1.json", seal=True, **result):
    import json

    from synth.store import with_digest

    rec = {"campaign": 1, "folder": "f", "seed": 1, "point": {"algo": "global", "dataset": "mnist-rotated",
                                                              "clients": 4}, "cpu_seconds": 10.0,
           "device": "cpu: x", "result": {"test_accuracy": 0.5, **result}}
    folder = root / "f"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(json.dumps(with_digest(rec) if seal else rec))
    return folder / name


def test_pricing_refuses_a_run_file_without_digest_or_with_a_negative_cost(tmp_path):
    import json

    from figures.campaign.costs import stored_seconds
    from synth.store import StoreError, with_digest

    _run_file(tmp_path)
    assert stored_seconds(tmp_path)  # the sealed run prices its point
    forged = _run_file(tmp_path, "y-2.json", seal=False)
    with pytest.raises(StoreError, match="y-2.json: has no digest"):
        stored_seconds(tmp_path)
    rec = json.loads(forged.read_text())
    rec["cpu_seconds"] = -1e12
    forged.write_text(json.dumps(with_digest(rec)))
    with pytest.raises(StoreError, match="y-2.json: field cpu_seconds must be a finite number"):
        stored_seconds(tmp_path)


@pytest.mark.parametrize("bad", ["abc", 10**400, [0.5], float("inf")])
def test_a_run_whose_result_is_out_of_range_is_refused_naming_the_field(bad, tmp_path):
    import json

    from figures.campaign.store import load_run
    from synth.store import StoreError

    path = _run_file(tmp_path, seal=False)
    rec = json.loads(path.read_text())
    rec["result"]["test_accuracy"] = bad
    try:
        from synth.store import with_digest

        path.write_text(json.dumps(with_digest(rec)))
    except ValueError:  # a non-finite number cannot be sealed: written plain, refused for its missing digest
        path.write_text(json.dumps(rec))
    with pytest.raises(StoreError, match="x-1.json"):
        load_run(path)


def test_a_deleted_digest_is_no_way_around_the_check(tmp_path):
    import json

    from figures.campaign.store import load_run
    from synth.store import StoreError

    path = _run_file(tmp_path)
    rec = json.loads(path.read_text())
    del rec["digest"]
    rec["result"]["test_accuracy"] = 0.99
    path.write_text(json.dumps(rec))
    with pytest.raises(StoreError, match="has no digest"):
        load_run(path)


def test_a_fifo_by_a_runs_name_is_refused_not_waited_on(tmp_path):
    import os

    from figures.campaign.costs import stored_seconds
    from synth.store import StoreError

    (tmp_path / "f").mkdir()
    os.mkfifo(tmp_path / "f" / "z-3.json")
    with pytest.raises(StoreError, match="z-3.json: not a regular file"):
        stored_seconds(tmp_path)


def test_seal_runs_seals_older_runs_and_refuses_edited_ones(tmp_path, capsys):
    import json

    import paper_repro
    from figures.campaign.store import load_run

    old = _run_file(tmp_path, seal=False)
    assert paper_repro.main(["--seal-runs", str(tmp_path / "f")]) == 0
    assert "sealed 1 of 1" in capsys.readouterr().out
    assert load_run(old)["result"]["test_accuracy"] == 0.5
    rec = json.loads(old.read_text())
    rec["result"]["test_accuracy"] = 0.9  # edited after sealing
    old.write_text(json.dumps(rec))
    assert paper_repro.main(["--seal-runs", str(old)]) == 2
    assert "changed after it was written" in capsys.readouterr().err


@pytest.mark.parametrize("flag, value", [("--cpus", "1000000000"), ("--gpus", "1e8"), ("--cpus", "10001")])
def test_the_campaigns_worker_counts_are_bounded_before_any_allocation(flag, value, capsys):
    import paper_repro

    code = paper_repro.main(["--campaign", "plan", "--backend", "dask", flag, value])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and f"{flag} must be a whole number of workers in [0, 10000]" in err


# -- Dask: a worker set that can take no run, a scheduler that never speaks ---------------------------------------
def test_workers_that_declare_no_resource_end_the_campaign_at_once():
    pytest.importorskip("distributed")
    from figures.campaign.dask_runner import run_queue
    from figures.campaign.store import RunRequest

    class Client:  # one connected worker with no CPU or GPU resource
        def scheduler_info(self, n_workers=-1):
            return {"workers": {"tcp://127.0.0.1:1": {"resources": {}}}}

    req = RunRequest("t", "f", 0, 0, {"algo": "global", "dataset": "mnist-rotated", "clients": 4}, 0,
                     "figures.trials.nets_trial")
    with pytest.raises(ValueError, match="1 runs left that no connected worker can take"):
        run_queue(Client(), [], [req], "/nonexistent", None, "", log=lambda s: None, wait_s=600.0)


def test_a_silent_scheduler_is_named_within_a_bounded_wait(monkeypatch):
    pytest.importorskip("distributed")
    import socket
    import threading
    import time

    import figures.campaign.dask_runner as dr

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    held = []
    threading.Thread(target=lambda: held.append(srv.accept()), daemon=True).start()  # accepts, never speaks
    monkeypatch.setattr(dr, "CONNECT_TIMEOUT_S", 3.0)
    t0 = time.monotonic()
    with pytest.raises(ValueError, match="no Dask scheduler answered within 3 s"):
        with dr._client(f"tcp://127.0.0.1:{srv.getsockname()[1]}", 0, 0):
            pass
    assert time.monotonic() - t0 < 60
    srv.close()


def test_a_fifo_ledger_and_a_fifo_run_path_are_refused_not_waited_on(tmp_path):
    import os
    import subprocess
    import sys

    from figures.verdicts.protocol import load_ledger

    os.mkfifo(tmp_path / "x.toml")
    with pytest.raises(ValueError, match="x.toml.*not a regular file"):
        load_ledger(tmp_path / "x.toml")
    os.mkfifo(tmp_path / "run.json")
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, str(root / "bench" / "rerun_on_cpu.py"), str(tmp_path / "run.json")],
                         capture_output=True, text=True, timeout=120, cwd=root)
    assert out.returncode != 0 and "not a regular file" in out.stderr and out.stderr.count("\n") == 1, out.stderr


def test_a_sweep_store_with_every_digest_removed_is_refused_not_read_as_legacy(store, capsys):
    """Stripping the meta's and every record's digest, then flipping a success, used to read as a legacy store."""
    import json

    from synth.cli import main as synth_main

    _, out = store
    meta = json.loads((out / "meta.json").read_text())
    del meta["digest"]
    (out / "meta.json").write_text(json.dumps(meta))
    lines = [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]
    for rec in lines:
        del rec["digest"]
    lines[0]["result"]["success"] = not lines[0]["result"]["success"]
    (out / "trials.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    assert synth_main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "meta.json" in err and "no record digests" in err
    assert f"python -m synth seal {out}" in err


def test_a_fifo_by_the_timings_files_name_is_refused_not_waited_on(tmp_path):
    import os

    from figures.campaign.costs import TIMINGS, read_timings

    os.mkfifo(tmp_path / TIMINGS)
    with pytest.raises(ValueError, match="timings file is a FIFO"):
        read_timings(tmp_path)
