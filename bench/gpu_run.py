#!/usr/bin/env python
"""One call of a lent GPU: CUDA correctness first, then the paper-scale campaign's GPU queue, every result packed into
``--out`` as soon as it exists (a call stopped at its time limit still returns what finished).

    python bench/gpu_run.py --out DIR --data-dir DATA [--cells C1,C2,...] [--minutes M] [--device cuda|cpu] [--smoke]

A wrong argument -- a name of ``--cells`` that is part of no campaign cell's name (the manifest's column ``cell``),
``--device cuda`` where torch sees no GPU, an ``--out`` that cannot be a folder -- is one line on stderr and exit
status 2, before any work.

``DATA`` is a copy of the data directory inside the checkout (the device machine gets the checkout alone): say
``.gpudata/`` with ``mnist/`` and ``fashion-mnist/``, ignored by ``.git/info/exclude`` and carried with the call.

Steps, in order:

1. ``gpu_env.json``: the device, torch and CUDA versions, the determinism settings below.
2. ``cuda_tests.log``: ``pytest tests/test_nets_cuda.py`` (CUDA = CPU in float64 and within float32 rounding;
   batched = looped on CUDA; two CUDA runs identical), cut at 150 s.
3. ``campaign.log`` and ``campaign_runs.tgz``: ``figures.campaign.planner.run_campaign(device=...)`` over the cells
   named by ``--cells`` (in that order, minimal seeds; runs already stored are skipped), starting no run after
   ``--minutes``. After each finished run the tarball is rewritten (atomically) with every run JSON made on this device
   and the IFCA/global checkpoints, relative to ``figures/measured``; unpack it there.

Determinism: ``CUBLAS_WORKSPACE_CONFIG=:4096:8``, ``torch.use_deterministic_algorithms(True, warn_only=True)``,
TF32 off for matrix products and cuDNN (float32 end to end, as on the CPU).

``--smoke`` is the CPU dry run of the same path: ``--device cpu``, every run cut to 1 round, into a scratch copy of
the store, so that the script cannot fail on the GPU for a trivial reason.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# The cells whose protocol was corrected first (their stored runs are stale, figures/published/protocols: IFCA
# Table I's test machines and Local baseline, 3 seeds each; SR-FCA's λ tuned on a validation split), then CLoVE's
# image cells by published numbers per CPU-hour (figures/measured/campaign.csv), about 27-38 CPU-hours each here
DEFAULT_CELLS = ("ifca-table1:mnist-rotated:2400", "ifca-table1:mnist-rotated:1200", "ifca-table1:mnist-rotated:4800",
                 "srfca-simulated:mnist-inverted", "srfca-simulated:mnist-rotated",
                 "clove-label-skew-1:mnist", "clove-feature-skew:mnist", "clove-label-skew-2:mnist",
                 "clove-label-skew-1:fmnist", "clove-concept-shift:mnist", "clove-feature-skew:fmnist",
                 "clove-label-skew-2:fmnist", "clove-concept-shift:fmnist", "clove-label-skew-3", "clove-label-skew-4")


def _settings() -> dict:
    import torch

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = False
    return {"CUBLAS_WORKSPACE_CONFIG": os.environ["CUBLAS_WORKSPACE_CONFIG"],
            "use_deterministic_algorithms": "True (warn_only)", "allow_tf32": False, "cudnn.benchmark": False}


def _env(device: str, settings: dict) -> dict:
    import torch

    from figures.campaign.provenance import commit, device_name

    env = {"device": device_name(device), "torch": torch.__version__, "cuda": torch.version.cuda,
           "python": sys.version.split()[0], "commit": commit(), "settings": settings,
           "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    if device == "cuda":
        p = torch.cuda.get_device_properties(0)
        env.update(gpu_memory_gib=p.total_memory / 2**30, multiprocessors=p.multi_processor_count)
    return env


def _pack(store: Path, out: Path, device_prefix: str) -> int:
    """Rewrite ``out/campaign_runs.tgz`` with the run JSONs of ``store`` made on this device and the checkpoints."""
    files = []
    for path in sorted(store.glob("*/*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("campaign") and str(data.get("device", "")).startswith(device_prefix):
            files.append(path)
    files += sorted(p for p in (store / ".checkpoints").rglob("*") if p.is_file())
    tmp = out / "campaign_runs.tgz.part"
    with tarfile.open(tmp, "w:gz") as tar:
        for path in files:
            tar.add(path, arcname=str(path.relative_to(store)))
    tmp.replace(out / "campaign_runs.tgz")
    return len(files)


def main(argv: list[str] | None = None) -> int:
    """Exit status 0 when the call ran (its runs' failures are in ``campaign.log``), 2 on a wrong argument or an
    unusable ``--out`` (one line on stderr, before any work), 130 on Ctrl-C."""
    from synth.errors import run_main

    return run_main("gpu_run.py", _main, argv)


def _parser():
    from synth.cli import CleanParser

    ap = CleanParser(prog="gpu_run.py", description=__doc__.splitlines()[0], allow_abbrev=False)
    ap.add_argument("--out", required=True, help="folder for the results (the device tool's $OUT)")
    ap.add_argument("--data-dir", required=True, help="the data directory (mnist/ ...)")
    ap.add_argument("--cells", default=",".join(DEFAULT_CELLS), help="campaign cells, in the order to run them")
    ap.add_argument("--minutes", type=float, default=8.0, help="start no campaign run after this many minutes")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--smoke", action="store_true", help="CPU dry run: every run cut to 1 round, scratch store")
    ap.add_argument("--skip-tests", action="store_true")
    return ap


def _checked_args(argv: list[str]):
    """The arguments, every one checked before any work: the cells by the manifest's names (no cell matching a
    name would run nothing, silently), the minutes, the data folder, the device."""
    import math

    from figures.campaign import planner as campaign

    args = _parser().parse_args(argv)
    only = [c.strip() for c in args.cells.split(",") if c.strip()]
    if not only:
        raise ValueError("--cells needs at least one part of a campaign cell's name")
    campaign.check_cells(only, campaign.known_cells(), "--cells")
    if not (math.isfinite(args.minutes) and args.minutes > 0):
        raise ValueError(f"--minutes must be a number of minutes in (0, inf), got {args.minutes}")
    if not args.out.strip():
        raise ValueError("--out must name a folder, got an empty string")
    if not Path(args.data_dir).is_dir():
        raise ValueError(f"--data-dir {args.data_dir!r} is not a folder (the data directory: mnist/ ...)")
    if args.device == "cuda" and not args.smoke:
        import torch

        if not torch.cuda.is_available():
            raise ValueError("--device cuda: torch sees no CUDA GPU here; run on a GPU, or --smoke (or --device cpu) "
                             "for the CPU dry run")
    return args, only


def _main(argv: list[str]) -> int:
    t0 = time.time()
    args, only = _checked_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = "cpu" if args.smoke else args.device
    settings = _settings()
    env = _env(device, settings)
    (out / "gpu_env.json").write_text(json.dumps(env, indent=1))
    print(json.dumps(env), flush=True)

    if not args.skip_tests:
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(ROOT / "tests/test_nets_cuda.py"),
               "-rs"]
        try:
            res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=150)
            log = res.stdout + res.stderr + f"\nexit status {res.returncode}\n"
        except subprocess.TimeoutExpired as exc:
            log = f"{exc.stdout or ''}{exc.stderr or ''}\ncut at 150 s\n"
        (out / "cuda_tests.log").write_text(log)
        print(log[-3000:], flush=True)

    from figures.campaign import planner as campaign

    store = campaign.HERE
    if args.smoke:
        import shutil
        import tempfile

        store = Path(tempfile.mkdtemp(prefix="gpu_smoke_"))
        shutil.copytree(campaign.HERE, store, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".checkpoints"))
        real_queue = campaign.gpu_queue

        def one_round(*a, **k):
            return [dataclasses.replace(r, point={**r.point, "rounds": 1}) for r in real_queue(*a, **k)][:2]

        campaign.gpu_queue = one_round
    prefix = "cpu" if device == "cpu" else "cuda"
    lines: list[str] = []

    def log(message: str) -> None:
        line = f"[{time.time() - t0:6.0f} s] {message}"
        print(line, flush=True)
        lines.append(line)
        (out / "campaign.log").write_text("\n".join(lines) + "\n")

    def stored(_res: dict) -> None:
        log(f"packed {_pack(store, out, prefix)} files into campaign_runs.tgz")

    hours = max(0.0, args.minutes * 60 - (time.time() - t0)) / 3600
    command = "python bench/gpu_run.py " + " ".join(argv if argv is not None else sys.argv[1:])
    done = campaign.run_campaign(root=store, data_dir=args.data_dir, only=only, hours=hours, command=command,
                                 log=log, device=device, gpu_order=True,
                                 on_stored=stored)
    log(f"{done} runs stored; packed {_pack(store, out, prefix)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
