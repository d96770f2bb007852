"""IFCA Table I's protocol as the paper and its public code (jichan3751/ifca, mnist/) define it: the test machines
(m_test = 10000 k / n machines of n test images, one rotation each), the min-loss score of IFCA and the global model
on them, the Local baseline's own-rotation score, and the Local baseline's training (10 epochs x tau = 10 full-batch
steps from each client's own initialisation).  The ledger of every setting: figures/published/protocols/."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import nets.datasets  # noqa: E402
import nets.experiment  # noqa: E402
from figures.registry import Context  # noqa: E402
from figures.targets import ifca_nets  # noqa: E402
from nets.data.images import load_digits  # noqa: E402
from nets.datasets import build_federation  # noqa: E402
from nets.experiment import run_experiment, validate_params  # noqa: E402

K = 4  # Rotated MNIST: 0/90/180/270 degrees (IFCA Sec. VI-B)


class _Captured(Exception):
    """Raised instead of running Table I's runs: carries the points and seeds the target asks for."""

    def __init__(self, points, seeds):
        super().__init__("captured")
        self.points, self.seeds = points, seeds


def _table1_points(tmp_path, monkeypatch, size: str) -> tuple[list[dict], int]:
    """The points (and seeds) of IFCA Table I's runs at ``size``, captured before anything is trained; the data
    directory holds a (never read) MNIST folder, so that medium and full runs take their MNIST columns."""
    data = tmp_path / "data"
    (data / "mnist").mkdir(parents=True, exist_ok=True)
    (data / "mnist" / "placeholder").write_text("x")

    def capture(ctx, folder, points, seeds, seed):
        raise _Captured(points, seeds)

    monkeypatch.setattr(ifca_nets, "run_nets", capture)
    with pytest.raises(_Captured) as info:
        ifca_nets._runs(Context(out=tmp_path / "out", size=size, n_jobs=1, device="cpu", data_dir=str(data)))
    return info.value.points, info.value.seeds


def test_full_size_points_test_on_the_papers_m_test_machines_of_n_images(tmp_path, monkeypatch):
    """IFCA Sec. VI-B: "We also split the test data into m_test = 10000k/n worker machines in the same way";
    mnist/run.py: m_test 800 / 400 / 200 for n = 50 / 100 / 200, for IFCA, the global model and Local alike."""
    points, seeds = _table1_points(tmp_path, monkeypatch, "full")
    mnist = [p for p in points if p["dataset"] == "mnist-rotated"]
    assert {(p["clients"], p["n_per_client"]) for p in mnist} == {(4800, 50), (2400, 100), (1200, 200)}
    assert sorted(p["algo"] for p in mnist) == sorted(["ifca", "global", "local"] * 3)
    got = {(p["algo"], p["n_per_client"]): (p.get("test_machines"), p.get("test_machine_size")) for p in mnist}
    assert got == {(a, n): (10000 * K // n, n) for a in ("ifca", "global", "local") for n in (50, 100, 200)}
    assert {(m, p) for m, p in got.values()} == {(800, 50), (400, 100), (200, 200)}
    assert seeds == 5  # "we run experiment with 5 different random seeds"


def test_reduced_sizes_cut_each_rotations_test_pool_into_machines_of_n(tmp_path, monkeypatch):
    """Medium runs (MNIST at m / 50 clients) test on the paper's own machines (evaluation only: as cheap as the
    former 400 x 100); quick runs on the embedded digits cut each rotation's test pool into machines of n."""
    medium, _ = _table1_points(tmp_path, monkeypatch, "medium")
    assert {(p["algo"], p["n_per_client"], p["test_machines"], p["test_machine_size"]) for p in medium} == \
        {(a, n, 10000 * K // n, n) for a in ("ifca", "global", "local") for n in (50, 100, 200)}
    quick, _ = _table1_points(tmp_path, monkeypatch, "quick")
    pool = len(load_digits().y_test)  # the digits' test pool (the same size at every seed)
    assert {(p["algo"], p["n_per_client"], p["test_machines"], p["test_machine_size"]) for p in quick} == \
        {(a, n, K * (pool // n), n) for a in ("ifca", "global", "local") for n in (50, 100, 200)}


@pytest.mark.parametrize("size", ["full", "medium", "quick"])
def test_local_points_are_the_public_codes_local_baseline(tmp_path, monkeypatch, size):
    """mnist/train_cluster_mnist_local.py (Table I's "Local" in mnist/run.py): --num-epochs defaults to 10 and
    overrides config.json's 300, each epoch tau = 10 full-batch steps of 0.1, m models built in turn from one seed
    (one initialisation per client), no checkpoint (the checkpoint-local run is the unprinted "Finetune")."""
    points, _ = _table1_points(tmp_path, monkeypatch, size)
    for p in points:
        if p["algo"] == "local":
            assert (p["local_train_steps"], p["local_init"], p["step_size"]) == (100, "separate", 0.1)
            assert p.get("batch_size") is None  # full batch: the code's local steps use all n images
        else:  # IFCA and the global model keep their own training (300 rounds of tau = 10 at full size)
            assert "local_train_steps" not in p and "local_init" not in p
    assert all(validate_params(p) for p in points)  # every key is a nets flag with a valid value


def _spy(monkeypatch) -> dict:
    """Record the test pool each partition is cut from and the federations nets.experiment builds."""
    seen: dict = {"pools": [], "feds": []}
    real_partition, real_build = nets.datasets.partition, nets.experiment.build_federation

    def partition(kind, X, y, X_test, y_test, *args, **kwargs):
        seen["pools"].append(np.array(X_test))
        return real_partition(kind, X, y, X_test, y_test, *args, **kwargs)

    def build(*args, **kwargs):
        fed = real_build(*args, **kwargs)
        seen["feds"].append(fed)
        return fed

    monkeypatch.setattr(nets.datasets, "partition", partition)
    monkeypatch.setattr(nets.experiment, "build_federation", build)
    return seen


def _machines_params(n: int, **extra) -> dict:
    pool = len(load_digits().y_test)
    return validate_params(dict(dataset="digits-rotated", clients=8, n_per_client=10, seed=3,
                                test_machines=K * (pool // n), test_machine_size=n, **extra))


def test_test_machines_hold_n_test_images_of_one_rotation_each(monkeypatch):
    """A tiny run of _test_machines: k (pool // n) machines of exactly n images; un-rotated by its own cluster's
    turns every image of a machine is a test-pool image (by no other turn), and each rotation's machines hold
    every test image once (539 = 11 x 49 digits: the whole pool, as 10000 = 200 x 50 MNIST images)."""
    n = 49
    p = _machines_params(n)
    seen = _spy(monkeypatch)
    model = build_federation("digits-rotated", 8, 10, np.random.default_rng(0)).model(
        "mlp", device=torch.device("cpu"), dtype=torch.float64)
    res = SimpleNamespace(models=model.init(0)[None].numpy())
    rec = nets.experiment._test_machines(p, model, res, "min-loss", True, torch.device("cpu"))
    fed, pool = seen["feds"][-1], seen["pools"][-1]
    per = len(pool) // n
    assert (rec["n_test_machines"], rec["test_machine_size"]) == (K * per, n)
    assert fed.X_test.shape[:2] == (K * per, n) and np.bincount(fed.clusters).tolist() == [per] * K
    index = {img.tobytes(): i for i, img in enumerate(pool)}
    for c in range(K):
        found = []
        for j in np.flatnonzero(fed.clusters == c):
            for turns in range(K):
                back = np.rot90(fed.X_test[j], k=-turns, axes=(-2, -1))
                hits = [index.get(np.ascontiguousarray(img).tobytes()) for img in back]
                assert all(h is not None for h in hits) == (turns == c), (c, j, turns)
            found += [index[np.ascontiguousarray(img).tobytes()]
                      for img in np.rot90(fed.X_test[j], k=-c, axes=(-2, -1))]
        assert sorted(found) == list(range(len(pool)))  # every test image once per rotation
    assert 0.0 <= rec["test_accuracy_machines"] <= 1.0 and rec["test_machines_rule"] == "min-loss"


def test_local_models_are_scored_on_every_test_machine_of_their_rotation(monkeypatch):
    """IFCA Sec. VI-B: "For testing the local model baselines, the models are tested by measuring the accuracy on
    the test data with the same distribution (i.e. those have the same rotation). We report the accuracy averaged
    over all the models in worker machines."  Computed here by hand from the machines' images."""
    n = 49
    p = _machines_params(n)
    seen = _spy(monkeypatch)
    train_fed = build_federation("digits-rotated", 8, 10, np.random.default_rng(0))
    model = train_fed.model("mlp", device=torch.device("cpu"), dtype=torch.float64)
    train, _ = train_fed.backends(model, seed=0)
    models = train.to_numpy(train.local_models("gd", 100, 0.1))  # rotation-specific: trained on their client
    res = SimpleNamespace(models=models)
    rec = nets.experiment._test_machines(p, model, res, "own", True, torch.device("cpu"), train_fed.clusters)
    fed = seen["feds"][-1]
    X, y = torch.as_tensor(fed.X_test, dtype=torch.float64), torch.as_tensor(fed.y_test)

    def accuracy(i: int, machines: np.ndarray) -> float:
        with torch.no_grad():
            out = model.forward(torch.as_tensor(models[i]), X[machines].flatten(0, 1))
        return float((out.argmax(1) == y[machines].flatten()).double().mean())

    own = np.mean([accuracy(i, np.flatnonzero(fed.clusters == c)) for i, c in enumerate(train_fed.clusters)])
    every = np.mean([accuracy(i, np.arange(fed.n_clients)) for i in range(len(models))])
    assert rec["test_machines_rule"] == "own cluster" and rec["n_test_machines"] == K * (len(seen["pools"][-1]) // n)
    assert rec["test_accuracy_machines"] == pytest.approx(own, abs=1e-12)
    assert own > every + 0.05  # the local models know their own rotation: the rule matters


def test_a_local_run_with_test_machines_records_the_own_rotation_score():
    """nets run --algo local --test-machines M: the record carries the Local score on the test machines (it was
    None before), beside the score on each client's own test images."""
    p = _machines_params(49)
    rec = run_experiment(dict(dataset=p["dataset"], algo="local", clients=8, n_per_client=10, rounds=1,
                              local_train_steps=20, local_init="separate", test_machines=p["test_machines"],
                              test_machine_size=49, seed=1))
    assert rec["test_accuracy_machines"] is not None and 0.0 <= rec["test_accuracy_machines"] <= 1.0
    assert rec["test_machines_rule"] == "own cluster" and rec["n_test_machines"] == p["test_machines"]
    assert 0.0 <= rec["test_accuracy"] <= 1.0


def test_a_rows_test_machines_are_those_its_runs_were_scored_on():
    """A stored run made before the fix (400 machines of 100 images at n = 50) keeps its own label on the
    [IFCA's test] row; a run recording no machines (an old Local run) shows the point's."""
    point = dict(test_machines=800, test_machine_size=50)
    old = [{"status": "ok", "result": {"n_test_machines": 400, "test_machine_size": 100}}]
    assert ifca_nets._machines_label(point, old) == "[IFCA's test: 400 machines of 100 images]"
    local = [{"status": "ok", "result": {"test_accuracy": 0.64}}, {"status": "missing", "result": None}]
    assert ifca_nets._machines_label(point, local) == "[IFCA's test: 800 machines of 50 images]"
