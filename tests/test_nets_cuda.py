"""The torch backend on a CUDA GPU computes what it computes on the CPU (skipped where torch sees no GPU).

Run on a lent GPU by ``bench/gpu_run.py`` with ``CUBLAS_WORKSPACE_CONFIG=:4096:8``; TF32 is off in these tests (the
toolkit's float32 is float32 end to end on either device).
"""

import pytest
import torch

from nets.experiment import run_experiment

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no CUDA GPU")

BASE = dict(dataset="digits-rotated", clients=12, n_per_client=20, n_test=10, rounds=4, local_steps=3, batch_size=7,
            n_init=2, seed=5)


@pytest.fixture(autouse=True)
def _float32_without_tf32():
    old = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


def _params(algo: str, **kw) -> dict:
    p = dict(BASE, algo=algo, **kw)
    if algo not in ("ifca", "clove"):
        p.pop("n_init")
    if algo in ("srfca", "oneshot-ifca"):
        p["threshold"] = 5.0  # untrained models after 4 rounds: a loose threshold keeps clusters
    return p


@pytest.mark.parametrize("algo", ["ifca", "clove", "srfca", "global", "local", "cfl", "local-kmeans", "oneshot-kmeans",
                                  "oneshot-ifca"])
def test_cuda_equals_cpu_in_float64(algo):
    cpu = run_experiment(_params(algo, dtype="float64", device="cpu"))
    gpu = run_experiment(_params(algo, dtype="float64", device="cuda"))
    assert gpu["device"].startswith("cuda")
    assert (gpu["ari"], gpu["n_clusters"], gpu["test_accuracy"]) == (cpu["ari"], cpu["n_clusters"],
                                                                       cpu["test_accuracy"])
    assert gpu["test_loss"] == pytest.approx(cpu["test_loss"], rel=1e-9)


@pytest.mark.parametrize("algo", ["ifca", "srfca", "cfl", "global"])
def test_cuda_equals_cpu_within_float32_rounding(algo):
    cpu = run_experiment(_params(algo, device="cpu"))
    gpu = run_experiment(_params(algo, device="cuda"))
    assert (gpu["ari"], gpu["n_clusters"]) == (cpu["ari"], cpu["n_clusters"])
    assert gpu["test_loss"] == pytest.approx(cpu["test_loss"], rel=1e-4)
    assert abs(gpu["test_accuracy"] - cpu["test_accuracy"]) <= 1 / (BASE["clients"] * BASE["n_test"])


@pytest.mark.parametrize("algo", ["ifca", "clove"])
def test_cuda_batched_equals_looped(algo):
    params = _params(algo, dtype="float64", device="cuda")
    a = run_experiment(params, batched=True)
    b = run_experiment(params, batched=False)
    assert (a["ari"], a["n_clusters"], a["test_accuracy"]) == (b["ari"], b["n_clusters"], b["test_accuracy"])
    assert a["test_loss"] == pytest.approx(b["test_loss"], rel=1e-9)


@pytest.mark.parametrize("algo", ["ifca", "srfca"])
def test_two_cuda_runs_are_identical(algo):
    a = run_experiment(_params(algo, device="cuda"), history=True)
    b = run_experiment(_params(algo, device="cuda"), history=True)
    assert a["history"] == b["history"]
    assert (a["test_loss"], a["test_accuracy"], a["ari"]) == (b["test_loss"], b["test_accuracy"], b["ari"])
