"""The query's YT consumer: checked and registered when the query starts, advanced after commits.

A consumer is a sorted dynamic table with the schema YT documents (``queue_cluster``,
``queue_path``, ``partition_index``, ``offset``) and ``@treat_as_queue_consumer=%true``. Its
offsets are for YT (trimming waits for vital consumers, monitoring shows the lag); the query's
checkpoint stays the source of truth for what a replay reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from eosink.logs import get_logger
from eosink.plugin import ConfigurationError

from eosink_yt_queue.offsets import Tablet

log = get_logger("eosink.yt_queue")

COLUMNS = ("queue_cluster", "queue_path", "partition_index", "offset")
_ATTRIBUTES = ["type", "dynamic", "sorted", "tablet_state", "schema", "treat_as_queue_consumer"]


def _how_to_create(path: str) -> str:
    return (
        f"create it as YT documents a consumer (a sorted dynamic table with the columns "
        f"{', '.join(COLUMNS)} and @treat_as_queue_consumer=%true, e.g. `yt create "
        f"queue_consumer {path}`) and mount it"
    )


def check(client: Any, path: str) -> None:
    """A clear error unless ``path`` is a mounted consumer table."""
    from yt.wrapper.errors import YtResponseError

    try:
        attrs = client.get(f"{path}/@", attributes=_ATTRIBUTES)
    except YtResponseError as exc:
        if exc.is_resolve_error():
            raise ConfigurationError(
                f"option consumerPath: consumer {path} does not exist; {_how_to_create(path)}"
            ) from None
        raise
    columns = {c["name"] for c in attrs.get("schema") or []}
    if (
        attrs.get("type") != "table"
        or not attrs.get("dynamic")
        or not attrs.get("sorted")
        or not set(COLUMNS) <= columns
        or not attrs.get("treat_as_queue_consumer")
    ):
        raise ConfigurationError(
            f"option consumerPath: {path} is not a queue consumer; {_how_to_create(path)}"
        )
    if attrs.get("tablet_state") != "mounted":
        raise ConfigurationError(
            f"option consumerPath: consumer {path} is {attrs.get('tablet_state')!r}, not "
            f"mounted: `yt mount-table --sync {path}`"
        )


def register(client: Any, path: str, queues: Iterable[str], vital: bool) -> None:
    """Register the consumer with every queue it is not registered with yet. A registration
    publishes no progress (a vital consumer without offsets holds trimming at row 0)."""
    registered = {
        str(r["queue_path"]) for r in client.list_queue_consumer_registrations(consumer_path=path)
    }
    for queue in queues:
        if queue not in registered:
            client.register_queue_consumer(queue, path, vital=vital)
            log.info("yt_queue.consumer_registered", consumer=path, queue=queue, vital=vital)


def advance(client: Any, path: str, offsets: Mapping[Tablet, int]) -> None:
    """Set the consumer's offset of every tablet in ``offsets`` (the next row to read)."""
    for (queue, tablet), row in sorted(offsets.items()):
        client.advance_consumer(path, queue, tablet, old_offset=None, new_offset=row)
