"""What the server and the clients of :mod:`nets.flower` send each other.

A message's ``RecordDict`` holds the experiment (``EXPERIMENT``, the ``nets run`` parameters as JSON, so any
SuperNode can rebuild its partition), the action's settings (``CONFIG``) and the model rows it needs
(``ARRAYS``).  A reply holds ``METRICS`` (always the client's ``partition``, and the action's statistics) and, for
actions that return models or gradients, ``RESULT``.

=====================  ========================================  ==================================================
message type           sent                                      answered
=====================  ========================================  ==================================================
``query.describe``     the experiment                            sample counts, true cluster, the data's shapes
``query.losses``       model rows                                their losses on the client's training data
``train.update``       one model row, steps, step size           the row after the local steps
``train.local``        steps, step size (a start row or none)    the client's local model
``train.gradient``     model rows                                the gradient at each row
``evaluate.scores``    model rows, rule, the client's label      test loss and accuracy, the model it was scored by
=====================  ========================================  ==================================================

Model rows travel in the run's precision (float32 by default), so the numbers the clients see are the server's.
"""

from __future__ import annotations

import numpy as np
from flwr.app import Array, ArrayRecord

__all__ = ["ARRAYS", "CONFIG", "EXPERIMENT", "METRICS", "RESULT", "pack", "unpack"]

EXPERIMENT = "experiment"
CONFIG = "config"
ARRAYS = "models"
METRICS = "metrics"
RESULT = "result"


def pack(rows: np.ndarray) -> ArrayRecord:
    """A stack of model rows (or gradients) as an ``ArrayRecord`` of one array."""
    return ArrayRecord({"rows": Array(np.ascontiguousarray(rows))})


def unpack(record: ArrayRecord) -> np.ndarray:
    """The stack of rows of a record made by :func:`pack`."""
    return record["rows"].numpy()
