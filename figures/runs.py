"""Running a target's trials through the sweep engine (:mod:`synth.montecarlo`), resumably, and summarising them.

Every target's trials go to a result store ``out/<folder>/store-<size>/`` (JSONL, one record per
finished trial, see :mod:`synth.store`) with the target's experiment spec (:class:`synth.spec.ExperimentSpec`,
canonical form) in its ``meta.json``; a rerun -- after an interruption, or to build a second table
from the same runs -- reads the finished trials back instead of recomputing them.  Quick, tiny and
full runs keep separate stores, so one output folder can hold all three.

Re-plotting: under ``Context(replot=True)`` :func:`run_points` only reads the store (a missing trial is an error,
nothing is computed), so a target's view -- figures, CSVs, its report section -- is rebuilt from its stores alone;
:func:`replot` does that for the targets a store names (``python -m synth report STORE``).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from synth.intervals import mean_interval
from synth.intervals import wilson as wilson_interval
from synth.montecarlo import run_trials
from synth.spec import ExperimentSpec, callable_name
from synth.store import META_FILE, RECORDS_FILE, StoreError, read_meta, read_records, write_text_atomic

from .registry import Context

__all__ = ["BatchObserver", "Summary", "by_point", "paper_stores", "replot", "run_points", "run_spec",
           "set_batch_observer", "stored_records", "summarise_values", "success_summary"]

PAPER_KIND = "paper-repro"

# told of every batch of trials run_points starts: the record file its store gains one line in per finished trial
# (whichever process ran it) and the trials asked for; the console progress of paper_repro.py is one
BatchObserver = Callable[[Path, int], Any]
_observer: BatchObserver | None = None


def set_batch_observer(observer: BatchObserver | None) -> BatchObserver | None:
    """Make ``observer`` the one told of every batch of trials (None: no one); returns the one it replaces."""
    global _observer
    previous, _observer = _observer, observer
    return previous


def _announce(store: Path, total: int) -> None:
    observer = _observer
    if observer is not None:
        observer(store / RECORDS_FILE, total)


def run_points(ctx: Context, folder: str, trial_fn: Callable[[dict, int], dict], points: Sequence[dict],
               trials: int, seed: int, desc: str | None = None) -> list[dict[str, Any]]:
    """Run (or resume) ``trials`` trials of ``trial_fn`` at every point into ``out/<folder>/store-<size>``.

    Trial ``t`` of point ``p`` gets the seed ``SeedSequence(seed, spawn_key=(p, t))`` (see
    :func:`synth.montecarlo.trial_seed`): the numbers do not depend on ``--n-jobs`` or the backend.
    Returns the records sorted by (point, trial).  With ``ctx.replot`` the records are read from the store and
    nothing is run (:func:`stored_records`).
    """
    spec = ExperimentSpec.from_points(folder, list(points), trials, seed, trial=trial_fn, kind=PAPER_KIND)
    return _run(ctx, folder, trial_fn, spec, list(points), desc)


def run_spec(ctx: Context, spec: ExperimentSpec, trial_fn: Callable[[dict, int], dict] | None = None,
             folder: str | None = None, desc: str | None = None) -> list[dict[str, Any]]:
    """:func:`run_points` for a target defined by an experiment spec (say a TOML file of ``synth/specs`` read with
    :func:`synth.sweep.load_spec`): its points, trials and seed, into ``out/<folder or spec.name>/store-<size>``.

    ``trial_fn`` defaults to the sweep's own trial (:func:`synth.sweep.experiment_trial`); the store keeps the
    spec, with the TOML layout it came from, as the target's spec.
    """
    import dataclasses
    import functools

    if trial_fn is None:
        from synth.sweep import experiment_trial

        trial_fn = functools.partial(experiment_trial, history=spec.history)
    folder = folder or spec.name
    own = dataclasses.replace(spec, name=folder, kind=PAPER_KIND, trial=callable_name(trial_fn))
    return _run(ctx, folder, trial_fn, own, own.points, desc)


def _run(ctx: Context, folder: str, trial_fn: Callable, spec: ExperimentSpec, points: list[dict],
         desc: str | None) -> list[dict[str, Any]]:
    trials, seed = spec.trials, spec.seed
    if ctx.reader is not None:
        return ctx.reader(ctx, folder, spec, trial_fn)
    store = ctx.folder(folder) / f"store-{ctx.size}"
    if ctx.replot:
        return stored_records(store, spec)
    old = read_meta(store) if (store / META_FILE).exists() else None
    targets = sorted({*(old or {}).get("targets", []), *([ctx.target] if ctx.target else [])})
    meta = {"kind": PAPER_KIND, "target": folder, "targets": targets, "size": ctx.size, "spec": spec.to_dict(),
            "context": {"device": ctx.device, "data_dir": None if ctx.data_dir is None else str(ctx.data_dir)}}
    try:
        # the points as given (the spec holds their JSON form, which is what the store compares and keeps); the
        # batch observer counts this batch's trials as the store gains them (set_batch_observer)
        with _store_turn(ctx, store):
            _announce(store, len(points) * trials)
            if ctx.wait_for_stores:  # another target may have filled it (and named itself) while this one waited
                old = read_meta(store) if (store / META_FILE).exists() else None
                meta["targets"] = sorted({*(old or {}).get("targets", []), *targets})
            return run_trials(trial_fn, points, trials, seed, store_dir=store, n_jobs=ctx.n_jobs,
                              backend=ctx.backend, scheduler=ctx.scheduler, resume=True, progress=ctx.progress,
                              meta=meta, desc=desc or folder)
    except StoreError as exc:
        if "different sweep" in str(exc):
            raise StoreError(f"{store} holds trials of a different configuration of {folder!r} (the target's "
                             "points or seed changed since they were written); delete that folder or use another "
                             "--out") from None
        raise


@contextlib.contextmanager
def _store_turn(ctx: Context, store: Path):
    """With ``ctx.wait_for_stores`` (targets of one run side by side), hold ``store`` for this target, waiting (one
    line on stderr) while another target of the run holds it; otherwise nothing (the store's own lock refuses a
    second sweep)."""
    if not ctx.wait_for_stores:
        yield
        return
    import fcntl
    import os
    import sys

    # a file beside the store, not in it: the store's own lock (synth.store) stays the store's
    fd = os.open(store.parent / f".{store.name}.turn", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            print(f"[{ctx.target}] waiting for {store.parent.name}/{store.name}, which another target of this run is "
                  "filling", file=sys.stderr, flush=True)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def stored_records(store: str | Path, spec: ExperimentSpec) -> list[dict[str, Any]]:
    """The finished records of ``spec`` in ``store``, sorted by (point, trial), without running anything.

    Raises :class:`synth.store.StoreError` when the store is missing, was written for other points or another
    seed, or lacks a trial.
    """
    store = Path(store)
    meta = read_meta(store) if store.is_dir() else None
    if meta is None:
        raise StoreError(f"{store} has no stored trials to re-plot from (no {META_FILE}); run the target first")
    stored = meta.get("spec") if isinstance(meta.get("spec"), dict) else {}
    points, seed = stored.get("points", meta.get("points")), stored.get("seed", meta.get("root_seed"))
    if points != spec.points or seed != spec.seed:
        raise StoreError(f"{store} holds trials of a different configuration of {spec.name!r} (its points or seed "
                         "differ from the target's); re-plot with the size and data directory it was run with")
    found: dict[tuple[int, int], dict] = {}
    for r in read_records(store):
        if r["point"] < len(spec.points) and r["trial"] < spec.trials:
            found.setdefault((r["point"], r["trial"]), r)
    wanted = [(p, t) for p in range(len(spec.points)) for t in range(spec.trials)]
    missing = [key for key in wanted if key not in found]
    if missing:
        p, t = missing[0]
        run = " or ".join(f"python paper_repro.py --only {n}" for n in meta.get("targets") or []) or "the target"
        raise StoreError(f"{store} lacks {len(missing)} of the {len(wanted)} trials of {spec.name!r} (first: point "
                         f"{p}, trial {t}); re-plotting computes nothing: run {run} at the same size first")
    return [found[key] for key in wanted]


def paper_stores(directory: str | Path) -> list[Path]:
    """The paper-target stores at ``directory``: the store itself, a target's folder, or a ``paper_repro.py`` output."""
    directory = Path(directory)
    if (directory / META_FILE).exists():
        candidates = [directory]
    else:
        candidates = sorted({p.parent for p in [*directory.glob(f"store-*/{META_FILE}"),
                                                *directory.glob(f"*/store-*/{META_FILE}")]})
    return [c for c in candidates if _kind(read_meta(c)) == PAPER_KIND]


def _kind(meta: Any) -> str | None:
    return meta.get("kind") if isinstance(meta, dict) else None


def replot(directory: str | Path, targets: dict) -> list[Path]:
    """Rebuild the figures, CSVs and report section of every target whose stores are at ``directory``, from the
    stores alone (see :func:`paper_stores`); returns the sections written (``out/<target>/section-<size>.md``).
    ``targets``: the registered targets by name (:func:`figures.load_targets`)."""
    stores = paper_stores(directory)
    if not stores:
        raise StoreError(f"{str(directory)!r} holds no paper-target store (no store-<size>/{META_FILE} of "
                         "paper_repro.py)")
    metas = [read_meta(s) for s in stores]
    sizes = sorted({str(m.get("size")) for m in metas})
    if len(sizes) > 1:
        raise StoreError(f"{str(directory)!r} holds stores of several sizes ({', '.join(sizes)}); name one store "
                         "directory (.../store-<size>)")
    names = list(dict.fromkeys(str(n) for m in metas for n in (m.get("targets") or [m.get("target")])))
    unknown = [n for n in names if n not in targets]
    if unknown:
        raise StoreError(f"{stores[0]}: the store names target {unknown[0]!r}, which is not registered; see "
                         "python paper_repro.py --list")
    context = metas[0].get("context") or {}
    out = stores[0].parent.parent  # out/<folder>/store-<size>
    ctx = Context(out=out, size=sizes[0], n_jobs=1, device=context.get("device", "auto"),
                  data_dir=context.get("data_dir"), replot=True)
    written = []
    for name in names:
        section = targets[name].run(ctx)
        path = ctx.folder(name) / f"section-{ctx.size}.md"
        write_text_atomic(path, section.markdown)
        written.append(path)
    return written


def by_point(records: list[dict], n_points: int) -> list[list[dict]]:
    """The records grouped by point index (each list in trial order)."""
    out: list[list[dict]] = [[] for _ in range(n_points)]
    for r in records:
        out[r["point"]].append(r)
    return out


class Summary(dict):
    """Mean, standard deviation, t-interval and count of a list of values (a dict, for CSV rows)."""

    @property
    def mean(self) -> float:
        return self["mean"]

    @property
    def std(self) -> float:
        return self["std"]


def summarise_values(values: Sequence[Any], confidence: float = 0.95,
                     support: tuple[float, float] = (-math.inf, math.inf)) -> Summary:
    """Mean with a Student-t interval, sample standard deviation (ddof=1, as the papers' "±") and count.

    ``None`` and non-finite values (failed trials, undefined metrics) are left out and counted in ``missing``.
    The interval is clipped to ``support``, the values the quantity can take (a fraction's t-interval near 0
    otherwise reaches below 0).
    """
    vals = [float(v) for v in values if v is not None and not isinstance(v, bool) and math.isfinite(float(v))]
    mean, lo, hi, n = mean_interval(vals, confidence)
    lo, hi = min(max(lo, support[0]), support[1]), max(min(hi, support[1]), support[0])
    std = float(np.std(vals, ddof=1)) if n >= 2 else (0.0 if n == 1 else math.nan)
    return Summary(mean=mean, lo=lo, hi=hi, std=std, n=n, missing=len(values) - n)


def success_summary(flags: Sequence[bool | None], confidence: float = 0.95) -> Summary:
    """Success probability with a Wilson interval; ``None`` (a failed trial) counts as not successful."""
    k = sum(bool(f) for f in flags)
    n = len(flags)
    lo, hi = wilson_interval(k, n, confidence)
    return Summary(mean=k / n if n else math.nan, lo=float(lo), hi=float(hi), std=math.nan, n=n, successes=k)
