"""Input validation at the public boundary.

Every public function and estimator validates its arguments here and raises a
``ValueError`` (bad value) or ``TypeError`` (bad type) whose message names the
parameter, the value received and what is allowed.  Array code inside the
toolkit assumes validated input and does not re-check.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "check_array",
    "check_choice",
    "check_client_counts",
    "check_federation_data",
    "check_federation_shape",
    "check_int",
    "check_probability",
    "check_random_state",
    "check_real",
    "did_you_mean",
]


def format_value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def check_real(
    name: str,
    value: Any,
    *,
    low: float | None = None,
    high: float | None = None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
) -> float:
    """Return ``value`` as a finite float inside the stated interval, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {format_value(value)} of type {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    lo_ok = low is None or (value >= low if low_inclusive else value > low)
    hi_ok = high is None or (value <= high if high_inclusive else value < high)
    if not (lo_ok and hi_ok):
        raise ValueError(f"{name} must be in {format_interval(low, high, low_inclusive, high_inclusive)}, got {value}")
    return value


def check_int(name: str, value: Any, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise TypeError(f"{name} must be an integer, got {format_value(value)} of type {type(value).__name__}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer in {format_interval(low, high, True, True)}, "
                         f"got {format_value(value)}")
    return value


def check_probability(name: str, value: Any, *, allow_zero: bool = False, allow_one: bool = True) -> float:
    """A probability or fraction in (0, 1] by default."""
    return check_real(name, value, low=0.0, high=1.0, low_inclusive=allow_zero, high_inclusive=allow_one)


def check_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    """``value`` must be one of ``choices``; suggests the closest on a typo."""
    if not isinstance(value, str) or value not in choices:
        hint = did_you_mean(str(value), choices)
        raise ValueError(f"{name} must be one of {', '.join(map(str, choices))}; got {format_value(value)}{hint}")
    return value


def did_you_mean(word: str, options: Iterable[str]) -> str:
    """A ' (did you mean X?)' suffix when a close option exists, else ''."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_array(
    name: str,
    value: Any,
    *,
    ndim: int | tuple[int, ...] | None = None,
    shape: tuple[int | None, ...] | None = None,
    dtype: Any = np.float64,
    finite: bool = True,
    nonnegative: bool = False,
) -> np.ndarray:
    """Convert to an ndarray and check dimension, shape and finiteness."""
    try:
        if np.dtype(dtype).kind in "iu":
            # refuse 0.5 -> 0: an integer array must hold integers, not be truncated into them
            raw = np.asarray(value)
            if raw.dtype.kind == "f" and np.any(raw != np.round(raw)):
                raise ValueError(f"{name} must hold integers, got non-integer values")
            if raw.dtype.kind in "OUSb" and raw.size:
                raw = raw.astype(np.float64)
            arr = np.asarray(raw, dtype=dtype)
        else:
            arr = np.asarray(value, dtype=dtype)
    except ValueError as exc:
        if "must hold integers" in str(exc):
            raise
        raise TypeError(f"{name} must be array-like of numbers, got {type(value).__name__}: {exc}") from None
    except TypeError as exc:
        raise TypeError(f"{name} must be array-like of numbers, got {type(value).__name__}: {exc}") from None
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise ValueError(f"{name} must have {' or '.join(map(str, allowed))} dimension(s), got shape {arr.shape}")
    if shape is not None:
        if arr.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, arr.shape, strict=True)):
            want = "(" + ", ".join("any" if s is None else str(s) for s in shape) + ")"
            raise ValueError(f"{name} must have shape {want}, got {arr.shape}")
    if finite and arr.dtype.kind in "fc" and not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name} must be finite, got {bad} non-finite entr{'y' if bad == 1 else 'ies'}")
    if nonnegative and np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative, got minimum {arr.min()}")
    return arr


def check_random_state(random_state: Any) -> np.random.Generator:
    """``None``, an int seed, a SeedSequence or a Generator -> a Generator.

    A Generator passed in is used as is (shared state), as in scikit-learn.
    """
    if random_state is None:
        return np.random.default_rng()
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, np.random.SeedSequence):
        return np.random.default_rng(random_state)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative integer, got {random_state}")
        return np.random.default_rng(int(random_state))
    raise TypeError(
        "random_state must be None, a non-negative int, a numpy SeedSequence or a numpy Generator, "
        f"got {type(random_state).__name__}"
    )


def format_interval(low: float | None, high: float | None, low_inc: bool, high_inc: bool) -> str:
    left = "[" if (low_inc and low is not None) else "("
    right = "]" if (high_inc and high is not None) else ")"
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    return f"{left}{lo}, {hi}{right}"


# -- a federation's data, at the boundary of every backend and estimator -------------------------------------------
#
# The compiled kernel of synth.backend reads n_samples[i] rows of client i at fixed offsets into X and y, so a
# count beyond the arrays would read other memory: the shapes and counts are checked whenever a backend is built
# (O(m)), and the values (finite, zero padding, logistic labels in [0, 1]) once per fit (one pass over the data).


def check_client_counts(n_samples: Any, m: int, n_max: int, name: str = "n_samples") -> np.ndarray:
    """``n_samples`` as a read-only int64 copy of ``m`` counts in ``[1, n_max]``, else ValueError/TypeError.

    The copy is read-only so that a backend's counts cannot be changed after they were checked (a caller holding
    the federation's own array may still change that one; it is re-checked when the next backend is built).
    """
    raw = np.asarray(n_samples)
    if raw.dtype.kind not in "iuf" or raw.dtype == np.bool_:
        raise TypeError(f"{name} must hold integer sample counts, got dtype {raw.dtype}")
    if raw.shape != (m,):
        raise ValueError(f"{name} must have shape ({m},) (one count per client), got {raw.shape}")
    if raw.dtype.kind == "f" and not np.all(np.isfinite(raw) & (raw == np.round(raw))):
        raise ValueError(f"{name} must hold integers, got non-integer or non-finite values")
    if m:
        lo, hi = raw.min(), raw.max()
        if lo < 1 or hi > n_max:
            i = int(np.argmin(raw)) if lo < 1 else int(np.argmax(raw))
            raise ValueError(f"{name} must be integers in [1, {n_max}] (at least 1 sample per client, at most the "
                             f"{n_max} rows its data arrays hold), got {name}[{i}] = {format_value(raw[i].item())}")
    out = np.array(raw, dtype=np.int64)
    out.setflags(write=False)
    return out


def check_federation_shape(X: Any, y: Any, n_samples: Any, *, float_data: bool = True) -> np.ndarray:
    """Shapes of padded client data ``X (m, n_max, d...)``, ``y (m, n_max)`` and counts; returns the counts.

    At least one client, one row and (for 3-d float data) one feature; ``X`` and ``y`` must be float32/float64
    numpy arrays when ``float_data`` (the GLM backend and its compiled kernel read them as such).
    """
    shape = tuple(getattr(X, "shape", ()))
    if len(shape) < (3 if float_data else 2):
        want = "(clients, samples, features)" if float_data else "(clients, samples, ...)"
        raise ValueError(f"X must have shape {want}, got {shape if shape else type(X).__name__}")
    if float_data:
        for name, arr in (("X", X), ("y", y)):
            if not isinstance(arr, np.ndarray) or arr.dtype not in (np.float32, np.float64):
                kind = arr.dtype if isinstance(arr, np.ndarray) else type(arr).__name__
                raise TypeError(f"{name} must be a float32 or float64 numpy array, got {kind}")
        if len(shape) != 3:
            raise ValueError(f"X must have shape (clients, samples, features), got {shape}")
    m, n_max = int(shape[0]), int(shape[1])
    if m < 1:
        raise ValueError(f"the federation must have at least 1 client, got X of shape {shape}")
    if n_max < 1:
        raise ValueError(f"every client must hold at least 1 sample, got X of shape {shape}")
    if float_data and shape[2] < 1:
        raise ValueError(f"d (features per sample) must be at least 1, got X of shape {shape}")
    y_shape = tuple(getattr(y, "shape", ()))
    if y is not None and y_shape != (m, n_max):
        raise ValueError(f"y must have shape ({m}, {n_max}) to match X {shape}, got {y_shape or type(y).__name__}")
    return check_client_counts(n_samples, m, n_max)


def _all_finite(arr: np.ndarray) -> bool:
    # one streaming pass without a temporary: a NaN or an infinity makes the sum non-finite; a finite sum proves
    # every entry finite, and a sum that overflowed from finite entries is told apart by the exact check
    with np.errstate(over="ignore", invalid="ignore"):
        total = arr.sum()
    return bool(np.isfinite(total)) or bool(np.isfinite(arr).all())


def check_federation_data(X: np.ndarray, y: np.ndarray, n_samples: np.ndarray, family: str = "linear") -> None:
    """Values of validated padded data: finite, zero padding past each client's count, logistic labels in [0, 1].

    Padding rows must be zero because the squared loss of the numpy path sums over them unmasked (a zero row
    with ``y = 0`` adds 0) while the compiled kernel never reads them: anything else gives the two paths
    different losses.
    """
    for name, arr in (("X", X), ("y", y)):
        if not _all_finite(arr):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise ValueError(f"{name} must be finite; {name}[{', '.join(map(str, bad))}] = {arr[tuple(bad)]} "
                             f"({int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))} non-finite entries)")
    n_max = X.shape[1]
    if n_samples.min() < n_max:
        pad = np.arange(n_max)[None, :] >= n_samples[:, None]
        if np.any(X[pad]) or np.any(y[pad]):
            i = int(np.flatnonzero((X[pad].reshape(-1, X.shape[2]) != 0).any(1) | (y[pad] != 0))[0])
            client = int(np.nonzero(pad)[0][i])
            raise ValueError(f"X and y rows of client {client} beyond n_samples[{client}] = {n_samples[client]} "
                             "(padding) must be zero")
    if family == "logistic" and (y.min() < 0 or y.max() > 1):
        raise ValueError(f"y of the logistic family must hold labels in [0, 1], got values in [{y.min()}, {y.max()}]")
