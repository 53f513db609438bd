"""Queues and queue consumers on the emulator (or a cluster), created through a real client as
YT documents them: the setup that the tests and benchmarks of queue readers share.

A queue is an ordered dynamic table; a consumer is a sorted dynamic table of the documented
schema with ``treat_as_queue_consumer``. Both are created with their parents and mounted.
"""

from __future__ import annotations

from typing import Any

#: A queue consumer's schema, as YT documents it: one offset per queue partition.
CONSUMER_SCHEMA = [
    {"name": "queue_cluster", "type": "string", "sort_order": "ascending", "required": True},
    {"name": "queue_path", "type": "string", "sort_order": "ascending", "required": True},
    {"name": "partition_index", "type": "uint64", "sort_order": "ascending", "required": True},
    {"name": "offset", "type": "uint64", "required": True},
    {"name": "meta", "type": "any"},
]


def create_queue(
    client: Any, path: str, schema: list[dict[str, Any]], tablets: int, mount: bool = True
) -> None:
    """An ordered dynamic table of ``schema`` in ``tablets`` tablets, mounted unless ``mount``
    is false."""
    client.create(
        "table",
        path,
        recursive=True,
        attributes={"dynamic": True, "tablet_count": tablets, "schema": schema},
    )
    if mount:
        client.mount_table(path, sync=True)


def create_consumer(client: Any, path: str) -> None:
    """A mounted consumer: sorted dynamic, :data:`CONSUMER_SCHEMA`, ``treat_as_queue_consumer``."""
    client.create(
        "table",
        path,
        recursive=True,
        attributes={"dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True},
    )
    client.mount_table(path, sync=True)


def consumer_offsets(client: Any, path: str) -> dict[tuple[str, int], int]:
    """The consumer's offsets: ``(queue path, partition index) -> offset``."""
    rows = client.select_rows(f"queue_path, partition_index, [offset] from [{path}]")
    return {(r["queue_path"], int(r["partition_index"])): int(r["offset"]) for r in rows}
