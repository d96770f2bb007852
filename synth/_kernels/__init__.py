"""Optional compiled kernels of :class:`synth.backend.GLMBackend`, built at first use.

``fused.c`` is compiled once per machine with the system C compiler into a per-user cache
(``$CFLAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/cflab``, else ``~/.cache/cflab``), keyed by a hash of the
source, the compiler and its flags, and loaded with :mod:`ctypes` (which releases the GIL during a call,
so blocks of clients can run on two threads).  The library is self-tested on a small problem against
numpy before it is used.  Whenever something is missing -- no compiler, a failed build or self-test, an
unwritable cache, or ``CFLAB_FUSED=0`` -- :func:`load` returns ``None``, :func:`status` says why, and the
backend keeps its numpy path: nothing is printed and nothing fails.

Concurrency: a build writes a temporary file in the cache directory and renames it into place, so two
processes building at once each produce a complete library and the last rename wins; a reader never sees
a partial file.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np

__all__ = ["FusedLibrary", "blas_threads", "layout_ok", "load", "run_parts", "status"]

SOURCE = Path(__file__).with_name("fused.c")
ABI = 2  # must match CFLAB_FUSED_ABI in fused.c
_BUILD_TIMEOUT_S = 120

_lock = threading.Lock()
_state: dict = {"loaded": False, "lib": None, "reason": "not loaded yet", "path": None}


def _cache_dir() -> Path:
    explicit = os.environ.get("CFLAB_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "cflab"


def _compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    return None


def _cpu_flags() -> set[str]:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def _flags() -> list[str]:
    """``-O3`` plus AVX2/FMA where this CPU has them (the cache key holds the flags, so a cache shared by
    machines with different CPUs keeps one library per instruction set)."""
    flags = ["-O3", "-std=gnu11", "-shared", "-fPIC"]
    if platform.machine().lower() in ("x86_64", "amd64") and {"avx2", "fma"} <= _cpu_flags():
        flags += ["-mavx2", "-mfma"]
    return flags


def _compiler_id(cc: str) -> str:
    try:
        out = subprocess.run([cc, "--version"], capture_output=True, text=True, timeout=30)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _compile(cc: str, flags: list[str], source: Path, target: Path) -> None:
    # the source includes itself through __FILE__, so it is compiled from an absolute path
    cmd = [cc, *flags, "-o", str(target), str(source.resolve()), "-lm"]
    subprocess.run(cmd, check=True, capture_output=True, timeout=_BUILD_TIMEOUT_S)


def _build() -> tuple[Path | None, str]:
    """The path of a compiled library (built now if not cached) and a one-line account of what happened."""
    cc = _compiler()
    if cc is None:
        return None, "no C compiler (cc, gcc, clang or $CC) on PATH"
    flags = _flags()
    text = SOURCE.read_bytes()
    key = hashlib.sha256(b"\0".join([text, cc.encode(), _compiler_id(cc).encode(), " ".join(flags).encode(),
                                     platform.machine().encode()])).hexdigest()[:20]
    name = f"fused-{key}.so"
    cache = _cache_dir()
    target = cache / name
    if target.exists():
        return target, f"cached {target}"
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=cache)
        os.close(fd)
        where = f"built {target}"
    except OSError as exc:  # an unwritable cache: build into a private directory for this process only
        tmp = os.path.join(tempfile.mkdtemp(prefix="cflab_fused_"), name)
        target = Path(tmp)
        where = f"built {target} (cache {cache} unusable: {exc})"
    try:
        _compile(cc, flags, SOURCE, Path(tmp))
        if Path(tmp) != target:
            os.replace(tmp, target)  # atomic: a concurrent builder's rename leaves an equally complete file
        return target, where
    except (OSError, subprocess.SubprocessError) as exc:
        err = getattr(exc, "stderr", None)
        detail = err.decode(errors="replace").strip().splitlines()[-1:] if err else []
        return None, " ".join([f"build failed: {type(exc).__name__}: {exc}", *detail])
    finally:
        if Path(tmp) != target:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


class FusedLibrary:
    """The loaded kernels: :meth:`losses_gradients` and :meth:`combine`, per dtype."""

    def __init__(self, lib: ctypes.CDLL, path: Path):
        self.path = path
        self._lib = lib
        vp, lo = ctypes.c_void_p, ctypes.c_long
        self._fused, self._combine, self._stream = {}, {}, {}
        for dtype, suffix in ((np.dtype(np.float64), "f64"), (np.dtype(np.float32), "f32")):
            f = getattr(lib, f"cflab_fused_{suffix}")
            f.argtypes = [vp, lo, lo, vp, lo, lo, vp, vp, lo, lo, vp, lo, ctypes.c_int, vp, vp, vp, vp, vp]
            f.restype = None
            c = getattr(lib, f"cflab_combine_{suffix}")
            c.argtypes = [vp, vp, lo, lo, lo, vp]
            c.restype = None
            r = getattr(lib, f"cflab_stream_sum_{suffix}")
            r.argtypes = [vp, lo]
            r.restype = ctypes.c_double
            self._fused[dtype], self._combine[dtype], self._stream[dtype] = f, c, r

    def bind(self, X: np.ndarray, y: np.ndarray) -> tuple:
        """The kernel arguments describing ``X`` ``(m, n_max, d)`` and ``y`` ``(m, n_max)`` (strided views
        allowed, rows contiguous: :func:`layout_ok`), computed once; the caller keeps ``X`` and ``y`` alive."""
        if not layout_ok(X, y) or y.shape != X.shape[:2]:
            raise ValueError(f"X and y must be float32/float64 arrays of shapes (m, n_max, d) and (m, n_max) with "
                             f"contiguous rows, got {X.dtype} {X.shape} and {y.dtype} {y.shape}")
        it = X.itemsize
        return (self._fused[X.dtype], X.dtype, X.ctypes.data, X.strides[0] // it, X.strides[1] // it,
                y.ctypes.data, y.strides[0] // it, y.strides[1] // it, X.shape[2], X.shape[0], X.shape[1])

    @staticmethod
    def losses_gradients(data: tuple, clients: np.ndarray, rows: np.ndarray, models: np.ndarray, logistic: bool,
                         loss: np.ndarray, grad: np.ndarray | None, counter: np.ndarray | None = None,
                         only: np.ndarray | None = None) -> None:
        """Loss sums ``loss[i, j] = sum_r l(<x_ir, theta_j>, y_ir)`` over the ``rows[i]`` real rows of client
        ``clients[i]`` and, unless ``grad`` is ``None``, ``grad[i, j] = sum_r l'(<x_ir, theta_j>, y_ir) x_ir``,
        for the data bound by :meth:`bind`.  Every array is C-contiguous: ``clients``, ``rows`` int64,
        ``models`` ``(M, d)`` and ``grad`` ``(c, M, d)`` of the data's dtype, ``loss`` ``(c, M)`` float64.
        With ``counter`` (a zeroed int64 array of one element) several threads may make the same call at once
        and share the clients out dynamically.  With ``only`` (int64, one entry per client) client ``i`` forms
        just ``grad[i, only[i]]`` (all ``M`` where ``only[i] < 0``), bit-identical to the full computation.
        Releases the GIL while it runs.

        Every argument is checked here, at the call (``ValueError`` naming it): the kernel reads ``rows[i]`` rows
        of client ``clients[i]`` at fixed offsets, so a count or index beyond the bound arrays -- say a backend's
        ``n_samples`` reassigned after it was checked -- would read outside them (a segfault at best).  The
        checks cost O(clients), nothing beside the kernel's O(clients x rows x d x models).
        """
        fn, dtype, xp, sxc, sxr, yp, syc, syr, d, m, n_max = data
        c = _checked("clients", clients, np.int64, None, 1).shape[0]
        M = _checked("models", models, dtype, None, 2).shape[0]
        if models.shape[1] != d:
            raise ValueError(f"models must have shape (M, {d}) (d = {d} features of the bound data), got "
                             f"{models.shape}")
        _in_bounds("clients", clients, 0, m - 1, f"the {m} clients of the bound data")
        _checked("rows", rows, np.int64, (c,))
        _in_bounds("rows", rows, 0, n_max, f"the {n_max} rows a client of the bound data holds; rows are the "
                   "clients' sample counts, n_samples")
        _checked("loss", loss, np.float64, (c, M), write=True)
        if grad is not None:
            _checked("grad", grad, dtype, (c, M, d), write=True)
        if counter is not None:
            _checked("counter", counter, np.int64, (1,), write=True)
        if only is not None:
            _checked("only", only, np.int64, (c,))
            _in_bounds("only", only, None, M - 1, f"the {M} models (< 0: every model)")
        work = np.empty(8 * M, dtype=dtype)
        fn(xp, sxc, sxr, yp, syc, syr, clients.ctypes.data, rows.ctypes.data, len(clients), d, models.ctypes.data,
           M, int(logistic), loss.ctypes.data, None if grad is None else grad.ctypes.data, work.ctypes.data,
           None if counter is None else counter.ctypes.data, None if only is None else only.ctypes.data)

    def stream_sum(self, a: np.ndarray) -> float:
        """Sum of a contiguous float64/float32 array by a plain vector loop: a memory read ceiling for the
        benchmarks, measured with this library's compiler and flags."""
        a = np.ascontiguousarray(a)
        return float(self._stream[a.dtype](a.ctypes.data, a.size))

    def combine(self, grad: np.ndarray, coef: np.ndarray, G: np.ndarray) -> None:
        """``G[j] += sum_i coef[i, j] grad[i, j]`` in client order, skipping zero coefficients (float64 ``G``)."""
        if grad.dtype not in self._combine:
            raise ValueError(f"grad must be a float32 or float64 array, got {grad.dtype}")
        b, M, d = _checked("grad", grad, grad.dtype, None, 3).shape
        _checked("coef", coef, np.float64, (b, M))
        _checked("G", G, np.float64, (M, d), write=True)
        self._combine[grad.dtype](grad.ctypes.data, coef.ctypes.data, b, M, d, G.ctypes.data)


def _checked(name: str, a, dtype, shape: tuple | None, ndim: int | None = None, write: bool = False) -> np.ndarray:
    """``a`` if it is a C-contiguous ``dtype`` array of ``shape`` (or of ``ndim`` dimensions), writable where the
    kernel writes it; else ValueError naming ``name``."""
    ok = (isinstance(a, np.ndarray) and a.dtype == dtype and a.flags.c_contiguous and (not write or a.flags.writeable)
          and (a.shape == shape if shape is not None else a.ndim == ndim))
    if not ok:
        want = f"shape {shape}" if shape is not None else f"{ndim} dimension(s)"
        got = type(a).__name__
        if isinstance(a, np.ndarray):
            got = f"{a.dtype} {a.shape}" + ("" if a.flags.c_contiguous else ", not contiguous") \
                + ("" if a.flags.writeable or not write else ", read-only")
        raise ValueError(f"{name} must be a C-contiguous{' writable' if write else ''} {np.dtype(dtype).name} array "
                         f"of {want} for the compiled kernel, got {got}")
    return a


def _in_bounds(name: str, a: np.ndarray, low: int | None, high: int, what: str) -> None:
    """ValueError naming ``name`` and its first entry outside ``[low, high]``."""
    if not a.size:
        return
    bad = (a > high) if low is None else (a < low) | (a > high)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        lo = "-inf" if low is None else str(low)
        raise ValueError(f"{name} must lie in [{lo}, {high}] ({what}); got {name}[{i}] = {int(a[i])}: refused "
                         "before the compiled kernel reads outside its arrays")


def layout_ok(X: np.ndarray, y: np.ndarray) -> bool:
    """Whether the kernel can read ``X``/``y`` in place: float32/float64, rows contiguous, strides whole items."""
    if X.dtype not in (np.float32, np.float64) or y.dtype != X.dtype or X.ndim != 3 or y.ndim != 2:
        return False
    it = X.itemsize
    return (X.shape[2] <= 1 or X.strides[2] == it) and all(s % it == 0 and s >= 0 for s in X.strides + y.strides)


def _self_test(lib: FusedLibrary) -> str | None:
    """Compare the kernels with numpy on a small padded problem (both families, both dtypes); ``None`` if
    they agree, else what differed."""
    rng = np.random.default_rng(0)
    m, n, d = 3, 7, 13
    rows = np.array([7, 4, 6], dtype=np.int64)
    for dtype, tol in ((np.float64, 1e-10), (np.float32, 1e-3)):
        X = rng.standard_normal((m, n, d))
        X[np.arange(n)[None, :] >= rows[:, None]] = 0.0
        for logistic in (False, True):
            y = (rng.uniform(size=(m, n)) < 0.5).astype(float) if logistic else rng.standard_normal((m, n))
            models = rng.standard_normal((5, d))
            Xd, yd, md = X.astype(dtype), y.astype(dtype), models.astype(dtype)
            clients = np.array([2, 0], dtype=np.int64)
            loss = np.empty((2, 5))
            grad = np.empty((2, 5, d), dtype=dtype)
            lib.losses_gradients(lib.bind(Xd, yd), clients, rows[clients], md, logistic, loss, grad)
            part = np.empty_like(grad)
            lib.losses_gradients(lib.bind(Xd, yd), clients, rows[clients], md, logistic, np.empty_like(loss), part,
                                 only=np.array([3, -1], dtype=np.int64))
            if not (np.array_equal(part[0, 3], grad[0, 3]) and np.array_equal(part[1], grad[1])):
                return f"self-test failed: one-model gradients differ ({np.dtype(dtype).name}, logistic={logistic})"
            coef = np.array([[0.5, 0, 0, 2.0, 0], [0, 0, 1.0, 0, 0]])
            G = np.zeros((5, d))
            lib.combine(grad, coef, G)
            want_l, want_g = [], []
            for i in clients:
                Xi, yi = X[i, : rows[i]], y[i, : rows[i]]
                s = Xi @ models.T
                if logistic:
                    want_l.append((np.logaddexp(0.0, s) - yi[:, None] * s).sum(0))
                    want_g.append((1 / (1 + np.exp(-s)) - yi[:, None]).T @ Xi)
                else:
                    want_l.append(((s - yi[:, None]) ** 2).sum(0))
                    want_g.append(2 * (s - yi[:, None]).T @ Xi)
            want_G = np.einsum("ij,ijd->jd", coef, np.array(want_g))
            for got, want, what in ((loss, np.array(want_l), "losses"), (grad, np.array(want_g), "gradients"),
                                    (G, want_G, "combined gradients")):
                if not np.allclose(got, want, rtol=tol, atol=tol):
                    return f"self-test failed: {what} ({np.dtype(dtype).name}, logistic={logistic})"
    return None


def load() -> FusedLibrary | None:
    """The compiled kernels, built and self-tested on first call; ``None`` (and :func:`status` says why)
    when they cannot be had or ``CFLAB_FUSED=0``."""
    if os.environ.get("CFLAB_FUSED", "1").strip() == "0":
        return None
    if _state["loaded"]:
        return _state["lib"]
    with _lock:
        if not _state["loaded"]:
            lib, reason, path = None, "", None
            try:
                path, reason = _build()
                if path is not None:
                    cdll = ctypes.CDLL(str(path))
                    if cdll.cflab_fused_abi() != ABI:
                        raise OSError(f"{path} has ABI {cdll.cflab_fused_abi()}, expected {ABI}")
                    candidate = FusedLibrary(cdll, path)
                    failure = _self_test(candidate)
                    if failure:
                        reason = f"{failure} ({path})"
                    else:
                        lib = candidate
            except (OSError, AttributeError) as exc:  # a broken or foreign library file
                reason = f"cannot load {path}: {type(exc).__name__}: {exc}"
            _state.update(loaded=True, lib=lib, reason=reason, path=path)
    return _state["lib"]


def status() -> dict:
    """Whether the compiled kernels are in use, and why (for diagnostics and benchmark tables)."""
    if os.environ.get("CFLAB_FUSED", "1").strip() == "0":
        return {"available": False, "reason": "disabled by CFLAB_FUSED=0", "path": None}
    lib = load()
    return {"available": lib is not None, "reason": _state["reason"], "path": str(_state["path"] or "") or None}


_controller: dict = {}


def blas_threads() -> int:
    """Threads numpy's BLAS may use now (the smallest over the loaded BLAS libraries).

    The Monte Carlo engine, joblib's workers and ``threadpoolctl.threadpool_limits`` all pin BLAS threads;
    following that limit keeps the fused kernel from oversubscribing the cores a caller has budgeted.
    The controller is built once per process (about 0.5 ms); each query then costs microseconds.
    """
    pid = os.getpid()
    if _controller.get("pid") != pid:
        try:
            from threadpoolctl import ThreadpoolController

            libs = ThreadpoolController().select(user_api="blas").lib_controllers
        except Exception:  # threadpoolctl missing or failing: assume no budget for more threads
            libs = []
        _controller.update(pid=pid, libs=libs)
    counts = [lib.num_threads for lib in _controller["libs"]]
    return max(1, min(counts)) if counts else 1


_pool: dict = {}
_pool_lock = threading.Lock()


def run_parts(tasks: list) -> None:
    """Call the zero-argument ``tasks``, which share their work out among themselves (the kernel's shared
    counter): the first on this thread, the others on a persistent pool.

    The tasks are ctypes calls into the kernels, which release the GIL, so they run in parallel.  A task
    the pool has not started by the time the first one returns is cancelled (the first took its work), so
    on a busy machine the call costs no more than running alone.  The pool is rebuilt after a fork (a
    child cannot use its parent's threads).
    """
    if len(tasks) == 1:
        tasks[0]()
        return
    from concurrent.futures import ThreadPoolExecutor

    need = len(tasks) - 1
    with _pool_lock:  # callers on several threads (a threading joblib backend) share one pool
        if _pool.get("pid") != os.getpid() or _pool.get("size", 0) < need:
            old = _pool.get("executor") if _pool.get("pid") == os.getpid() else None
            _pool.update(pid=os.getpid(), size=need,
                         executor=ThreadPoolExecutor(max_workers=need, thread_name_prefix="cflab-fused"))
            if old is not None:
                old.shutdown(wait=False)  # its queued work still runs; new work goes to the larger pool
        executor = _pool["executor"]
    futures = [executor.submit(task) for task in tasks[1:]]
    try:
        tasks[0]()
    finally:
        for f in futures:
            if not f.cancel():
                f.result()
