#!/usr/bin/env python
"""Regenerate the papers' figures and tables next to the published numbers; see `python paper_repro.py --list`.

`python paper_repro.py` (= --quick) runs every target at reduced size on embedded data; --size medium runs the
neural-network targets on the papers' own data sets from the data directory at fewer clients, rounds and seeds
(its measured time: docs/reproducing.md); --full at the papers' sizes (all resumable: rerun the same command after an
interruption).  Each target writes PNG and PDF figures, the CSVs behind them and its section of OUT/report.md
(paper number | reproduced | difference | verdict).
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import time
import traceback
import warnings
from pathlib import Path

from synth.store import write_text_atomic

# errno values of the output disk itself (full, over quota, read-only)
_DISK_ERRORS = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC), errno.EROFS}


def _parser(targets):
    from synth.cli import CleanParser

    parser = CleanParser(prog="paper_repro.py", description=__doc__, allow_abbrev=False,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="reduced sizes on embedded data (default)")
    size.add_argument("--full", action="store_true", help="the papers' sizes (hours to days; resumable)")
    size.add_argument("--tiny", action="store_true", help=argparse.SUPPRESS)  # the test suite's size
    size.add_argument("--size", default=None, choices=["tiny", "quick", "medium", "full"],
                      help="run size: tiny (a few clients, samples and rounds per target: the test suite's "
                           "smoke-test size, seconds per target, never comparable to a paper), quick (= --quick), "
                           "medium (the papers' data sets, reduced; needs the data directory), full (= --full)")
    parser.add_argument("--list", action="store_true", help="name every target and exit")
    parser.add_argument("--seal-runs", dest="seal_runs", nargs="+", default=None, metavar="PATH",
                        help="give campaign run files written before digests (files, or every *.json of a folder) "
                             "their digest, after checking them, and exit; a digest tells a file changed after it "
                             "was written, it is no signature against a forger")
    parser.add_argument("--verdict-power", dest="verdict_power", action="store_true",
                        help="print, for each published value of the campaign's cells, the declared equivalence "
                             "margin, P(agrees) of a perfect reproduction at the stored and at the paper's seed "
                             "count, P(differs), P(agrees) 3 margins off, and the seeds it needs; then exit")
    parser.add_argument("--write-findings", dest="write_findings", nargs="+", default=None, metavar="FILE",
                        help="rewrite the generated verdict-count block of FINDINGS.md and/or README.md from the "
                             "stored paper-scale runs (figures/report/findings.py) and exit")
    parser.add_argument("--only", default=None, metavar="NAME,...", help="comma-separated target names")
    parser.add_argument("--out", default="repro_out", metavar="DIR", help="output folder (default: repro_out)")
    parser.add_argument("--n-jobs", dest="n_jobs", default="-1", metavar="N",
                        help="parallel workers, -1 = all cores (default: -1); results do not depend on it")
    parser.add_argument("--backend", default="loky", choices=["loky", "dask"], help="joblib backend (default: loky)")
    parser.add_argument("--scheduler", default=None, metavar="tcp://host:port",
                        help="dask scheduler address for --backend dask (default: a local cluster)")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"],
                        help="torch device of the neural-network targets (default: auto = cuda when torch sees a "
                             "GPU; cuda without one runs on CPU)")
    parser.add_argument("--data-dir", dest="data_dir", default=None, metavar="DIR",
                        help="the papers' data sets, read by --size medium and --full (default: $CFLAB_DATA, "
                             "../shared/data, ~/.cache/cflab/data)")
    parser.add_argument("--cfl", default=None, metavar="KEY=VALUE,...",
                        help="CFL hyper-parameters of every CFL run: eps1, eps2, warmup_rounds, min_split_size, "
                             "linkage (default: Sattler et al.'s reference values; reduced sizes warm up for a "
                             "quarter of the rounds)")
    parser.add_argument("--progress", action="store_true",
                        help="a progress bar per target on stderr even when it is not a terminal (default: a bar on "
                             "a terminal, else a line with the elapsed time, trials done and an ETA every 30 s)")
    camp = parser.add_argument_group("paper-scale campaign (figures/measured/campaign.csv; see "
                                     "figures/campaign/planner.py)")
    camp.add_argument("--campaign", default=None, choices=["plan", "run"],
                      help="plan: time every real-data cell not timed yet at the paper's setting and write the "
                           "manifest; run: then run the queued cells' runs at the paper's setting, one JSON per run "
                           "under figures/measured/<folder>/ (resumable: rerun the same command)")
    camp.add_argument("--budget-hours", dest="budget_hours", default=None, metavar="H",
                      help="CPU-hours the campaign may spend in all, stored runs included (default: 40)")
    camp.add_argument("--hours", default=None, metavar="H",
                      help="with --campaign run: start no run after H hours of wall time (default: no limit)")
    camp.add_argument("--cells", default=None, metavar="TEXT,...",
                      help="with --campaign: only the cells whose name contains one of these strings (with "
                           "--device cuda: the cells in the order named, none of the CPU budget; see bench/gpu_run.py)")
    camp.add_argument("--cpus", default=None, metavar="N",
                      help="with --backend dask: CPU workers of the plan's estimate, or of the local cluster that "
                           "--campaign run starts without --scheduler (default: this machine's cores)")
    camp.add_argument("--gpus", default=None, metavar="M",
                      help="with --backend dask: GPU workers of the plan's estimate, or of the local cluster (one per "
                           "CUDA device; default: 0)")
    camp.add_argument("--commit-runs", dest="commit_runs", action="store_true",
                      help="with --campaign run --backend dask: git-commit each stored run file as it is stored (that "
                           "file only)")
    return parser


# flags of the paper-scale campaign, and those it ignores (its runs, sizes and outputs are the campaign's own)
_CAMPAIGN_ONLY = {"budget_hours": "--budget-hours", "hours": "--hours", "cells": "--cells", "cpus": "--cpus",
                  "gpus": "--gpus", "commit_runs": "--commit-runs"}
_SETTINGS = "it runs the papers' settings"
_NOT_WITH_CAMPAIGN = {"out": "--out (its runs go to figures/measured/<folder>/)",
                      "only": "--only (it chooses cells: --cells)", "size": f"--size ({_SETTINGS})",
                      "quick": f"--quick ({_SETTINGS})", "full": f"--full ({_SETTINGS})", "tiny": "--tiny",
                      "list": "--list", "cfl": "--cfl (its CFL runs use the targets' settings)",
                      "progress": "--progress"}
# Resident memory of one worker process with torch, the networks and the trial functions imported, before its run's
# data (measured: 411 MiB peak RSS on the 2-core EPYC, torch 2.13 CPU); a synthetic worker: synth.cost.WORKER_BYTES
NETS_WORKER_BYTES = 420 * 2**20


def _check_combination(args, given: dict[str, str]) -> None:
    """Refuse a flag that the chosen mode would ignore (one line naming it): the campaign's flags without
    ``--campaign``, a run's outputs and sizes with it, ``--hours`` and ``--n-jobs`` with ``--campaign plan`` (it
    runs nothing in parallel and starts no run)."""
    from synth.cli import UsageError

    if args.campaign is None:
        for dest, flag in _CAMPAIGN_ONLY.items():
            if dest in given:
                raise UsageError(f"paper_repro.py: error: {flag} applies only with --campaign plan|run")
        return
    for dest, flag in _NOT_WITH_CAMPAIGN.items():
        if dest in given:
            raise UsageError(f"paper_repro.py: error: {flag.split(' (')[0]} does not apply to --campaign, which would "
                             f"ignore it{' (' + flag.split(' (', 1)[1] if ' (' in flag else ''}")
    if args.campaign == "plan":
        for dest, flag in (("hours", "--hours"), ("n_jobs", "--n-jobs"), ("commit_runs", "--commit-runs")):
            if dest in given:
                raise UsageError(f"paper_repro.py: error: {flag} applies only to --campaign run (plan times the "
                                 "cells one at a time and starts no run)")
    _check_dask_campaign(args, given)


def _check_dask_campaign(args, given: dict[str, str]) -> None:
    """The campaign's backend flags: --cpus, --gpus, --scheduler and --commit-runs need --backend dask; with it,
    --n-jobs and --device do not apply (the workers are --cpus and --gpus, or the cluster's, and a worker's
    resource chooses its device), --scheduler only with run and without --cpus and --gpus (its workers are the
    cluster's)."""
    from synth.cli import UsageError

    if args.backend != "dask":
        for dest in ("cpus", "gpus", "scheduler", "commit_runs"):
            if dest in given:
                raise UsageError(f"paper_repro.py: error: {given[dest]} applies to --campaign only with --backend dask")
        return
    for dest, why in (("n_jobs", "its workers are --cpus and --gpus, or those of --scheduler"),
                      ("device", "a worker's resource chooses the device: GPU workers run on their GPU")):
        if dest in given:
            raise UsageError(f"paper_repro.py: error: {given[dest]} does not apply to --campaign with --backend dask "
                             f"({why})")
    if "scheduler" in given and args.campaign == "plan":
        raise UsageError("paper_repro.py: error: --scheduler applies only to --campaign run; the plan prices the mix "
                         "of --cpus and --gpus")
    if "scheduler" in given:
        for dest in ("cpus", "gpus"):
            if dest in given:
                raise UsageError(f"paper_repro.py: error: {given[dest]} does not apply with --scheduler (the "
                                 "cluster's workers run the campaign)")


def _workers(n_jobs: int, nets: bool) -> int:
    """Worker processes for ``n_jobs`` (-1: every core): at most the cores (more only wait for them, and each holds
    an interpreter; one warning line when capped), refused when their memory alone exceeds what a run may use
    (:func:`synth.cost.check_memory`, naming the numbers)."""
    from synth.cost import WORKER_BYTES, check_memory, format_bytes

    cores = os.cpu_count() or 1
    workers = cores if n_jobs == -1 else n_jobs
    if workers > cores:
        print(f"paper_repro.py: warning: --n-jobs {workers} is more than this machine's {cores} cores: "
              f"{cores} workers", file=sys.stderr, flush=True)
        workers = cores
    each = NETS_WORKER_BYTES if nets else WORKER_BYTES
    if workers > 1:
        check_memory(workers * each, f"--n-jobs {workers} ({workers} worker processes of about {format_bytes(each)} "
                     f"each{', torch imported' if nets else ''}, before their runs' data)", hint="lower --n-jobs")
    return workers


def _n_jobs(text: str) -> int:
    from synth.cli import UsageError

    try:
        n = int(text)
    except ValueError:
        raise UsageError(f"paper_repro.py: error: --n-jobs must be -1 or an integer >= 1, got {text!r}") from None
    if n == 0 or n < -1:
        raise UsageError(f"paper_repro.py: error: --n-jobs must be -1 (all cores) or an integer >= 1, got {n}")
    return n


def _device(name: str) -> str:
    """``--device cuda`` on a machine without a CUDA GPU runs the neural-network targets on CPU (and says so)."""
    if name != "cuda":
        return name
    try:
        import torch
    except ImportError:
        return name  # the nets targets report the missing package themselves
    if torch.cuda.is_available():
        return name
    print("paper_repro.py: no CUDA GPU visible to torch: the neural-network targets run on CPU", file=sys.stderr)
    return "cpu"


def _cfl(text: str | None) -> dict | None:
    from synth.cli import UsageError

    if text is None:
        return None
    from figures.targets.netcommon import parse_cfl

    try:
        return parse_cfl(text)
    except ValueError as exc:
        raise UsageError(f"paper_repro.py: error: --{exc}") from None


def _names(args, targets) -> list[str]:
    from synth.cli import UsageError
    from synth.validation import did_you_mean

    if args.only is None:
        return list(targets)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    if not names:
        raise UsageError("paper_repro.py: error: --only needs at least one target name; see --list")
    for n in names:
        if n not in targets:
            raise UsageError(f"paper_repro.py: error: unknown target {n!r}{did_you_mean(n, targets)}; see --list")
    return list(dict.fromkeys(names))


def main(argv=None) -> int:
    """Exit status 0 (all targets done), 1 (a target failed; the others ran), 2 (an error, one line on stderr), 130
    (Ctrl-C); see :mod:`synth.errors`."""
    from synth.errors import run_main

    return run_main("paper_repro.py", _main, argv, diverged_hint="lower the step size")


def _main(argv) -> int:
    from figures.report.progress import closing_summary, cpu_seconds

    # the run's wall and CPU time are counted from here (the targets' imports included)
    wall_start, cpu_start = time.perf_counter(), cpu_seconds()
    from figures import Context, load_targets
    from synth.cli import UsageError

    targets = load_targets()
    parser = _parser(targets)
    args = parser.parse_args(argv)
    _check_combination(args, parser.given_options(argv))
    n_jobs = _n_jobs(args.n_jobs)
    if args.seal_runs is not None:
        return _seal(args.seal_runs)
    if args.write_findings is not None:
        return _write_findings(args.write_findings, args.data_dir)
    if args.verdict_power:
        from figures.campaign.planner import HERE, MANIFEST
        from figures.verdicts.power import power_table

        print(power_table(HERE / MANIFEST))
        return 0
    if args.campaign is not None:
        return _campaign(args, n_jobs, argv)
    names = _names(args, targets)
    if args.scheduler is not None and args.backend != "dask":
        raise UsageError("paper_repro.py: error: --scheduler needs --backend dask")
    if not args.out.strip():
        raise UsageError("paper_repro.py: error: --out must name a folder, got an empty string")
    cfl = _cfl(args.cfl)
    size = args.size or ("full" if args.full else "tiny" if args.tiny else "quick")
    if not args.list:
        n_jobs = _workers(n_jobs, any(getattr(targets[n], "kind", None) == "nets" for n in names))
    elif n_jobs == -1:
        n_jobs = os.cpu_count() or 1
    device = _device(args.device)
    # the trials' own bars stay off: each target reports its progress as a whole (figures.report.progress)
    ctx = Context(out=Path(args.out), size=size, n_jobs=n_jobs, backend=args.backend, device=device,
                  scheduler=args.scheduler, data_dir=args.data_dir, progress=False, cfl=cfl)
    if args.list:
        for t in targets.values():
            why = t.why_not(ctx)
            print(f"{t.name:24s} {t.paper:14s} {t.description}  [{'pending: ' + why if why else 'ready'}]")
        return 0
    ctx.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CFLAB_QUIET", "1")
    # loky retires idle workers between targets and says so; the trials are unaffected (they are resubmitted)
    warnings.filterwarnings("ignore", message="A worker stopped while some jobs were given to the executor")
    start_all = time.perf_counter()
    runnable = []
    for i, name in enumerate(names, 1):
        why = targets[name].why_not(ctx)
        if why:
            _write_status(ctx, name, {"status": "pending", "reason": why})
            print(f"[{name}] ({i}/{len(names)}) pending: {why}", flush=True)
        else:
            runnable.append((i, name))
    failed = _run_targets(ctx, runnable, len(names), args.progress)
    report = _assemble(ctx, targets, time.perf_counter() - start_all, n_jobs)
    _stop_workers()  # so that their CPU time is counted (a finished child's time is known once it is reaped)
    print(closing_summary(ctx.out, targets, size, time.perf_counter() - wall_start, cpu_seconds() - cpu_start,
                          report.markdown, report.html, failed), flush=True)
    for st in report.unreadable:  # the report lists them; the exit status says the report is incomplete
        print(f"paper_repro.py: unreadable status, counted nowhere: {st.reason}", file=sys.stderr)
    return 1 if failed or report.unreadable else 0


def _seal(paths: list[str]) -> int:
    """``--seal-runs``: seal each campaign run file of ``paths`` written before digests (figures.campaign.store)."""
    from figures.campaign.store import seal_run
    from synth.cli import UsageError

    files = []
    for p in map(Path, paths):
        if p.is_dir():
            files += sorted(p.glob("*.json"))
        elif p.is_file():
            files.append(p)
        else:
            raise UsageError(f"paper_repro.py: error: --seal-runs: {p} is neither a file nor a folder")
    sealed = sum(seal_run(f) for f in files)
    print(f"paper_repro.py: sealed {sealed} of {len(files)} file(s); the others already had a digest (checked) or "
          "are no campaign runs")
    return 0


def findings_blocks(data_dir: str | None = None) -> dict[str, str]:
    """The verdict-count blocks of FINDINGS.md and README.md now (figures.report.findings): the ``measured-runs``
    target's rows, run into a scratch folder, and ``--verdict-power``'s summary line."""
    import tempfile

    from figures import Context, load_targets
    from figures.campaign.planner import HERE, MANIFEST
    from figures.report.findings import blocks
    from figures.report.headline import data_kind
    from figures.verdicts.power import power_table

    target = load_targets()["measured-runs"]
    with tempfile.TemporaryDirectory(prefix="cflab-findings-") as tmp:
        section = target.run(Context(out=Path(tmp), size="quick", n_jobs=1, data_dir=data_dir, progress=False))
    return blocks(list(getattr(section, "rows", [])), target.name, target.paper, data_kind(target.kind, "quick"),
                  power_table(HERE / MANIFEST).splitlines()[-1])


def _write_findings(paths: list[str], data_dir: str | None) -> int:
    """``--write-findings``: rewrite the generated block of each of ``paths`` (FINDINGS.md, README.md)."""
    from figures.report.findings import FILES, replace_block
    from synth.cli import UsageError

    for p in map(Path, paths):
        if p.name not in FILES or not p.is_file():
            raise UsageError(f"paper_repro.py: error: --write-findings takes {' or '.join(FILES)} files, got "
                             f"{str(p)!r}")
    generated = findings_blocks(data_dir)
    for p in map(Path, paths):
        p.write_text(replace_block(p.read_text(encoding="utf-8"), generated[p.name], str(p)), encoding="utf-8")
        print(f"paper_repro.py: {p}: verdict counts written")
    return 0


def _run_targets(ctx, runnable: list[tuple[int, str]], total: int, bar: bool) -> list[str]:
    """Run the targets ``runnable`` ((position, name) in report order); returns the names of those that failed.

    Quick and tiny runs with several workers run whole targets side by side, one per worker, longest first
    (:data:`figures.registry.QUICK_CPU_SECONDS`), each running its trials in its own process: their targets take
    seconds to minutes, and the cores stay busy through each target's serial part (figures, tables, tests), which
    the trials' workers would leave idle.  A target that needs a result store another target is filling waits
    for it and reads its runs (:attr:`figures.registry.Context.wait_for_stores`).  Medium and full runs, and a
    single target, run the targets one after the other with the trials spread over the workers."""
    from figures.report.progress import RunProgress

    t0 = time.time()
    lanes = min(ctx.n_jobs, len(runnable)) if ctx.size in ("tiny", "quick") and ctx.backend == "loky" else 1
    # the whole run's line every 30 s: k of N targets done, elapsed, ETA (figures.report.progress.RunProgress)
    with RunProgress([name for _, name in runnable]) as run:
        return _run_lanes(ctx, runnable, total, bar, t0, lanes, run)


def _run_lanes(ctx, runnable, total: int, bar: bool, t0: float, lanes: int, run) -> list[str]:
    """The targets one after the other (``lanes`` 1) or side by side; ``run.done(name)`` as each finishes."""
    if lanes <= 1:
        failed = []
        for i, name in runnable:
            # _run_target returns (name, done): the pair itself is always true, so test its second item
            if not _run_target(ctx, name, i, total, True if bar else None, t0)[1]:
                failed.append(name)
            run.done(name)
        return failed
    import dataclasses

    from joblib import Parallel, delayed

    from figures.registry import quick_cost

    print(f"paper_repro.py: {len(runnable)} targets on {lanes} workers side by side, longest first; each prints "
          "its own lines", flush=True)
    lane_ctx = dataclasses.replace(ctx, n_jobs=1, wait_for_stores=True)
    order = sorted(runnable, key=lambda item: -quick_cost(item[1]))
    # bars of several processes would overwrite each other: plain lines unless --progress asks for bars
    done = Parallel(n_jobs=lanes, backend="loky", return_as="generator_unordered", pre_dispatch="n_jobs")(
        delayed(_run_target)(lane_ctx, name, i, total, True if bar else False, t0) for i, name in order)
    ok = set()
    for name, good in done:
        run.done(name)
        if good:
            ok.add(name)
    return [name for _, name in runnable if name not in ok]


def _run_target(ctx, name: str, position: int, total: int, bar: bool | None, t0: float):
    """Run one target, write its section and status and print its lines; ``(name, done)`` (False: it failed).
    ``t0``: the run's start (``time.time()``), for the time since the start."""
    from figures import load_targets
    from figures.report.progress import StepProgress, cpu_seconds, duration

    t = load_targets()[name]
    print(f"[{name}] ({position}/{total}) running ({ctx.size}) ...", flush=True)
    start, cpu = time.perf_counter(), cpu_seconds()
    try:
        # elapsed time, trials done and an ETA on stderr: a bar on a terminal (or with --progress), else a line
        # every 30 s
        with StepProgress(name, bar=bar):
            section = t.run(_target_context(ctx, t))
    except Exception as exc:  # one broken target must not lose the others' results
        if isinstance(exc, OSError) and exc.errno in _DISK_ERRORS:
            raise  # a full or read-only disk fails every later target too: stop with one line (exit 2)
        secs = time.perf_counter() - start
        tb = traceback.format_exc()
        _write_status(ctx, name, {"status": "failed", "reason": f"{type(exc).__name__}: {exc}",
                                  "seconds": secs, "traceback": tb})
        print(f"[{name}] FAILED after {secs:.1f} s: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        return name, False
    secs = time.perf_counter() - start
    write_text_atomic(ctx.folder(name) / f"section-{ctx.size}.md", section.markdown)
    _write_status(ctx, name, _done_status(ctx, section, _target_context(ctx, t).size, secs))
    print(f"[{name}] done in {duration(secs)} ({cpu_seconds() - cpu:.1f} CPU s; "
          f"{duration(time.time() - t0)} since the start)", flush=True)
    return name, True


def _stop_workers() -> None:
    """Shut down joblib's reusable worker processes, if any were started (never starts them)."""
    try:
        from joblib.externals.loky import reusable_executor
    except ImportError:
        return
    executor = getattr(reusable_executor, "_executor", None)
    if executor is not None:
        executor.shutdown(wait=True)


def _hours(flag: str, text: str | None, default: float | None) -> float | None:
    from synth.cli import UsageError

    if text is None:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise UsageError(f"paper_repro.py: error: {flag} must be a number of hours in (0, inf), got {text!r}")
    return value


def _campaign(args, n_jobs: int, argv) -> int:
    """``--campaign plan | run`` (figures/campaign/planner.py): the manifest, and the paper-scale runs."""
    import shlex

    from figures.campaign import planner as campaign
    from synth.cli import UsageError

    budget = _hours("--budget-hours", args.budget_hours, campaign.BUDGET_HOURS)
    hours = _hours("--hours", args.hours, None)
    only = [c.strip() for c in args.cells.split(",") if c.strip()] if args.cells is not None else None
    if only is not None and not only:
        raise UsageError("paper_repro.py: error: --cells needs at least one part of a cell name (see "
                         "figures/measured/campaign.csv, column cell)")
    # the cell names come from the manifest (milliseconds; collecting the runs takes a minute): a name matching no
    # cell is refused before any work, and before the manifest is rewritten
    campaign.check_cells(only, campaign.known_cells(), "--cells")
    dask = args.backend == "dask"
    cpus, gpus = _mix(args) if dask else (0, 0)
    n_jobs = _workers(n_jobs, nets=True) if args.campaign == "run" and not dask else 1
    command = "python paper_repro.py " + " ".join(shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]))
    # the campaign runs on the CPU unless --device cuda names a GPU torch sees (auto keeps the CPU's budget and order)
    device = "cuda" if args.device == "cuda" and _device("cuda") == "cuda" else "cpu"
    def log(message: str) -> None:
        print(message, flush=True)

    if args.campaign == "run":
        stored = None
        if args.commit_runs:
            from figures.campaign.dask_runner import git_commit_run

            def stored(res):
                git_commit_run(res["path"], log)
        if dask:
            from figures.campaign import dask_runner as campaign_dask

            campaign_dask.run_campaign(budget, data_dir=args.data_dir, only=only, hours=hours, command=command,
                                       log=log, on_stored=stored, scheduler=args.scheduler, cpus=cpus, gpus=gpus)
        else:
            campaign.run_campaign(budget, n_jobs, data_dir=args.data_dir, only=only, hours=hours, command=command,
                                  log=log, device=device, on_stored=stored)
    then = None
    if dask and args.campaign == "plan":  # the table's wall time on the cluster's CPU and GPU workers
        from figures.campaign.dask_runner import device_plan

        def then(plans, timings):
            return device_plan(plans, timings, cpus, gpus, root=campaign.HERE, budget_hours=budget)
    # a Dask plan prices what is measured: it times nothing (a cluster's coordinator need not be the timing machine)
    path, text = campaign.refresh(budget, data_dir=args.data_dir, only=only, command=command,
                                  measure_missing=device == "cpu" and not (dask and args.campaign == "plan"), log=log,
                                  then=then)
    print(text)
    print(f"manifest: {path}")
    return 0


# the most workers of one kind a plan prices: its schedule holds a queue per worker (10,000 take a few MB; a
# billion took over 100 GB before failing)
MAX_WORKERS = 10_000


def _count(flag: str, text: str | None, default: int) -> int:
    from synth.cli import UsageError

    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= MAX_WORKERS:
        raise UsageError(f"paper_repro.py: error: {flag} must be a whole number of workers in [0, {MAX_WORKERS}], "
                         f"got {text[:40]!r}")
    return value


def _mix(args) -> tuple[int, int]:
    """(CPU workers, GPU workers) of --campaign with --backend dask: the plan's mix as given (default: this
    machine's cores, no GPU); run's local cluster capped at the cores and the memory (as --n-jobs) and refused
    beyond the CUDA devices torch sees; (0, 0) with --scheduler (the cluster's workers)."""
    from synth.cli import UsageError

    if args.scheduler is not None:
        return 0, 0
    cpus = _count("--cpus", args.cpus, os.cpu_count() or 1)
    gpus = _count("--gpus", args.gpus, 0)
    if cpus + gpus == 0:
        raise UsageError("paper_repro.py: error: --cpus and --gpus are both 0: no worker would run the campaign")
    if args.campaign == "run":
        cpus = _workers(cpus, nets=True) if cpus else 0
        try:
            import torch

            seen = torch.cuda.device_count() if torch.cuda.is_available() else 0
        except ImportError:
            seen = 0
        if gpus > seen:
            raise UsageError(f"paper_repro.py: error: --gpus {gpus} is more than the {seen} CUDA device(s) torch sees "
                             "here; a local cluster has one GPU worker per device")
    return cpus, gpus


def _target_context(ctx, target):
    """A medium run is about the papers' data: the synthetic and theory targets, and the few neural-network targets
    of ``figures.registry.MEDIUM_AT_QUICK``, run at the quick size there."""
    import dataclasses

    from figures.registry import medium_size

    if ctx.size == "medium" and medium_size(target.name, target.kind) != "medium":
        return dataclasses.replace(ctx, size="quick")
    return ctx


def _done_status(ctx, section, run_size: str, seconds: float) -> dict:
    """A done target's status: its rows, verdict counts and their digest with its section (figures.report.status)."""
    from figures.report.status import done_status

    return done_status(_row_records(section), section.title, ctx.size, run_size, section.markdown, seconds)


def _row_records(section) -> list[dict]:
    from figures.report.headline import row_record

    return [row_record(r) for r in getattr(section, "rows", [])]


def _write_status(ctx, name: str, status: dict) -> None:
    from synth.store import write_json_atomic

    status = {**status, "size": ctx.size, "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    write_json_atomic(ctx.folder(name) / f"status-{ctx.size}.json", status)


def _headline(ctx, targets) -> str:
    """The headline from the verified status files of this size (targets run earlier included)."""
    from figures.report.assemble import headline

    return headline(ctx.out, targets, ctx.size)


def _assemble(ctx, targets, seconds: float, n_jobs: int):
    """``report.md`` and ``report.html`` from the verified status and section of every target of this size; a status
    that cannot be read is listed as unreadable (figures.report.assemble)."""
    from figures.registry import MEDIUM_AT_QUICK
    from figures.report.assemble import assemble

    extra = (" In a medium run the synthetic and theory targets run at the quick size, and so do "
             + "; ".join(f"`{k}` ({v})" for k, v in MEDIUM_AT_QUICK.items()) + "." if ctx.size == "medium" else "")
    return assemble(ctx, targets, seconds, n_jobs, extra)


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends quietly, without a traceback
    sys.exit(main())
