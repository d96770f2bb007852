"""What one call of a lent GPU brings back (bench/gpu_run.py): the runs made on that device, and nothing else."""

import json
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.gpu_run import _pack  # noqa: E402


def test_the_tarball_holds_this_devices_runs_and_the_checkpoints(tmp_path):
    store, out = tmp_path / "store", tmp_path / "out"
    (store / "cell").mkdir(parents=True)
    (store / ".checkpoints" / "cell").mkdir(parents=True)
    out.mkdir()
    for name, device in (("a.json", "cuda: NVIDIA H100 80GB HBM3"), ("b.json", "cpu: AMD EPYC, 2 cores")):
        (store / "cell" / name).write_text(json.dumps({"campaign": 1, "device": device, "result": {}}))
    (store / "cell" / "c.json").write_text("{torn")  # a run being written: skipped, never fatal
    (store / ".checkpoints" / "cell" / "k.ckpt").write_bytes(b"\0")
    assert _pack(store, out, "cuda") == 2
    with tarfile.open(out / "campaign_runs.tgz") as tar:
        assert sorted(tar.getnames()) == [".checkpoints/cell/k.ckpt", "cell/a.json"]
    assert not (out / "campaign_runs.tgz.part").exists()
