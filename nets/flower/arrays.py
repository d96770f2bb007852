"""Model state on Flower's wire: ``ArrayRecord`` state_dicts, one per cluster, and their flat vectors on the server.

A clustered strategy keeps ``k`` models of one architecture.  In Flower they travel as ``ArrayRecord``s of the
model's ``state_dict`` (``ArrayRecord(model.state_dict())``, the arrays under their own names); the ``k`` models
of a strategy travel together as one record whose keys carry the cluster, ``cluster{j}/{name}``
(:func:`stack_clusters`, :func:`split_clusters`): the ``arrays`` of ``Strategy.start`` and of the
``query.losses`` message.  A strategy's result (``Result.arrays``, and what ``evaluate_fn`` receives) holds one
``ArrayRecord`` per cluster in a ``RecordDict`` with the assignment (:func:`cluster_models`).  On the server, the
clustering steps of :mod:`synth.algorithms` work on flat float64 vectors: :class:`Layout` turns a record into one
and back, keeping every array's name, shape and dtype.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

__all__ = ["ASSIGNMENT", "Layout", "PARTITIONS", "cluster_key", "cluster_models", "cluster_name", "cluster_state_dict",
           "replicate", "split_clusters", "stack_clusters"]

_KEY = re.compile(r"cluster(\d+)/(.+)", re.S)
_NAME = re.compile(r"cluster-(\d+)")
ASSIGNMENT = "assignment"  # the ConfigRecord of cluster_models: str(node id) -> its cluster (-1: none)
PARTITIONS = "partitions"  # str(node id) -> partition-id, for the nodes that report one


def cluster_name(j: int) -> str:
    """The key of cluster ``j``'s ``ArrayRecord`` in :func:`cluster_models`: ``cluster-{j}``."""
    return f"cluster-{int(j)}"


def cluster_models(records: Sequence[ArrayRecord], assignment: dict[int, int] | None = None,
                   partitions: dict[int, int] | None = None) -> RecordDict:
    """The cluster models in Flower's records: a ``RecordDict`` holding one ``ArrayRecord`` (a ``state_dict``)
    per cluster under ``cluster-0``, ``cluster-1``, ..., the ``ConfigRecord`` ``assignment`` (each node's cluster,
    keys the node ids as strings, -1 for none) and ``partitions`` (each node's ``partition-id``, where known).

    The form of the clustered strategies' ``Result.arrays`` and of what their ``evaluate_fn`` receives."""
    out = RecordDict({cluster_name(j): record for j, record in enumerate(records)})
    out[ASSIGNMENT] = ConfigRecord({str(int(n)): int(c) for n, c in sorted((assignment or {}).items())})
    out[PARTITIONS] = ConfigRecord({str(int(n)): int(p) for n, p in sorted((partitions or {}).items())})
    return out


def cluster_state_dict(models, j: int) -> dict:
    """Cluster ``j``'s model as a PyTorch ``state_dict`` (``model.load_state_dict(cluster_state_dict(result, j))``).

    ``models``: a clustered strategy's ``Result``, its ``arrays`` (:func:`cluster_models`), or a stacked record
    (:func:`stack_clusters`).  IndexError for a cluster that does not exist."""
    records = split_clusters(getattr(models, "arrays", models))
    if not 0 <= int(j) < len(records):
        raise IndexError(f"cluster {j} does not exist: the models hold {len(records)} clusters (0..{len(records) - 1})")
    return records[int(j)].to_torch_state_dict()


def cluster_key(j: int, name: str) -> str:
    """The key of array ``name`` of cluster model ``j`` in a stacked record."""
    return f"cluster{int(j)}/{name}"


def stack_clusters(records: Sequence[ArrayRecord]) -> ArrayRecord:
    """One ``ArrayRecord`` holding the cluster models ``records`` (keys ``cluster{j}/{name}``)."""
    out = ArrayRecord()
    for j, record in enumerate(records):
        for name, array in record.items():
            out[cluster_key(j, name)] = array
    return out


def split_clusters(record: ArrayRecord | RecordDict) -> list[ArrayRecord]:
    """The cluster models of a stacked record, in cluster order; a plain state_dict record is one model; the
    ``cluster-{j}`` records of a :func:`cluster_models` ``RecordDict`` (a clustered strategy's ``Result.arrays``).

    ValueError when some keys carry a cluster and others do not, when the clusters are not ``0..k-1``, or when
    two clusters hold different arrays.
    """
    if isinstance(record, RecordDict):
        found = sorted((int(m.group(1)), key) for key in record.array_records
                       if (m := _NAME.fullmatch(key)) is not None)
        if [j for j, _ in found] != list(range(len(found))):
            raise ValueError(f"the records hold clusters {[j for j, _ in found]}; cluster models must be numbered "
                             f"0..{len(found) - 1}")
        return [record[key] for _, key in found]
    groups: dict[int, ArrayRecord] = {}
    plain = []
    for key, array in record.items():
        found = _KEY.fullmatch(key)
        if found is None:
            plain.append(key)
            continue
        groups.setdefault(int(found.group(1)), ArrayRecord())[found.group(2)] = array
    if not groups:
        return [record] if len(record) else []
    if plain:
        raise ValueError(f"arrays mix cluster keys (cluster<j>/<name>) with plain ones ({plain[0]!r}); pass one "
                         "state_dict record or the records of stack_clusters")
    if sorted(groups) != list(range(len(groups))):
        raise ValueError(f"arrays hold clusters {sorted(groups)}; stacked cluster models must be numbered "
                         f"0..{len(groups) - 1}")
    names = list(groups[0].keys())
    for j in range(1, len(groups)):
        if list(groups[j].keys()) != names:
            raise ValueError(f"cluster {j}'s arrays differ from cluster 0's: every cluster model must have the "
                             "same state_dict keys")
    return [groups[j] for j in range(len(groups))]


class Layout:
    """The order, shapes and dtypes of a model's arrays: record <-> flat float64 vector of ``n_params`` entries.

    Every array of the record takes part (parameters and buffers alike), in the record's order, each array of any
    rank (0-d included) coming back in its own shape and dtype.  :attr:`integer` marks the entries of the
    integer and boolean arrays (e.g. BatchNorm's ``num_batches_tracked``), which the strategies do not average
    (:mod:`nets.flower.clustered`).
    """

    def __init__(self, record: ArrayRecord):
        if not len(record):
            raise ValueError("initial_arrays is empty: pass ArrayRecord(model.state_dict()) (or one record per "
                             "cluster, stacked with stack_clusters)")
        self.keys = list(record.keys())
        arrays = [record[key].numpy() for key in self.keys]
        self.shapes = [a.shape for a in arrays]
        self.dtypes = [a.dtype for a in arrays]
        for key, dtype in zip(self.keys, self.dtypes, strict=True):
            if not (np.issubdtype(dtype, np.number) or dtype == np.bool_):
                raise ValueError(f"array {key!r} has dtype {dtype}; a model's arrays must be numeric")
        self.offsets = np.concatenate([[0], np.cumsum([a.size for a in arrays])]).astype(np.int64)
        self.n_params = int(self.offsets[-1])
        self.integer = np.zeros(self.n_params, dtype=bool)
        for i, dtype in enumerate(self.dtypes):
            if not np.issubdtype(dtype, np.floating):
                self.integer[self.offsets[i]:self.offsets[i + 1]] = True

    def flatten(self, record: ArrayRecord) -> np.ndarray:
        """The record's arrays as one float64 vector; ValueError naming a missing, extra or misshapen array."""
        if set(record.keys()) != set(self.keys):
            missing = [k for k in self.keys if k not in record]
            extra = [k for k in record.keys() if k not in self.keys]
            what = f"lacks {missing[0]!r}" if missing else f"has an unknown array {extra[0]!r}"
            raise ValueError(f"a model record {what}: every model must have the arrays of initial_arrays")
        out = np.empty(self.n_params)
        for i, key in enumerate(self.keys):
            a = record[key].numpy()
            if a.shape != self.shapes[i]:
                raise ValueError(f"array {key!r} has shape {a.shape}, expected {self.shapes[i]}")
            out[self.offsets[i]:self.offsets[i + 1]] = a.ravel()
        return out

    def unflatten(self, vector: np.ndarray) -> ArrayRecord:
        """The model record of a flat vector, each array in its own shape and dtype."""
        vector = np.asarray(vector, dtype=np.float64)
        if vector.shape != (self.n_params,):
            raise ValueError(f"a model vector must have shape ({self.n_params},), got {vector.shape}")
        out = ArrayRecord()
        for i, key in enumerate(self.keys):
            part = vector[self.offsets[i]:self.offsets[i + 1]].reshape(self.shapes[i])
            if not np.issubdtype(self.dtypes[i], np.floating):
                part = np.rint(part)
            out[key] = Array(_contiguous(part.astype(self.dtypes[i])))
        return out

    def stack(self, records: Sequence[ArrayRecord]) -> np.ndarray:
        """``(len(records), n_params)``."""
        return np.stack([self.flatten(r) for r in records]) if len(records) else np.zeros((0, self.n_params))

    def record(self, models: np.ndarray) -> ArrayRecord:
        """The stacked record of the rows of ``models`` (``(k, n_params)``)."""
        return stack_clusters([self.unflatten(row) for row in np.asarray(models)])


def replicate(record: ArrayRecord, k: int, rng: np.random.Generator) -> list[ArrayRecord]:
    """``k`` cluster models from one: the record itself, then copies whose floating arrays have their entries
    permuted, each copy with its own draw of ``rng``.

    For the i.i.d. initialisations of torch's layers (uniform or normal weights and biases) a permutation of a
    tensor's entries is a fresh draw from the same distribution, so the copies are independent starts of the same
    scheme without the model's code; constant arrays (zero biases, BatchNorm's ones) stay as they are.
    """
    out = [record]
    for _ in range(1, k):
        copy = ArrayRecord()
        for key, array in record.items():
            a = array.numpy()
            if np.issubdtype(a.dtype, np.floating) and a.size > 1:
                a = rng.permutation(a.ravel()).reshape(a.shape)
            copy[key] = Array(_contiguous(a))
        out.append(copy)
    return out


def _contiguous(a) -> np.ndarray:
    """``a`` C-contiguous in its own shape (``np.ascontiguousarray`` turns a 0-d array into shape ``(1,)``)."""
    return np.asarray(a, order="C")
