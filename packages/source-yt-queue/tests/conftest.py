"""Fixtures: an emulated YT proxy per test and queues on it."""

from __future__ import annotations

pytest_plugins = ["eosink_yt_emulator.pytest_plugin"]

SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"},
]


def make_queue(yt, path: str, tablets: int = 4, schema=SCHEMA) -> None:
    yt.create(
        "table",
        path,
        recursive=True,
        attributes={"dynamic": True, "tablet_count": tablets, "schema": schema},
    )
    yt.mount_table(path, sync=True)


def append(yt, path: str, tablet: int, first_id: int, count: int) -> None:
    yt.insert_rows(
        path,
        [
            {"$tablet_index": tablet, "id": i, "name": f"n{i}", "amount": i / 4}
            for i in range(first_id, first_id + count)
        ],
    )


CONSUMER_SCHEMA = [
    {"name": "queue_cluster", "type": "string", "sort_order": "ascending", "required": True},
    {"name": "queue_path", "type": "string", "sort_order": "ascending", "required": True},
    {"name": "partition_index", "type": "uint64", "sort_order": "ascending", "required": True},
    {"name": "offset", "type": "uint64", "required": True},
    {"name": "meta", "type": "any"},
]


def make_consumer(yt, path: str) -> None:
    """A consumer as YT documents it: sorted dynamic, its schema, treat_as_queue_consumer."""
    yt.create(
        "table",
        path,
        recursive=True,
        attributes={"dynamic": True, "schema": CONSUMER_SCHEMA, "treat_as_queue_consumer": True},
    )
    yt.mount_table(path, sync=True)


def consumer_offsets(yt, path: str) -> dict[tuple[str, int], int]:
    rows = yt.select_rows(f"queue_path, partition_index, [offset] from [{path}]")
    return {(r["queue_path"], int(r["partition_index"])): int(r["offset"]) for r in rows}


def source_options(emulator, **extra) -> dict[str, str]:
    """Spark options of the source pointed at the emulator."""
    import json

    return {
        "proxy": emulator.url,
        "proxyDiscovery": "false",
        "clientConfig": json.dumps(emulator.client_config()),
        **{k: str(v) for k, v in extra.items()},
    }
