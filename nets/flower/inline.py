"""A Grid that runs a ClientApp in this process: strategies and ClientApps tested and timed without Ray.

:class:`InlineGrid` has the methods of Flower's ``Grid`` that a strategy uses (``get_node_ids``,
``push_messages``, ``pull_messages``, ``send_and_receive``); each pushed message is handed to the ``ClientApp``
of its node (``app(message, context)``, with the node's ``Context``: ``partition-id`` and ``num-partitions`` in
its node config, as Flower's simulation gives them) when it is pulled.  A ClientApp that raises answers with an
error reply, as in Flower; ``drop(node)`` makes a node silent (its messages get no answer).  No serialisation,
no queue, no actor: what a strategy costs in a round beyond its clients' own work.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from flwr.app import Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity

__all__ = ["InlineGrid"]


class InlineGrid:
    """``num_nodes`` nodes (ids ``1..num_nodes``, partition ``i - 1``) answering with ``app``.

    ``fault(message, node) -> "fail" | "drop" | None`` (optional) lets a test make a node fail (an error reply) or
    stay silent for one message.
    """

    def __init__(self, app: ClientApp, num_nodes: int, *, run_config: dict | None = None,
                 fault: Callable[[Message, int], str | None] | None = None):
        self.app = app
        self.nodes = list(range(1, int(num_nodes) + 1))
        self.contexts = {n: Context(run_id=1, node_id=n, node_config={"partition-id": n - 1,
                                                                      "num-partitions": len(self.nodes)},
                                    state=RecordDict(), run_config=dict(run_config or {})) for n in self.nodes}
        self.fault = fault
        self.silent: set[int] = set()
        self.sent: list[Message] = []  # every message pushed, in order
        self._pending: dict[str, Message] = {}
        for name, value in (("run_id", 1), ("task_id", 1), ("node_id", 0)):  # Message() needs the task's identity
            try:
                getattr(TaskIdentity, name)
            except RuntimeError:
                setattr(TaskIdentity, name, value)

    def drop(self, node: int) -> None:
        """From now on ``node`` answers nothing."""
        self.silent.add(int(node))

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        ids = []
        for msg in messages:
            msg.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            self._pending[msg.metadata.message_id] = msg
            self.sent.append(msg)
            ids.append(msg.metadata.message_id)
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        out = []
        for mid in list(message_ids):
            msg = self._pending.pop(mid, None)
            if msg is None:
                continue
            node = int(msg.metadata.dst_node_id)
            what = self.fault(msg, node) if self.fault is not None else None
            if node in self.silent or what == "drop":
                continue
            if what == "fail":
                reply = Message(Error(code=0, reason=f"node {node}: injected failure"), reply_to=msg)
            else:
                try:
                    reply = self.app(msg, self.contexts[node])
                except Exception as exc:  # a failing ClientApp is an error reply, as in Flower
                    reply = Message(Error(code=0, reason=f"{type(exc).__name__}: {exc}"), reply_to=msg)
            reply.metadata.__dict__["_message_id"] = str(uuid.uuid4())
            out.append(reply)
        return out

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        return self.pull_messages(self.push_messages(messages))
