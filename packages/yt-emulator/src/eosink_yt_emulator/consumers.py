"""Queue consumers: registrations, ``advance_consumer`` and ``pull_consumer``.

Shapes follow https://ytsaurus.tech/docs/en/user-guide/dynamic-tables/queues and ytsaurus'
integration tests of the queue commands: a consumer is a sorted dynamic table keyed by
``(queue_cluster, queue_path, partition_index)`` with an ``offset`` column (the first row not
processed); ``advance_consumer`` writes that row in a tablet transaction, and with
``old_offset`` fails with ConsumerOffsetConflict (3100) unless the stored offset (0 when there
is no row) equals it; ``pull_consumer`` reads like ``pull_queue`` but only for a consumer
registered with the queue (authorization error 901 otherwise); registrations are listed with
paths as ``<cluster=...>"//path"``. The emulator is one cluster, named :data:`CLUSTER`.
Called with the state lock held.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any

from .errors import RESOLVE_ERROR, YtError
from .yson import ENTITY, Attributed, Uint64, unwrap

if TYPE_CHECKING:
    from .state import EmulatorState

CLUSTER = "primary"
CONSUMER_OFFSET_CONFLICT = 3100
AUTHORIZATION_ERROR = 901


def _path(value: Any) -> str:
    """A queue or consumer path as text, without a ``<cluster>:`` prefix of this cluster."""
    text = str(unwrap(value)[0])
    if text.startswith(CLUSTER + ":"):
        text = text[len(CLUSTER) + 1 :]
    return text


class QueueConsumers:
    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        #: (queue path, consumer path) -> {"vital": bool, "partitions": list | None}
        self.registrations: dict[tuple[str, str], dict] = {}

    def _existing(self, value: Any, what: str) -> str:
        """The registration of ``consumer`` for ``queue``, or a resolve error."""
        path = _path(value)
        _, rest, _, text = self.state.cypress.resolve(path, None, missing_ok=True)
        if rest:
            raise YtError(f"Failed to resolve {what} path {path}", RESOLVE_ERROR, {"path": path})
        return text

    def register(self, params: dict[str, Any]) -> dict[str, Any]:
        """``register_queue_consumer``."""
        queue = self._existing(params["queue_path"], "queue")
        consumer = self._existing(params["consumer_path"], "consumer")
        self.registrations[(queue, consumer)] = {
            "vital": bool(params.get("vital", False)),
            "partitions": params.get("partitions"),
        }
        return {}

    def unregister(self, params: dict[str, Any]) -> dict[str, Any]:
        """``unregister_queue_consumer``."""
        key = (_path(params["queue_path"]), _path(params["consumer_path"]))
        if self.registrations.pop(key, None) is None:
            raise YtError(f"Consumer {key[1]} is not registered for queue {key[0]}", RESOLVE_ERROR)
        return {}

    def list(self, params: dict[str, Any]) -> list[Any]:
        """``list_queue_consumer_registrations``, optionally of one queue or consumer."""
        queue = _path(params["queue_path"]) if params.get("queue_path") else None
        consumer = _path(params["consumer_path"]) if params.get("consumer_path") else None
        return [
            {
                "queue_path": Attributed(q, {"cluster": CLUSTER}),
                "consumer_path": Attributed(c, {"cluster": CLUSTER}),
                "vital": r["vital"],
                "partitions": ENTITY if r["partitions"] is None else r["partitions"],
            }
            for (q, c), r in sorted(self.registrations.items())
            if queue in (None, q) and consumer in (None, c)
        ]

    def advance(self, params: dict[str, Any]) -> dict[str, Any]:
        """``advance_queue_consumer``: move a partition's offset, checking the old one if given."""
        consumer = _path(params["consumer_path"])
        queue = _path(params["queue_path"])
        if not params.get("client_side", True):
            self._existing(queue, "queue")
        dynamic = self.state.dynamic
        key = {
            "queue_cluster": CLUSTER,
            "queue_path": queue,
            "partition_index": Uint64(int(params["partition_index"])),
        }
        old = params.get("old_offset")
        if old is not None:
            found = dynamic.lookup({"path": consumer}, [key])
            current = int(found[0]["offset"]) if found and found[0].get("offset") is not None else 0
            if current != int(old):
                raise YtError(
                    f"Offset conflict at partition {key['partition_index']} of consumer "
                    f"{consumer}: "
                    f"expected offset {int(old)}, found offset {int(current)}",
                    CONSUMER_OFFSET_CONFLICT,
                    {"expected_offset": int(old), "current_offset": current},
                )
        row = {**key, "offset": Uint64(int(params["new_offset"]))}
        tx = {"transaction_id": params["transaction_id"]} if params.get("transaction_id") else {}
        dynamic.modify({"path": consumer, **tx}, [row], "insert")
        return {}

    def pull(self, params: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        """``pull_consumer``: rows of a queue partition from an offset."""
        queue = _path(params["queue_path"])
        consumer = _path(params["consumer_path"])
        if (queue, consumer) not in self.registrations:
            raise YtError(
                f"Consumer {consumer} is not registered for queue {queue}",
                AUTHORIZATION_ERROR,
            )
        offset = params.get("offset")
        if offset is None:
            key = {
                "queue_cluster": CLUSTER,
                "queue_path": queue,
                "partition_index": Uint64(int(params.get("partition_index", 0))),
            }
            found = self.state.dynamic.lookup({"path": consumer}, [key])
            offset = int(found[0]["offset"]) if found else 0
        return self.state.dynamic.pull_queue({**params, "queue_path": queue, "offset": offset})
