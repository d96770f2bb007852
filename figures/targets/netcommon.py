"""What the neural-network targets share: availability of ``nets`` and of the data, sizes, running, summaries.

``--quick`` (and the test suite's ``--tiny``) run every image target on scikit-learn's embedded 8x8 digits in
place of MNIST / Fashion-MNIST (a substitute: the reproduced numbers are then "not comparable" with the
paper's, and the tables check the papers' qualitative orderings instead).  ``--size medium`` and ``--full``
run the papers' data sets from the data directory (medium at fewer clients, rounds and seeds); a data set
that is not there (CIFAR-10 here) gives "not run" rows.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from synth.intervals import column_mean_intervals

from ..registry import Context
from ..runs import by_point, run_points, summarise_values
from ..trials import nets_trial

__all__ = ["CFL_KEYS", "cfl_split_row", "cfl_warmup", "data_used", "parse_cfl", "seed_histories",
           "DATA_FOLDERS", "NOT_IN_TOOLKIT", "base_dataset", "full_data_missing", "leaf_users", "data_missing",
           "nets_missing", "run_nets",
           "substitute_reason", "summary_by", "rounds_to", "mean_curve", "ok", "errors"]

# the data set bases of nets and the folder (under the data directory) of their files
DATA_FOLDERS = {"mnist": ("mnist", "mnist"), "fmnist": ("fashion-mnist", "fashion-mnist"),
                "cifar": ("cifar10", "cifar10"), "femnist": ("femnist", "leaf-femnist"),
                "shakespeare": ("shakespeare", "leaf-shakespeare"), "agnews": ("ag-news", "ag-news"),
                "amazon": ("amazon", "amazon-blitzer")}
NOT_IN_TOOLKIT = "algorithm not in the toolkit"


def nets_missing(ctx: Context | None = None) -> str | None:
    """Why the ``nets`` package cannot run the neural-network targets (None when it can)."""
    try:
        from nets.experiment import PARAMS, run_experiment  # noqa: F401
    except Exception as exc:  # ImportError, or a half-finished package failing at import
        return f"the nets package is not importable ({type(exc).__name__}: {exc})"
    return None


def data_missing(ctx: Context, base: str) -> str | None:
    """Why data set ``base`` (a key of :data:`DATA_FOLDERS`) is not available for a full run (None if it is)."""
    from nets.data import SOURCES, data_dir

    source, folder = DATA_FOLDERS[base]
    root = data_dir(ctx.data_dir) / folder
    if not root.is_dir() or not any(root.iterdir()):
        how = SOURCES[source].how if source in SOURCES else ""
        return f"data not available: {root} is missing ({how})" if how else f"data not available: {root} is missing"
    return None


def full_data_missing(ctx: Context, what: str, bases: list[str], files: str = "their files") -> str | None:
    """Why a target on data with no embedded copy (``what``, data set bases ``bases``) cannot run: no ``nets``,
    not a ``--full`` run, or a data set missing from the data directory (None when it can run)."""
    why = nets_missing(ctx)
    if why:
        return why
    if not ctx.real:
        verb = "is" if len(bases) == 1 else "are"
        return (f"{what} {verb} not embedded: runs with --size medium or --full when {files} are in the data "
                "directory")
    return "; ".join(m for m in (data_missing(ctx, b) for b in bases) if m) or None


def leaf_users(ctx: Context, name: str) -> int:
    """How many LEAF users of ``femnist`` / ``shakespeare`` have train and test data in the data directory."""
    from nets.data.leaf import leaf_user_count

    return leaf_user_count(name, ctx.data_dir)


def base_dataset(ctx: Context, base: str, partition: str | None) -> str:
    """The nets data set name: the paper's in medium and full runs, the embedded digits for MNIST-like bases
    otherwise."""
    if not ctx.real and base in ("mnist", "fmnist", "cifar"):
        base = "digits"
    return base if partition is None else f"{base}-{partition}"


def substitute_reason(ctx: Context, base: str, reduced: str | None = None) -> str | None:
    """Why a reproduced number is not comparable with the paper's (None for a full run on the paper's data).

    A medium run uses the paper's data; ``reduced`` says what it changes from the paper's setting (a medium
    run with ``reduced=None`` is at the paper's setting and compared within ±).
    """
    if ctx.size == "full":
        return None
    if ctx.size == "medium":
        return None if reduced is None else f"medium run: {reduced}"
    name = {"mnist": "MNIST", "fmnist": "FMNIST", "cifar": "CIFAR-10"}.get(base, base)
    return f"{ctx.size} run: 8x8 digits for {name}, fewer clients/samples/rounds"


def run_nets(ctx: Context, folder: str, points: list[dict[str, Any]], trials: int, seed: int) -> list[list[dict]]:
    """Run the network experiments at ``points`` (``trials`` seeds each) through the sweep engine.

    Adds the context's device and data directory to every point; returns the records grouped by point.
    """
    full = []
    for p in points:
        q = dict(p, device=ctx.device)
        if p.get("algo") == "cfl":
            q.update(ctx.cfl or {})  # paper_repro.py --cfl
            if ctx.size != "full" and "warmup_rounds" not in q:
                # CFL's reference warm-up (20 rounds) would outlast a reduced run: it could never split
                q["warmup_rounds"] = cfl_warmup(p.get("rounds", 50))
        if ctx.data_dir is not None:
            q["data_dir"] = str(ctx.data_dir)
        steps = p.get("step_size", 0.1)
        if ctx.real and p.get("algo") in ("ifca", "global") and not isinstance(steps, list):
            q["checkpoint_dir"] = str(ctx.folder(folder) / "checkpoints")  # nets resumes these runs per round
        full.append(q)
    recs = run_points(ctx, folder, nets_trial, full, trials, seed)
    return by_point(recs, len(full))


def data_used(ctx: Context, real: str, stand_in: str = "8x8 digits standing in for MNIST") -> str:
    """The data a figure actually shows, for its title (:func:`figures.plots.style.face`): the paper's data set in
    medium and full runs, the stand-in otherwise."""
    return f"{real} ({ctx.size} run)" if ctx.real else f"{stand_in} ({ctx.size} run)"


CFL_KEYS = ("eps1", "eps2", "warmup_rounds", "min_split_size", "linkage")


def parse_cfl(text: str) -> dict:
    """``KEY=VALUE,...`` of CFL's hyper-parameters (Sattler et al. Alg. 1; :data:`CFL_KEYS`), checked by nets'
    own parameter schema; a ValueError names the bad key or value."""
    from nets.experiment import PARAMS

    out = {}
    for item in (s.strip() for s in text.split(",")):
        if not item:
            continue
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in CFL_KEYS:
            raise ValueError(f"cfl: expected KEY=VALUE with KEY one of {', '.join(CFL_KEYS)}, got {item!r}")
        if key in out:
            raise ValueError(f"cfl: {key} is given twice; give each key once")
        spec = PARAMS[key]
        try:
            typed = {"int": int, "float": float}.get(spec.kind, str)(value.strip())
        except ValueError:
            raise ValueError(f"cfl: {key} must be a{'n int' if spec.kind == 'int' else ' ' + spec.kind}, "
                             f"got {value.strip()!r}") from None
        try:
            out[key] = spec.check(key, typed)
        except ValueError as exc:
            raise ValueError(f"cfl: {exc}") from None
    return out


def cfl_warmup(rounds: int) -> int:
    """CFL's warm-up in a reduced run: a quarter of its rounds (the reference code's 20 at full size)."""
    return max(1, int(rounds) // 4)


def cfl_split_row(item: str, records: list[dict], rounds: int):
    """Whether CFL split, and the numbers of its split test (Sattler et al. Alg. 1), over the seeds of one point.

    CFL splits a cluster when, after the warm-up, its mean update norm is below ``eps1`` while some client's
    update norm is above ``eps2``; the row gives the clusters per seed and the smallest mean / largest client
    norm seen after the warm-up, so a run that never splits says which condition failed.
    """
    from ..verdicts.compare import Row

    warm, eps1, eps2 = cfl_warmup(rounds), 0.05, 0.5
    used, mean_min, max_max = [], [], []
    for r in records:
        if not ok(r):
            continue
        res = r["result"]
        test = res.get("split_test") or {}
        warm, eps1, eps2 = test.get("warmup_rounds", warm), test.get("eps1", eps1), test.get("eps2", eps2)
        used.append(res.get("n_clusters"))
        norms = res.get("update_norms") or {}
        mean = norms.get("mean_update_norm", [])[warm:]
        mx = norms.get("max_update_norm", [])[warm:]
        if mean:
            mean_min.append(min(mean))
            max_max.append(max(mx))
    if not used:
        return Row(item, "CFL splits (the papers' CFL rows)", "no finished run", "—", "not run (no finished trial)")
    why = ""
    if mean_min:
        why = (f"; after the warm-up of {warm} rounds: smallest mean update norm {min(mean_min):.3g} (split needs "
               f"< eps1 = {eps1:g}), largest client update norm {max(max_max):.3g} (needs > eps2 = {eps2:g})")
    return Row(item, "CFL splits where the papers' CFL rows have more than one cluster",
               f"clusters per seed {used}{why}", "—",
               "finding (CFL split)" if any((u or 0) > 1 for u in used) else "finding (CFL never split)")


def ok(record: dict) -> bool:
    """A finished trial without an error (see :func:`figures.trials.nets_trial`)."""
    return record["status"] == "ok" and "error" not in (record["result"] or {})


def summary_by(records: list[dict], key: str):
    """Mean ± std (over seeds) of ``result[key]`` of the finished trials of one point."""
    return summarise_values([(r["result"] or {}).get(key) if ok(r) else None for r in records])


def errors(records: list[dict]) -> list[str]:
    """The reasons of the trials of one point that failed."""
    return [r["reason"] if r["status"] != "ok" else r["result"]["error"] for r in records if not ok(r)]


def _history(records: list[dict], key: str) -> np.ndarray:
    """(seeds, rounds) array of a per-round history series (NaN where not recorded)."""
    series = []
    for r in records:
        if not ok(r):
            continue
        h = (r["result"] or {}).get("history") or {}
        vals = h.get(key) or []
        series.append([math.nan if v is None else float(v) for v in vals])
    if not series:
        return np.zeros((0, 0))
    T = max(len(s) for s in series)
    return np.array([s + [math.nan] * (T - len(s)) for s in series])


def seed_histories(records: list[dict], key: str, transform=None) -> tuple[np.ndarray, np.ndarray]:
    """Rounds (1-based) and the (seeds, rounds) array of a per-round history series (NaN where not recorded),
    for :func:`figures.plots.style.seed_curves`."""
    A = _history(records, key)
    if transform is not None and A.size:
        A = transform(A)
    return np.arange(1, A.shape[1] + 1) if A.size else np.zeros(0), A


def mean_curve(records: list[dict], key: str, transform=None,
               bounds: tuple[float, float] = (-1.0, 1.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rounds (1-based), mean, and a 95% t-interval over seeds of a per-round history series.

    The interval is clipped to ``bounds``, the range of the metric (ARI and accuracies lie in [-1, 1]): with
    two or three seeds a t-interval is wide and would otherwise run off the axis.
    """
    A = _history(records, key)
    if transform is not None and A.size:
        A = transform(A)
    if A.size == 0:
        return (np.zeros(0),) * 4
    mean, lo, hi, n = column_mean_intervals(A, 0.95)
    # a round seen by one seed has the whole line as interval: no band is drawn there
    lo, hi = np.where(n > 1, np.clip(lo, *bounds), np.nan), np.where(n > 1, np.clip(hi, *bounds), np.nan)
    return np.arange(1, A.shape[1] + 1), mean, lo, hi


def rounds_to(records: list[dict], key: str, test, percent_at: int | None = None,
              of_final: float | None = None) -> dict[str, Any]:
    """Per seed: the first round (1-based) whose ``key`` satisfies ``test`` (None if never), and, if
    ``percent_at`` is given, 100 * value at that round / final value (CLoVE Table 4's "% of final ARI").
    ``of_final``: instead of ``test``, the first round whose value reaches ``of_final`` times the seed's own final
    value (never, where the final value is not positive)."""
    firsts, percents = [], []
    for r in records:
        if not ok(r):
            continue
        vals = ((r["result"] or {}).get("history") or {}).get(key) or []
        reached = test
        if of_final is not None:
            final = vals[-1] if vals and vals[-1] is not None else 0.0

            def reached(v, level=of_final * final, final=final):
                return final > 0 and v >= level
        first = next((i + 1 for i, v in enumerate(vals) if v is not None and reached(v)), None)
        firsts.append(first)
        if percent_at is not None and vals:
            final = vals[-1]
            at = vals[min(percent_at, len(vals)) - 1]
            # undefined when the final ARI is 0 (nothing to reach a percentage of)
            percents.append(100.0 * at / final if final not in (None, 0) and at is not None else math.nan)
    return {"first": firsts, "percent": percents}
