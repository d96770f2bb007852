"""Hostile input at every boundary: malformed federations, diverged fits, tampered stores and checkpoints, full
disks, unlisted data files and requests of unbounded work.

Each case is refused with a ``ValueError``/``TypeError`` naming the field (Python) or one line on stderr and exit
status 2 (command lines), before any work where the input alone shows the problem, and with nothing lost.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from synth import algorithms as A
from synth.backend import GLMBackend
from synth.federation import LogisticMixture, MixedLinearRegression
from tests.test_faults import TINY_SPEC  # the two-point sweep of the fault tests

ROOT = Path(__file__).resolve().parents[1]


def _one_line(code: int, err: str, *fragments: str, status: int = 2) -> None:
    assert code == status, (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in err, (f, err)


@pytest.fixture(scope="module")
def fed():
    return MixedLinearRegression(K=2, clients_per_cluster=3, n=20, d=3).sample(0)


def _every_estimator():
    """One small instance of every estimator that runs on the synthetic backend."""
    return [A.IFCA(n_rounds=2), A.GlobalModel(n_rounds=2), A.LocalModels(local="gd", local_train_steps=2),
            A.OneShotKMeans(n_rounds=2, kmeans_n_init=1), A.LocalKMeans(n_rounds=2, kmeans_n_init=1),
            A.SRFCA(threshold=1.0, n_refine=1, trmean_steps=2), A.OneShotIFCA(threshold=1.0, n_rounds=2),
            A.CLoVE(n_rounds=2, kmeans_n_init=1), A.CFL(n_rounds=2), A.KFED(n_rounds=2, kmeans_n_init=1),
            A.PACFL(n_rounds=2, n_subspace=1), A.FlexCFL(n_rounds=2, alpha=2, pretrain_steps=2),
            A.FeSEM(n_rounds=2, warmup_steps=1), A.FedSoft(n_rounds=2), A.PerFedAvg(n_rounds=2),
            A.FedALA(n_rounds=2)]


# -- item 1: the compiled kernel never reads past the arrays --------------------------------------------------------

def test_sample_count_beyond_the_arrays_is_a_value_error(fed):
    """The reproducer of the segfault (exit 139): a count of 10**7 rows where the arrays hold 20."""
    bad = dataclasses.replace(fed, n_samples=fed.n_samples.copy())
    bad.n_samples[-1] = 10**7
    with pytest.raises(ValueError, match=r"n_samples must be integers in \[1, 20\].*n_samples\[5\] = 10000000"):
        A.IFCA(n_rounds=5, random_state=1).fit(bad.backend())


@pytest.mark.parametrize("kernel", ["auto", "numpy"])
def test_small_overshoot_and_short_responses_are_refused_on_both_paths(fed, kernel):
    over = dataclasses.replace(fed, n_samples=fed.n_samples + 1)
    with pytest.raises(ValueError, match=r"n_samples\[0\] = 21"):
        GLMBackend(over, kernel=kernel)
    short = dataclasses.replace(fed, y=fed.y[:, :10])
    with pytest.raises(ValueError, match=r"y must have shape \(6, 20\)"):
        GLMBackend(short, kernel=kernel)


def test_a_backend_keeps_its_own_checked_counts(fed):
    """Changing the federation's array after the backend was built cannot reach the kernel's row counts."""
    own = dataclasses.replace(fed, n_samples=fed.n_samples.copy())
    be = GLMBackend(own)
    own.n_samples[0] = 10**7
    assert be.n_samples[0] == 20
    with pytest.raises(ValueError, match="read-only"):
        be.n_samples[0] = 10**7
    assert np.isfinite(A.IFCA(n_rounds=2, random_state=0).fit(be).models_).all()


# -- item 2: malformed data never gives a "successful" fit -----------------------------------------------------------

def _malformed(fed):
    X = fed.X.copy()
    X[1, 2, 0] = np.nan
    y = fed.y.copy()
    y[0, 0] = np.inf
    pad = fed.X.copy()
    n = fed.n_samples.copy()
    n[2] = 15
    pad[2, 17, 1] = 1.0  # a non-zero padding row: the numpy path would add its loss, the kernel would not
    return {
        "nan in X": (dict(X=X), "X must be finite; X[1, 2, 0] = nan"),
        "inf in y": (dict(y=y), "y must be finite; y[0, 0] = inf"),
        "negative count": (dict(n_samples=np.array([20, 20, -1, 20, 20, 20])), "n_samples[2] = -1"),
        "d = 0": (dict(X=fed.X[:, :, :0]), "d (features per sample) must be at least 1"),
        "no client": (dict(X=fed.X[:0], y=fed.y[:0], n_samples=fed.n_samples[:0]), "at least 1 client"),
        "non-zero padding": (dict(X=pad, n_samples=n), "beyond n_samples[2] = 15 (padding) must be zero"),
    }


@pytest.mark.parametrize("case", ["nan in X", "inf in y", "negative count", "d = 0", "no client",
                                  "non-zero padding"])
def test_every_estimator_refuses_malformed_data(fed, case):
    change, fragment = _malformed(fed)[case]
    bad = dataclasses.replace(fed, **change)
    for est in _every_estimator():
        with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
            est.fit(GLMBackend(bad))


def test_logistic_labels_outside_zero_one_are_refused():
    fed = LogisticMixture(K=2, clients_per_cluster=2, n=10, d=2).sample(0)
    bad = dataclasses.replace(fed, y=fed.y * 3.0)
    with pytest.raises(ValueError, match=r"logistic family must hold labels in \[0, 1\]"):
        A.IFCA(n_rounds=2).fit(bad.backend())


@pytest.mark.parametrize("make", [
    lambda: A.KFED(step_size=1e300, n_rounds=3, kmeans_n_init=1),
    lambda: A.PACFL(step_size=1e300, n_rounds=3, n_subspace=1),
    lambda: A.OneShotKMeans(n_rounds=3, local="gd", local_step_size=1e300, kmeans_n_init=1),
    lambda: A.LocalKMeans(step_size=1e300, n_rounds=3, kmeans_n_init=1),
    lambda: A.FedSoft(step_size=1e300, n_rounds=3),
    lambda: A.LocalModels(local="gd", local_step_size=1e300, local_train_steps=3),
], ids=["kfed", "pacfl", "oneshot-kmeans", "local-kmeans", "fedsoft", "local"])
def test_a_fit_that_ends_with_non_finite_models_is_a_divergence(fed, make):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")  # the overflow on the way there
        with pytest.raises(A.DivergenceError, match=r"(non-finite models|diverged).*; lower (step_size|local_step)"):
            make().fit(fed.backend())


def test_torch_backend_refuses_non_finite_inputs():
    torch = pytest.importorskip("torch")
    from nets.backend import TorchBackend
    from nets.functional import FunctionalModel
    from nets.models import model_factory

    model = FunctionalModel(model_factory("mlp", (4,), 3, None), "ce", device="cpu", dtype=torch.float32)
    X = torch.zeros((3, 5, 4))
    X[1, 2, 3] = float("nan")
    be = TorchBackend(model, X, torch.zeros((3, 5), dtype=torch.long))
    with pytest.raises(ValueError, match="X must be finite; 1 input entries"):
        A.GlobalModel(n_rounds=1, init="default").fit(be)
    with pytest.raises(ValueError, match=r"n_samples must be integers in \[1, 5\]"):
        TorchBackend(model, torch.zeros((3, 5, 4)), torch.zeros((3, 5), dtype=torch.long), [5, 6, 5])


# -- item 3: a diverged nets run exits 2, whatever the algorithm -----------------------------------------------------

@pytest.mark.parametrize("algo", ["kfed", "local", "cfl", "fesem", "fedsoft"])
def test_nets_divergence_is_exit_2_for_every_algorithm(algo, capsys):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    code = nets_main(["run", "--dataset", "digits-rotated", "--algo", algo, "--clients", "4", "--n-per-client",
                      "10", "--n-test", "5", "--rounds", "2", "--local-steps", "2", "--step-size", "1e30",
                      "--device", "cpu", "--json"])
    out, err = capsys.readouterr()
    _one_line(code, err, "diverged", "--step-size")
    assert out == ""


# -- item 15: loose values ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", [True, [0.1, True], np.bool_(True), "0.1"])
def test_step_size_must_be_a_number_not_a_bool(fed, value):
    with pytest.raises(TypeError, match="step_size must be a positive number"):
        A.IFCA(step_size=value, n_rounds=1).fit(fed.backend())


# -- items 8 and 9: stores are regular files, verified on read --------------------------------------------------------




def _lines(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "trials.jsonl").read_text().splitlines()]


def _write_lines(out: Path, records: list[dict]) -> None:
    (out / "trials.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in records))


def _edit_record(line: int, change):
    def edit(out: Path) -> None:
        recs = _lines(out)
        change(recs[line - 1])
        _write_lines(out, recs)
    return edit


def _duplicate(out: Path) -> None:
    recs = _lines(out)
    twin = json.loads(json.dumps(recs[0]))
    twin["result"]["param_error"] = 0.0
    _write_lines(out, recs + [twin])


def _foreign_params(out: Path) -> None:
    recs = _lines(out)
    other = next(r for r in recs if r["point"] != recs[0]["point"])
    recs[0]["params"] = other["params"]
    _write_lines(out, recs)


def _edit_meta(change, keep_digest: bool = True):
    def edit(out: Path) -> None:
        meta = json.loads((out / "meta.json").read_text())
        if not keep_digest:
            meta.pop("digest")
        change(meta)
        (out / "meta.json").write_text(json.dumps(meta))
    return edit


def _relabel_sigma(meta: dict) -> None:
    for pts in (meta["points"], meta["spec"]["points"]):
        pts[0]["sigma"] = 5.0


def _always_success(meta: dict) -> None:
    meta["spec"]["success"]["max"] = "100"


@pytest.mark.parametrize("edit, fragments", [
    (_duplicate, ["trials.jsonl, line 5", "second, different record of point 0, trial 0"]),
    (_edit_record(2, lambda r: r.update(point=7)), ["line 2", "point 7 is out of range"]),
    (_edit_record(2, lambda r: r.update(trial=9)), ["line 2", "trial 9 is out of range"]),
    (_edit_record(3, lambda r: r.update(seed=r["seed"] + 1)), ["line 3", "is not the seed of point"]),
    (_foreign_params, ["line 1", "params differ from point 0", "sigma"]),
    (_edit_record(1, lambda r: r.update(result={})), ["line 1", "empty result"]),
    (_edit_record(4, lambda r: r["result"].update(param_error="small")), ["line 4", "'param_error' must be a number"]),
    (_edit_meta(_relabel_sigma), ["meta.json", "changed after the store wrote it"]),
    (_edit_meta(_always_success), ["meta.json", "changed after the store wrote it"]),
    (lambda out: (out / "spec.toml").write_text(TINY_SPEC.replace("0.6 * sigma", "100")),
     ["spec.toml", "changed or removed after the store wrote it"]),
    (_edit_meta(_relabel_sigma, keep_digest=False), ["meta.json", "do not match its fingerprint"]),
    (_edit_meta(_always_success, keep_digest=False), ["meta.json", "success criterion differs", "spec.toml"]),
], ids=["conflicting-duplicate", "point-out-of-range", "trial-out-of-range", "edited-seed", "foreign-params",
        "empty-result", "string-metric", "meta-sigma", "meta-success", "spec-toml", "legacy-sigma", "legacy-success"])
def test_tampered_store_is_refused_naming_file_and_line(store, edit, fragments, capsys):
    from synth.cli import main as synth_main

    spec, out = store
    edit(out)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    _one_line(synth_main(["report", str(out)]), capsys.readouterr().err, *fragments)
    _one_line(synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"]), capsys.readouterr().err,
              *fragments)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and p.name != ".lock"} == before


def test_a_store_written_before_digests_is_refused_until_sealed_then_resumed(store, capsys):
    """A store without digests is refused (one line naming the seal command); once sealed it is read and resumed."""
    from synth.cli import main as synth_main

    spec, out = store
    _edit_meta(lambda meta: None, keep_digest=False)(out)
    assert synth_main(["report", str(out)]) == 2
    assert f"python -m synth seal {out}" in capsys.readouterr().err
    assert synth_main(["seal", str(out)]) == 0
    assert synth_main(["report", str(out)]) == 0
    assert synth_main(["sweep", str(spec), "--out", str(out), "--quiet", "--resume"]) == 0
    assert "digest" in json.loads((out / "meta.json").read_text())  # resumed: now written with one
    capsys.readouterr()


@pytest.mark.parametrize("store_dir", sorted(str(p.parent.relative_to(ROOT))
                                             for p in (ROOT / "figures" / "measured").glob("*/store/meta.json")))
def test_committed_stores_pass_verification(store_dir):
    from synth.store import read_meta, read_records

    assert read_meta(ROOT / store_dir) is not None
    assert read_records(ROOT / store_dir)


@pytest.mark.parametrize("command", ["report", "resume"])
def test_a_fifo_in_place_of_the_records_is_refused_not_waited_on(store, command):
    import subprocess
    import sys

    spec, out = store
    (out / "trials.jsonl").unlink()
    os.mkfifo(out / "trials.jsonl")
    argv = ["report", str(out)] if command == "report" else ["sweep", str(spec), "--out", str(out), "--resume"]
    proc = subprocess.run([sys.executable, "-m", "synth", *argv], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "CFLAB_QUIET": "1"})
    _one_line(proc.returncode, proc.stderr, "trials.jsonl", "FIFO")


# -- item 4: --algo-param goes through the checks of the named flags ----------------------------------------------

NETS_TINY = ["--dataset", "digits-rotated", "--clients", "4", "--n-per-client", "10", "--n-test", "5",
             "--local-steps", "1", "--device", "cpu"]


def _nets(argv: list[str], capsys) -> tuple[int, str, str]:
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    code = nets_main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("pair, flag", [("n_rounds=1", "--rounds"), ("step_size=3.0", "--step-size"),
                                        ("random_state=4", "--seed"), ("monitor=none", "set by python -m nets")])
def test_algo_param_may_not_set_what_a_named_flag_sets(pair, flag, capsys):
    code, out, err = _nets(["run", *NETS_TINY, "--rounds", "2", "--algo-param", pair], capsys)
    _one_line(code, err, "--algo-param", flag)


def test_algo_param_values_are_checked_before_the_data_load(capsys):
    code, _, err = _nets(["run", *NETS_TINY, "--algo", "fedsoft", "--rounds", "1", "--algo-param", "prox=-1"], capsys)
    _one_line(code, err, "--algo-param", "prox must be in [0, inf)")
    code, _, err = _nets(["run", *NETS_TINY, "--algo", "fedsoft", "--algo-param", "prox=1", "--algo-param", "prox=2"],
                         capsys)
    _one_line(code, err, "--algo-param prox=... is given twice")


def test_algo_params_are_recorded_and_checked_on_resume(tmp_path, capsys):
    ckpt = tmp_path / "run.pt"
    base = ["run", *NETS_TINY, "--checkpoint", str(ckpt), "--json"]
    code, out, err = _nets([*base, "--rounds", "1", "--algo-param", "divergence_factor=1e6"], capsys)
    assert code == 0, err
    assert json.loads(out)["algo_params"] == {"divergence_factor": 1e6}
    code, out, err = _nets([*base, "--rounds", "2", "--algo-param", "divergence_factor=1e9"], capsys)
    _one_line(code, err, str(ckpt), "algo_params")
    code, out, err = _nets([*base, "--rounds", "2", "--algo-param", "divergence_factor=1e6"], capsys)
    assert code == 0 and json.loads(out)["resumed_from_round"] == 1, err


# -- item 11: tampered checkpoints ---------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def _checkpoint(tmp_path_factory):
    pytest.importorskip("torch")
    from nets.cli import main as nets_main

    ckpt = tmp_path_factory.mktemp("ckpt") / "run.pt"
    assert nets_main(["run", *NETS_TINY, "--rounds", "1", "--checkpoint", str(ckpt), "--json"]) == 0
    return ckpt


def _tamper(blob: dict, field: str) -> None:
    import torch

    if field == "round":
        blob["round"] = -5
    elif field == "models":
        blob["models"] = torch.full_like(blob["models"], float("nan"))
    elif field == "shape":
        blob["models"] = blob["models"][:, :, :7]
    elif field == "config":
        blob["config"] = json.dumps([1, 2, 3])
    elif field == "rng_state":
        blob["rng_state"] = json.dumps({"bit_generator": "PCG64", "state": "no"})
    elif field == "history":
        blob["history"] = json.dumps({"rows": [{"round": 50, "run": 0}], "seconds": 1.0})


@pytest.mark.parametrize("field, fragment", [
    ("round", "round must be an integer >= 0, got -5"), ("models", "non-finite values"),
    ("shape", "holds models of shape"), ("config", "config must be an object"),
    ("rng_state", "random-generator state"), ("history", "history rows outside rounds"),
])
def test_tampered_checkpoint_is_refused_naming_it(_checkpoint, tmp_path, field, fragment, capsys):
    import torch

    ckpt = tmp_path / "run.pt"
    blob = torch.load(_checkpoint, weights_only=True)
    _tamper(blob, field)
    torch.save(blob, ckpt)
    code, out, err = _nets(["run", *NETS_TINY, "--rounds", "3", "--checkpoint", str(ckpt), "--json"], capsys)
    _one_line(code, err, str(ckpt), fragment)
    assert out == ""


# -- item 12: a full disk names the file ---------------------------------------------------------------------------

def test_full_disk_while_saving_a_checkpoint_names_it(tmp_path, monkeypatch, capsys):
    from nets import checkpoint

    real_fdopen = os.fdopen

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        def __getattr__(self, name):
            return getattr(self.fh, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def fdopen(fd, mode="r", *args, **kwargs):
        fh = real_fdopen(fd, mode, *args, **kwargs)
        return Full(fh) if "w" in mode else fh

    monkeypatch.setattr(checkpoint.os, "fdopen", fdopen)
    ckpt = tmp_path / "run.pt"
    code, out, err = _nets(["run", *NETS_TINY, "--rounds", "2", "--checkpoint", str(ckpt)], capsys)
    _one_line(code, err, "disk full while writing", str(ckpt))
    assert not ckpt.exists() and not [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]


def test_full_disk_in_an_atomic_write_names_the_file(tmp_path, monkeypatch):
    from synth import store

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store.os, "fsync", full)
    with pytest.raises(OSError) as err:
        store.write_text_atomic(tmp_path / "report.md", "text")
    assert err.value.filename == str(tmp_path / "report.md")
    from synth.errors import describe_os_error

    assert str(tmp_path / "report.md") in describe_os_error(err.value)


# -- item 13: the atlas cache after a full disk -------------------------------------------------------------------

def test_atlas_cache_keeps_no_torn_line_after_a_full_disk(tmp_path, monkeypatch):
    from theory import atlas

    out = tmp_path / "atlas"
    real_write = os.write
    calls = {"n": 0}

    def full_on_second_cell(fd, data):
        calls["n"] += 1
        if calls["n"] == 2:
            real_write(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(atlas.os, "write", full_on_second_cell)
    with pytest.raises(OSError) as err:
        atlas.run_atlas(out, size="quick", only=["ifca-lemma1"])
    monkeypatch.undo()
    cache = out / "cells-quick.jsonl"
    assert err.value.filename == str(cache)
    assert cache.read_bytes().endswith(b"\n") and len(cache.read_text().splitlines()) == 1
    # an older writer's torn line (no newline) is cut, not glued to the next cell
    with open(cache, "ab") as fh:
        fh.write(b'{"key": "torn", "ce')
    res = atlas.run_atlas(out, size="quick", only=["ifca-lemma1"])
    lines = cache.read_text().splitlines()
    keys = [json.loads(x)["key"] for x in lines]  # every line whole, one per cell
    assert len(keys) == len(set(keys)) == len(res["cells"]) and "torn" not in keys


# -- item 15: empty paths ------------------------------------------------------------------------------------------

def test_empty_paths_are_refused(capsys):
    from theory.cli import main as theory_main

    _one_line(theory_main(["atlas", "--out", "", "--quick"]), capsys.readouterr().err, "--out must name a folder")
    code, _, err = _nets(["run", *NETS_TINY, "--data-dir", ""], capsys)
    _one_line(code, err, "data_dir must name a folder")


# -- items 5 and 10: LEAF folders hold only listed files, and a corrupt one is named ---------------------------------

def _leaf_user(rng, n: int = 3) -> dict:
    return {"x": rng.random((n, 784)).round(3).tolist(), "y": rng.integers(0, 62, n).tolist()}


def _leaf_folder(tmp_path: Path, train: dict[str, bytes], test: dict[str, bytes], listed=None) -> Path:
    """A LEAF FEMNIST folder with these files; MD5SUMS lists ``listed`` (default: every file)."""
    from nets.data.files import md5_of

    folder = tmp_path / "leaf-femnist"
    for split, files in (("train", train), ("test", test)):
        (folder / split).mkdir(parents=True)
        for name, data in files.items():
            (folder / split / name).write_bytes(data)
        names = [n for n in files if listed is None or n in listed]
        (folder / split / "MD5SUMS").write_text("".join(f"{md5_of(folder / split / n)}  {n}\n" for n in names))
    return tmp_path


def _blob(users: dict) -> bytes:
    return json.dumps({"users": list(users), "num_samples": [len(u["y"]) for u in users.values()],
                       "user_data": users}).encode()


def test_an_unlisted_file_in_a_leaf_split_is_left_out_with_one_warning(tmp_path):
    pytest.importorskip("torch")
    from nets.data.files import DataError
    from nets.data.leaf import UnlistedFilesWarning, load_leaf

    rng = np.random.default_rng(0)
    test_file = _blob({"u1": _leaf_user(rng), "spy": _leaf_user(rng)})
    root = _leaf_folder(tmp_path, {"a.json": _blob({"u1": _leaf_user(rng)}), "copied_test.json": test_file},
                        {"a.json": test_file}, listed={"a.json"})
    with pytest.warns(UnlistedFilesWarning, match="left out 1 file.*copied_test.json") as seen:
        data = load_leaf("femnist", root)
    assert len(seen) == 1 and "spy" not in data.train and data.users == ["u1"]
    only_unlisted = _leaf_folder(tmp_path / "b", {"x.json": test_file}, {"x.json": test_file}, listed=set())
    with pytest.raises(DataError, match="no known checksum.*only checksum-verified files are used"):
        load_leaf("femnist", only_unlisted)


@pytest.mark.parametrize("content, fragment", [
    (b"\x1f\x8b\x08\x00truncated", "is not a readable LEAF JSON file"),
    (b'{"num_samples": [1]}', "lacks the 'users' list"),
    (json.dumps({"users": ["u1"], "user_data": {"u1": {"x": [[0.5] * 700], "y": [3]}}}).encode(),
     "user 'u1': x must hold rows of 784"),
    (json.dumps({"users": ["u1"], "user_data": {"u1": {"x": [[0.5] * 784], "y": [99]}}}).encode(),
     "user 'u1': y must hold class labels"),
], ids=["truncated-gzip", "no-users", "short-rows", "bad-label"])
def test_a_corrupt_leaf_file_is_named(tmp_path, content, fragment):
    pytest.importorskip("torch")
    from nets.data.files import DataError
    from nets.data.leaf import load_leaf

    rng = np.random.default_rng(1)
    name = "bad.json.gz" if content.startswith(b"\x1f\x8b") else "bad.json"
    root = _leaf_folder(tmp_path, {name: content}, {"a.json": _blob({"u1": _leaf_user(rng)})})
    with pytest.raises(DataError, match=fragment) as err:
        load_leaf("femnist", root)
    assert name in str(err.value)


# -- items 6 and 7: memory and time refused up front, estimates checked against measured runs ------------------------

ALGO_SETTINGS = {"ifca": {}, "global": {}, "local": {"local": "gd", "local_train_steps": 50}, "oneshot-kmeans": {},
                 "local-kmeans": {}, "srfca": {"threshold": 1.0}, "oneshot-ifca": {"threshold": 1.0}, "clove": {},
                 "cfl": {}, "kfed": {}, "pacfl": {}, "flexcfl": {}, "fesem": {}, "fedsoft": {}, "perfedavg": {},
                 "fedala": {}}


@pytest.fixture(scope="module")
def _one_thread():
    """Measurements on one thread (as every Monte Carlo trial runs) in CPU time, so that other processes sharing
    the cores do not count; the libraries a fit imports are loaded first, so that the limit covers their pools."""
    import scipy.cluster.hierarchy  # noqa: F401
    import sklearn.cluster  # noqa: F401
    import sklearn.metrics  # noqa: F401
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        yield


@pytest.mark.parametrize("algo", sorted(ALGO_SETTINGS))
def test_synth_time_estimate_is_within_10x_of_a_measured_run(algo, _one_thread):
    import time

    from synth.cost import experiment_cost
    from synth.experiment import fit_experiment, validate_params

    p = {"K": 2, "clients_per_cluster": 50, "n": 200, "d": 100, "rounds": 6, "algo": algo, "seed": 1,
         **ALGO_SETTINGS[algo]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fit_experiment({**p, "K": 2, "clients_per_cluster": 3, "n": 10, "d": 3, "rounds": 1})  # imports, kernel
        start = time.process_time()
        fit_experiment(p)
        measured = time.process_time() - start
    estimate = experiment_cost(validate_params(p))["seconds"]
    assert 0.1 <= measured / estimate <= 10, (algo, measured, estimate)


NETS_ALGOS = ["ifca", "global", "local", "oneshot-kmeans", "local-kmeans", "srfca", "oneshot-ifca", "clove", "cfl",
              "kfed", "pacfl", "flexcfl", "fesem", "fedsoft", "perfedavg", "fedala", "fedproto", "fedpac"]


@pytest.mark.parametrize("algo", NETS_ALGOS)
def test_nets_time_estimate_is_within_10x_of_a_measured_run(algo, monkeypatch, _one_thread):
    torch = pytest.importorskip("torch")
    import time

    import nets.experiment as E

    seen = {}

    def estimate(p, algo_params, fed, model, train, k, runs, start):
        cost = E.work_cost({**p, "rounds": p["rounds"] - start}, algo_params, fed, model, k, runs,
                           E.per_sample_seconds(model, train))
        seen["estimate"] = cost["seconds"]

    monkeypatch.setattr(E, "_check_work", estimate)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        p = {"dataset": "digits-rotated", "algo": algo, "clients": 8, "n_per_client": 40, "n_test": 10, "rounds": 4,
             "local_steps": 3, "device": "cpu", "seed": 0}
        if algo in ("srfca", "oneshot-ifca"):
            p.update(threshold=1.0, trmean_steps=5)
        E.run_experiment({**p, "rounds": 1})
        start = time.process_time()
        E.run_experiment(p)
        measured = time.process_time() - start
    finally:
        torch.set_num_threads(threads)
    assert 0.1 <= measured / seen["estimate"] <= 10, (algo, measured, seen["estimate"])


@pytest.mark.parametrize("argv", [
    ["--algo", "cfl", "--local-steps", "1000000000"],
    ["--rounds", "500000000", "--K", "1", "--clients-per-cluster", "1", "--d", "2", "--n", "5"],
    ["--algo", "srfca", "--threshold", "1", "--trmean-steps", "1000000000"],
    ["--algo", "srfca", "--threshold", "1", "--n-refine", "1000000000"],
    ["--algo", "clove", "--kmeans-n-init", "1000000000"],
    ["--algo", "flexcfl", "--flexcfl-pretrain", "1000000000"],
    ["--algo", "fesem", "--fesem-warmup", "1000000000"],
    ["--algo", "local", "--local", "gd", "--local-train-steps", "1000000000"],
], ids=["local-steps", "rounds", "trmean-steps", "n-refine", "kmeans-n-init", "flexcfl-pretrain", "fesem-warmup",
        "local-train-steps"])
def test_unbounded_work_is_refused_with_its_estimate(argv, capsys):
    from synth.cli import main as synth_main

    err = capsys.readouterr().err if synth_main(["run", *argv]) == 2 else "not refused"
    _one_line(2, err, "roughly", "of computing")  # the time estimate, with the memory's where that is exceeded too
    assert "above the 12 h ceiling" in err and "--max-hours" in err or "of memory" in err, err


def test_the_time_ceiling_is_the_flags(tmp_path, capsys):
    from synth.cli import main as synth_main

    small = ["run", "--K", "2", "--clients-per-cluster", "3", "--n", "10", "--d", "3", "--rounds", "2"]
    _one_line(synth_main([*small, "--max-hours", "1e-9"]), capsys.readouterr().err, "above the", "ceiling")
    assert synth_main(small) == 0
    (tmp_path / "tiny.toml").write_text(TINY_SPEC)
    code = synth_main(["sweep", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "s"), "--max-hours", "1e-9"])
    _one_line(code, capsys.readouterr().err, "sweep 'tiny'", "above the")
    assert not (tmp_path / "s").exists()


def test_memory_of_pairwise_matrices_and_worker_processes_is_refused_up_front(tmp_path, capsys):
    from synth.cli import main as synth_main
    from theory.cli import main as theory_main

    _one_line(synth_main(["run", "--algo", "pacfl", "--clients-per-cluster", "50000", "--n", "5", "--d", "3"]),
              capsys.readouterr().err, "pacfl, 100000 clients", "TiB of memory")
    _one_line(theory_main(["check", "srfca-lemma4.6", "--clients-per-cluster", "100000"]), capsys.readouterr().err,
              "srfca-lemma4.6", "GiB of memory")
    (tmp_path / "tiny.toml").write_text(TINY_SPEC)
    code = synth_main(["sweep", str(tmp_path / "tiny.toml"), "--out", str(tmp_path / "s"), "--n-jobs", "500"])
    _one_line(code, capsys.readouterr().err, "500 worker processes of about 180 MiB")


def test_nets_requests_beyond_memory_or_time_are_refused_before_training(monkeypatch, capsys):
    pytest.importorskip("torch")
    import nets.experiment as E

    def no_fit(*args, **kwargs):
        raise AssertionError("training started")

    code, _, err = _nets(["run", *NETS_TINY, "--rounds", "1000000000"], capsys)
    _one_line(code, err, "nets run --algo ifca", "roughly", "of computing")
    code, _, err = _nets(["run", *NETS_TINY, "--algo", "fesem", "--rounds", "1", "--algo-param",
                          "warmup_steps=1000000000"], capsys)
    _one_line(code, err, "nets run --algo fesem", "is estimated at roughly", "--max-hours")
    code, _, err = _nets(["run", *NETS_TINY, "--batch-size", "100000"], capsys)
    _one_line(code, err, "batch_size must be at most the 10 training samples per client")
    code, _, err = _nets(["run", *NETS_TINY[:2], "--clients", "100000000", "--device", "cpu"], capsys)
    _one_line(code, err, "federation (100000000 clients", "of memory")
    monkeypatch.setenv("CFLAB_MEMORY_LIMIT_MB", "200")
    monkeypatch.setattr(E, "_hyper", no_fit)  # the estimate must come before the estimator is even built
    code, _, err = _nets(["run", *NETS_TINY, "--algo", "local", "--rounds", "1"], capsys)
    _one_line(code, err, "nets run --algo local", "of memory")


def test_theory_trials_beyond_the_ceiling_are_refused(capsys):
    from theory.cli import main as theory_main

    _one_line(theory_main(["check", "srfca-lemma4.6", "--trials", "1000000", "--max-hours", "1"]),
              capsys.readouterr().err, "srfca-lemma4.6 with --trials 1000000", "above the 1 h ceiling", "--max-hours")


def test_a_backend_that_is_not_installed_is_refused_even_in_process(monkeypatch):
    import sys

    from synth.montecarlo import run_trials

    monkeypatch.setitem(sys.modules, "ray.util.joblib", None)
    from joblib.parallel import BACKENDS

    monkeypatch.delitem(BACKENDS, "ray", raising=False)
    with pytest.raises(ValueError, match="backend 'ray' needs Ray"):
        run_trials(lambda params, seed: {"x": 1.0}, [{}], 1, n_jobs=1, backend="ray")


def test_estimator_errors_and_divergence_name_the_run_flags(capsys):
    from synth.cli import main as synth_main

    small = ["run", "--K", "2", "--clients-per-cluster", "3", "--n", "20", "--d", "3", "--rounds", "3"]
    _one_line(synth_main([*small, "--algo", "pacfl", "--pacfl-p", "1000"]), capsys.readouterr().err,
              "--pacfl-p (n_subspace) must be an integer in")
    _one_line(synth_main([*small, "--algo", "kfed", "--kfed-local-clusters", "1000"]), capsys.readouterr().err,
              "--kfed-local-clusters (local_clusters) must be")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        code = synth_main([*small, "--family", "logistic", "--reg", "1e300"])
    err = capsys.readouterr().err
    _one_line(code, err, "diverged", "with --reg 1e+300", "lower --reg")
    _one_line(synth_main(["run", "--K", "2", "--clients-per-cluster", "3", "--n", "2", "--d", "5", "--algo", "local"]),
              capsys.readouterr().err, "--local gd")


def test_a_repeated_cfl_key_is_refused():
    from figures.targets.netcommon import parse_cfl

    with pytest.raises(ValueError, match="cfl: eps1 is given twice"):
        parse_cfl("eps1=1,eps1=2")
    assert parse_cfl("eps1=1,eps2=2") == {"eps1": 1.0, "eps2": 2.0}
