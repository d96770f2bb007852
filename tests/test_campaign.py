"""The paper-scale campaign (figures/campaign/planner.py): runs collected from the targets, the one-JSON-per-run store,
the manifest and budget, and the paper-scale rows (figures.campaign.measured.campaign_rows)."""

from __future__ import annotations

import json
import math

import pytest

from synth.store import with_digest

pytest.importorskip("torch")

from figures.campaign import costs as campaign_costs  # noqa: E402
from figures.campaign import planner as campaign  # noqa: E402
from figures.campaign import store as campaign_store  # noqa: E402
from figures.registry import Context  # noqa: E402
from figures.runs import run_points  # noqa: E402
from figures.trials import nets_trial  # noqa: E402
from figures.verdicts.published import tables  # noqa: E402
from synth.montecarlo import trial_seed  # noqa: E402
from synth.store import StoreError  # noqa: E402


@pytest.fixture
def fake_data(tmp_path):
    """A data directory whose MNIST, Amazon and AG News folders exist (their files are never read by the collection)."""
    root = tmp_path / "data"
    for folder in ("mnist", "amazon-blitzer", "ag-news"):
        (root / folder).mkdir(parents=True)
        (root / folder / "placeholder").write_text("x")
    return str(root)


def _timed_36s(req):
    """A current timing entry of ``req``: 36 s a round, no setup (100 rounds: 1 CPU-hour a run)."""
    first = campaign_costs._first_round(req)
    return {"seconds_per_round": 36.0, "setup_seconds": 0.0, "per_round_from": "test",
            "timed_rounds": [first, first + 1]}


def _cell(requests, name_part):
    return next(c for c in campaign.cells(requests) if name_part in c.name)


def test_runs_are_the_targets_full_size_runs(tmp_path, fake_data):
    requests, rows = campaign.collect(tmp_path / "store", fake_data, names=["clove-table5"])
    cell = _cell(requests, "unsup-mnist")
    # CLoVE Table 5 at --full: FedAvg, Local-only, IFCA, CLoVE x the paper's 3 seeds, 50 clients of 250 images
    assert sorted({r.point["algo"] for r in cell.requests}) == ["clove", "global", "ifca", "local"]
    assert cell.seeds == 3 and cell.clients == 50 and len(cell.requests) == 12
    assert {r.point["n_per_client"] for r in cell.requests} == {250}
    # the seed of trial t of point p is the sweep engine's: the same runs as `paper_repro.py --full`
    assert all(r.seed == trial_seed(2041, r.point_index, r.trial) for r in cell.requests)
    assert len({r.key for r in cell.requests}) == 12
    assert [p.artifact for p in cell.published] == ["Table 5"] * 4
    # nothing is stored: every numeric row of the target says so
    assert all(r.verdict.startswith("not run") for r in rows["clove-table5"] if r.stats is None and not r.compared
               and "MNIST" in r.item and "lowest" not in r.item)


def test_every_published_number_is_in_the_manifest_once(tmp_path, fake_data):
    requests, _ = campaign.collect(tmp_path / "store", fake_data)
    cells = campaign.cells(requests)
    timings = {}
    plans = campaign.plan(cells, timings, 40.0, tmp_path / "store", fake_data)
    rows = campaign.manifest_rows(plans, timings)
    keys = [(r["paper"], r["artifact"], r["group"], r["row"], r["column"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(tables())
    assert {r["status"] for r in rows} <= {"stored", "queued", "needs a GPU", "data not available", "not timed yet"}
    # CIFAR-10 is not in the fake data directory, nor FMNIST: their numbers have no runs
    assert all(r["status"] == "data not available" for r in rows if "CIFAR" in r["column"])
    t1 = [p for p in plans if p.cell.folder == "ifca-table1"]
    assert len(t1) == 3 and all(p.minimal == 3 for p in t1)  # 3 seeds: the fewest that give a verdict
    assert all(p.minimal == 3 for p in plans if p.cell.folder.startswith("clove-"))


def test_budget_queues_the_most_numbers_per_cpu_hour_first(tmp_path, fake_data):
    requests, _ = campaign.collect(tmp_path / "store", fake_data, names=["clove-table3", "clove-table5"])
    cells = [c for c in campaign.cells(requests) if c.dataset in ("amazon", "mnist-one-class")]
    # every run: 1 s setup + 36 s a round (100 rounds: 1 CPU-hour a run)
    timings = {campaign._timing_key(r): _timed_36s(r) for c in cells
               for r in c.requests}
    plans = campaign.plan(cells, timings, 40.0, tmp_path / "store", fake_data)
    by = {p.cell.dataset: p for p in plans}
    # Amazon: 29 numbers with ± for 12 runs x 3 seeds = 36 h; Table 5 MNIST: 4 numbers for 4 x 3 = 12 h
    assert math.isclose(by["amazon"].seconds_minimal / 3600, 36.0)
    assert math.isclose(by["mnist-one-class"].seconds_minimal / 3600, 12.0)
    assert [p.cell.dataset for p in plans] == ["amazon", "mnist-one-class"]
    assert by["amazon"].status == "queued" and by["mnist-one-class"].status == "needs a GPU"  # 36 + 12 > 40
    todo = campaign.queue(plans, timings, 40.0, tmp_path / "store")
    assert {r.point["dataset"] for r in todo} == {"amazon"} and len(todo) == 36


def test_a_cell_timed_in_part_costs_at_least_its_timed_runs(tmp_path, fake_data):
    """Timed points give a lower bound: over the budget already, the cell needs a GPU; under it, it waits for the
    rest of its timings."""
    requests, _ = campaign.collect(tmp_path / "store", fake_data, names=["clove-table5"])
    cell = _cell(requests, "unsup-mnist")
    # IFCA alone timed: 1 CPU-hour a run (36 s x 100 rounds), 3 seeds; the other 3 points not timed
    timings = {campaign._timing_key(r): _timed_36s(r) for r in cell.requests
               if r.point["algo"] == "ifca"}
    (over,) = campaign.plan([cell], timings, 2.0, tmp_path / "store", fake_data)
    assert over.untimed_points == 3 and math.isclose(over.seconds_minimal / 3600, 3.0)
    assert over.status == "needs a GPU"  # at least 3 CPU-hours against a budget of 2
    row = campaign.manifest_rows([over], timings)[0]
    assert row["cost_basis"] == "timed rounds of 1 of 4 points: a lower bound, the other 3 not timed yet"
    assert "| ≥ 3 |" in campaign.summary([over], [row], 2.0)
    (under,) = campaign.plan([cell], timings, 40.0, tmp_path / "store", fake_data)
    assert under.status == "not timed yet"  # 3 of the 40 hours: the untimed points decide
    assert campaign.queue([under], timings, 40.0, tmp_path / "store") == []


def test_timing_leaves_a_cell_whose_timed_part_is_over_the_budget(tmp_path, fake_data, monkeypatch):
    requests, _ = campaign.collect(tmp_path / "store", fake_data, names=["clove-table5"])
    cell = _cell(requests, "unsup-mnist")
    root = tmp_path / "store"
    root.mkdir()
    ifca = {campaign._timing_key(r): _timed_36s(r) for r in cell.requests if r.point["algo"] == "ifca"}
    (root / campaign_costs.TIMINGS).write_text(json.dumps(ifca))
    timed = []

    def fake_time(point, seed, rounds, data_dir):
        timed.append(point["algo"])
        raise RuntimeError("not run in the test")

    monkeypatch.setattr(campaign_costs, "_time_point", fake_time)
    lines = []
    campaign.measure([cell], root, fake_data, log=lines.append, budget_hours=2.0)
    assert timed == [] and "needs a GPU" in lines[0]  # IFCA's 3 seeds alone: 3 CPU-hours
    campaign.measure([cell], root, fake_data, log=lines.append, budget_hours=40.0)
    assert sorted(timed) == ["clove", "global", "local"]  # under the budget: the other points are timed


def test_one_off_work_in_the_first_rounds_is_timed_as_setup(tmp_path, fake_data, monkeypatch):
    """FedALA's first adaptive aggregation trains its weights to convergence (round 2, or the end of a 1-round run):
    timed between rounds 2 and 3, a 100-round run costs what it would, not 100 times the one-off."""
    requests, _ = campaign.collect(tmp_path / "store", fake_data, names=["clove-table3"])
    cell = _cell(requests, "amazon")
    root = tmp_path / "store"
    root.mkdir()
    calls = []

    def fake_time(point, seed, rounds, data_dir):
        # 5 s setup, 10 s a round, and FedALA's one-off 100 s: in round 2, or after the last round of a 1-round run
        one_off = 100.0 if point["algo"] == "fedala" else 0.0
        calls.append((point["algo"], rounds))
        ends = {k: 5.0 + 10.0 * (k + 1) + (one_off if k >= 1 else 0.0) for k in range(rounds)}
        return 5.0 + 10.0 * rounds + one_off, {"data": 0.0, "local training": 10.0 * rounds, "round_ends": ends}

    monkeypatch.setattr(campaign_costs, "_time_point", fake_time)
    timings = campaign.measure([cell], root, fake_data, log=lambda _: None)
    assert ("fedala", 2) in calls and ("fedala", 3) in calls and ("fedala", 1) not in calls
    assert ("global", 1) in calls and ("global", 2) in calls
    by = {t["algo"]: t for t in timings.values()}
    assert by["fedala"]["per_round_from"] == "third round, between the monitor's calls"
    assert math.isclose(by["fedala"]["seconds_per_round"], 10.0)
    assert math.isclose(by["fedala"]["setup_seconds"], 105.0)
    fedala = next(r for r in cell.requests if r.point["algo"] == "fedala")
    rounds = int(fedala.point["rounds"])
    assert math.isclose(campaign.run_seconds(fedala, timings), 105.0 + 10.0 * rounds)  # = 5 + 100 + 10 a round
    # an entry timed at rounds 1 and 2 (by an older rule) is timed again; one timed at 2 and 3 is kept
    key = campaign._timing_key(fedala)
    # (its old estimate, 1e6 s a round, is no lower bound: it does not make the cell over the budget)
    stale = {k: v for k, v in timings[key].items() if k != "timed_rounds"}
    stale_timings = dict(timings, **{key: dict(stale, seconds_per_round=1e6)})
    assert campaign.run_seconds(fedala, stale_timings) is None  # prices nothing: the point counts as untimed
    (root / campaign_costs.TIMINGS).write_text(json.dumps(stale_timings))
    calls.clear()
    campaign.measure([cell], root, fake_data, log=lambda _: None, budget_hours=40.0)
    assert calls == [("fedala", 2), ("fedala", 3)]
    calls.clear()
    campaign.measure([cell], root, fake_data, log=lambda _: None)
    assert calls == []


def test_a_points_stored_runs_replace_its_timed_estimate(tmp_path, fake_data):
    """Once one seed of a point is stored, the point's other seeds cost what that run measured."""
    root = tmp_path / "store"
    requests, _ = campaign.collect(root, fake_data, names=["clove-table5"])
    cell = _cell(requests, "unsup-mnist")
    timings = {campaign._timing_key(r): _timed_36s(r) for r in cell.requests}
    stored = [r for r in cell.requests if r.trial == 0 and r.point["algo"] in ("global", "ifca")]
    for r, cpu in zip(stored, (360.0, 720.0), strict=True):  # 0.1 and 0.2 h against the timed 1 h
        r.path(root).parent.mkdir(parents=True, exist_ok=True)
        r.path(root).write_text(json.dumps(with_digest({"campaign": 1, "folder": r.folder, "seed": r.seed,
                                                        "point": r.point, "cpu_seconds": cpu,
                                                        "result": {"test_loss": 0.03}})))
    (plan,) = campaign.plan([cell], timings, 40.0, root, fake_data)
    # 3 seeds: global 3 x 0.1 h, IFCA 3 x 0.2 h, Local and CLoVE 3 x 1 h (timed)
    assert math.isclose(plan.seconds_minimal / 3600, 0.3 + 0.6 + 6.0)
    assert plan.measured_points == 2
    row = campaign.manifest_rows([plan], timings)[0]
    assert row["cost_basis"] == "stored runs (2 of 4 points), timed rounds"
    todo = campaign.queue([plan], timings, 40.0, root)
    assert math.isclose(sum(campaign.run_seconds(r, timings, campaign.stored_seconds(root)) for r in todo) / 3600,
                        0.2 + 0.4 + 6.0)  # the stored seed 0 of global and IFCA is not queued again


def test_a_gpu_takes_the_named_cells_in_order_and_its_runs_cost_no_cpu_budget(tmp_path, fake_data, monkeypatch):
    root = tmp_path / "store"
    requests, _ = campaign.collect(root, fake_data, names=["ifca-table1", "clove-table5"])
    cells = campaign.cells(requests)
    todo = campaign.gpu_queue(cells, ["mnist-rotated:1200", "unsup-mnist", "mnist-rotated:2400"], root)
    # the cells as named, 3 seeds each (the fewest that give a verdict), none of the cells not named
    settings = [(r.folder, r.point["clients"]) for r in todo]
    assert settings == [("ifca-table1", 1200)] * 9 + [("clove-unsup-mnist", 50)] * 12 + [("ifca-table1", 2400)] * 9
    assert [r.trial for r in todo[:9]] == [0] * 3 + [1] * 3 + [2] * 3
    assert [r.trial for r in todo[9:21]] == [0] * 4 + [1] * 4 + [2] * 4
    first = todo[0]
    first.path(root).parent.mkdir(parents=True, exist_ok=True)
    record = {"campaign": 1, "folder": first.folder, "seed": first.seed, "point": first.point, "cpu_seconds": 40.0,
              "device": "cuda: NVIDIA H100 80GB HBM3", "result": {}}
    first.path(root).write_text(json.dumps(with_digest(record)))
    assert campaign.gpu_queue(cells, ["mnist-rotated:1200"], root) == todo[1:9]  # stored: not queued again
    assert campaign.stored_seconds(root) == {}  # a GPU's 40 s price no CPU run and spend no CPU budget
    first.path(root).write_text(json.dumps(with_digest(dict(record, device="cpu: AMD EPYC, 2 cores"))))
    assert list(campaign.stored_seconds(root).values()) == [[40.0]]
    monkeypatch.setenv("CFLAB_COMMIT", "27aba92")
    assert campaign.commit() == "27aba92"  # a copy of the tree on a lent GPU says which commit it was sent at


def _tiny_point():
    return dict(dataset="digits-rotated", algo="global", clients=4, n_per_client=10, n_test=5, rounds=2,
                local_steps=1, step_size=0.1, averaging="model", eval_every=0, device="cpu")


def test_a_campaign_run_is_the_sweep_engines_run_and_resumes(tmp_path):
    point = _tiny_point()
    ctx = Context(out=tmp_path / "out", size="tiny", n_jobs=1, device="cpu")
    (engine,) = run_points(ctx, "tiny-folder", nets_trial, [point], 1, 77)
    root = tmp_path / "store"
    req = campaign.RunRequest("some-target", "tiny-folder", 0, 0, point, trial_seed(77, 0, 0),
                              "figures.trials.nets_trial")
    out = campaign.execute(req, str(root), None, "python paper_repro.py --campaign run")
    assert out.get("error") is None
    data = json.loads(req.path(root).read_text())
    for key in ("command", "nets_command", "commit", "device", "seed", "wall_seconds", "cpu_seconds", "result"):
        assert key in data
    same = {k: v for k, v in data["result"].items() if k != "seconds"}
    assert same == {k: v for k, v in engine["result"].items() if k != "seconds"}
    # read back through the targets' path: an ok record with the stored result; another seed is missing
    from synth.spec import ExperimentSpec

    spec = ExperimentSpec.from_points("tiny-folder", [point], 2, 77, trial=nets_trial)
    recs = campaign.stored_records(Context(out=tmp_path, size="full", stored=root, requests=[]), "tiny-folder", spec,
                                   nets_trial)
    assert [r["status"] for r in recs] == ["ok", "missing"]
    assert recs[0]["result"]["test_accuracy"] == engine["result"]["test_accuracy"]


def test_a_stored_file_of_another_run_is_refused(tmp_path):
    point = _tiny_point()
    req = campaign.RunRequest("t", "f", 0, 0, point, 5, "figures.trials.nets_trial")
    other = campaign.RunRequest("t", "f", 0, 0, dict(point, rounds=3), 5, "figures.trials.nets_trial")
    path = req.path(tmp_path)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(with_digest({"folder": "f", "seed": 5, "point": other.point, "result": {}})))
    with pytest.raises(StoreError, match="holds another run"):
        campaign_store.load_run(path, req)
    path.write_text("{not json")
    with pytest.raises(StoreError, match="not a readable campaign run"):
        campaign_store.load_run(path, req)


def test_paper_scale_rows_test_stored_runs_against_the_papers_numbers(tmp_path, fake_data):
    """Fake stored results for CLoVE Table 5 (MNIST): the rows' means and tests follow them; IFCA is scored as CLoVE
    scores every method (the model assigned to each client), its min-loss score a second row, not counted."""
    from figures.campaign.measured import campaign_rows
    from figures.verdicts.published import lookup
    from figures.verdicts.rules import PaperNumber, number_test

    root = tmp_path / "store"
    requests, _ = campaign.collect(root, fake_data, names=["clove-table5"])
    cell = _cell(requests, "unsup-mnist")
    # FedAvg right on the paper's 0.032 +- 0.001 (3 seeds show it equivalent within the declared margin); CLoVE far
    # from 0.014
    losses = {"global": [0.0315, 0.0320, 0.0325], "local": [0.019, 0.019, 0.019], "ifca": [0.024, 0.025, 0.023],
              "clove": [0.030, 0.031, 0.029]}
    for r in cell.requests:
        path = r.path(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        result = {"test_loss": losses[r.point["algo"]][r.trial], "test_accuracy": None, "ari": 1.0}
        if r.point["algo"] == "ifca":  # IFCA's clients scored with their training-data cluster as well
            result["test_loss_train_identity"] = [0.030, 0.032, 0.034][r.trial]
        record = {"campaign": 1, "folder": r.folder, "seed": r.seed, "point": r.point, "cpu_seconds": 1.0,
                  "result": result}
        if r.point["algo"] == "ifca":  # made on a lent GPU: its rows say so
            record["device"] = "cuda: NVIDIA H100 80GB HBM3 (torch 2.11.0+cu130, CUDA 13.0)"
        path.write_text(json.dumps(with_digest(record)))
    rows, cells = campaign_rows(root, fake_data)
    mnist = [rows[c["row"]] for c in cells if c["pub"].column == "MNIST"]
    by = {r.item.split(" / ")[-1].split(" [")[0]: r for r in mnist if r.counted}
    assert set(by) == {"FedAvg", "Local-only", "IFCA", "CLoVE"}
    assert by["FedAvg"].verdict.startswith("agrees (equivalent within") and by["CLoVE"].verdict.startswith("differs")
    m, s, n = by["CLoVE"].stats
    assert n == 3 and math.isclose(m, 0.030) and math.isclose(s, 0.001)
    pub = lookup("CLoVE", "Table 5", "CLoVE", "MNIST")
    t = number_test(m, s, n, PaperNumber(*pub.paper_number()))
    assert t.p_differ < 0.05 / 4  # far outside 0.014 +- 0.000: significant after Holm over the table's numbers
    # IFCA as CLoVE Sec. 5.1 scores it: the training-data cluster's model on the client's test data
    assert math.isclose(by["IFCA"].stats[0], 0.032)
    second = [r for r in mnist if not r.counted]
    assert len(second) == 1 and "min-loss" in second[0].item and math.isclose(second[0].stats[0], 0.024)
    assert "protocol:" in by["CLoVE"].note and "seed(s) stored" in by["CLoVE"].note
    assert "(9 on CPU, 3 on NVIDIA H100 80GB HBM3)" in by["CLoVE"].note


def test_a_run_from_a_modified_tree_records_its_diffs_digest(tmp_path, monkeypatch):
    """Provenance: a run stored from a tree with uncommitted changes names the code it ran by the diff's digest."""
    from figures.campaign import planner
    from figures.campaign.store import load_run

    monkeypatch.setattr(planner, "commit", lambda: "0123456789ab+")
    monkeypatch.setattr(planner, "tree_change", lambda: {"diff_sha256": "d" * 64, "changed": ["synth/x.py"]})
    req = campaign.RunRequest("t", "tiny-folder", 0, 0, _tiny_point(), 5, "figures.trials.nets_trial")
    assert campaign.execute(req, str(tmp_path), None, "test").get("error") is None
    data = load_run(req.path(tmp_path), req)
    assert data["commit"].endswith("+") and data["tree"] == {"diff_sha256": "d" * 64, "changed": ["synth/x.py"]}
    monkeypatch.setattr(planner, "commit", lambda: "0123456789ab")  # a clean tree records no diff
    req2 = campaign.RunRequest("t", "tiny-folder", 0, 1, _tiny_point(), 6, "figures.trials.nets_trial")
    campaign.execute(req2, str(tmp_path), None, "test")
    assert "tree" not in load_run(req2.path(tmp_path), req2)


def test_tree_change_is_the_digest_of_git_diff_outside_the_store(monkeypatch):
    import subprocess

    from figures.campaign import provenance

    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        out = b"diff --git a/x b/x\n" if "--binary" in argv else "synth/x.py\n"
        return subprocess.CompletedProcess(argv, 0, stdout=out)

    monkeypatch.delenv("CFLAB_COMMIT", raising=False)
    monkeypatch.setattr(provenance.subprocess, "run", fake_run)
    change = provenance.tree_change()
    assert change["changed"] == ["synth/x.py"] and len(change["diff_sha256"]) == 64
    assert all(":(exclude)figures/measured" in argv for argv in calls)  # stored results do not count as code
    monkeypatch.setattr(provenance.subprocess, "run",
                        lambda argv, **kw: subprocess.CompletedProcess(argv, 0, stdout=b"" if "--binary" in argv
                                                                       else ""))
    assert provenance.tree_change() is None


def test_rows_of_runs_from_an_unrecorded_modified_tree_say_so():
    from figures.campaign.measured import _provenance

    note = _provenance({"global": {"4a4baa4728c8+"}, "ifca": {"1c71f0e50781+"}}, "FedAvg")
    assert "modified tree 4a4baa4728c8+, diff not recorded" in note and "1c71f0e50781" not in note
    assert _provenance({"global": {"4a4baa4728c8+"}}, "IFCA") == ""


def test_the_queue_takes_seeds_up_to_the_verdict_powers_count_before_the_papers(tmp_path, fake_data):
    """Seed tiers: the minimal test (3), then the seeds --verdict-power asks for (at most the paper's count), then the
    paper's count."""
    from figures.campaign.cells import power_seeds

    requests, _ = campaign.collect(tmp_path / "store", fake_data, names=["srfca-table1"])
    cell = next(c for c in campaign.cells(requests) if c.seeds == 5)
    timings = {campaign._timing_key(r): _timed_36s(r) for r in cell.requests}
    (plan,) = campaign.plan([cell], timings, 1e6, tmp_path / "store", fake_data)
    assert plan.power == power_seeds(cell) and plan.minimal == 3
    plan.power = 4  # say the power count is 4 of the paper's 5
    todo = campaign.queue([plan], timings, 1e6, tmp_path / "store")
    trials = [r.trial for r in todo]
    n = len(cell.points())
    assert trials[:3 * n] == sorted(trials[:3 * n]) and set(trials[:3 * n]) == {0, 1, 2}
    assert set(trials[3 * n:4 * n]) == {3} and set(trials[4 * n:]) == {4}
    row = campaign.manifest_rows([plan], timings)[0]
    assert row["power_seeds"] == 4
