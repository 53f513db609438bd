"""Fixtures: an emulated YT proxy per test and queues on it."""

from __future__ import annotations

from eosink_yt_emulator.queue_tables import create_queue

pytest_plugins = ["eosink_yt_emulator.pytest_plugin"]

SCHEMA = [
    {"name": "id", "type": "int64"},
    {"name": "name", "type": "string"},
    {"name": "amount", "type": "double"},
]


def make_queue(yt, path: str, tablets: int = 4) -> None:
    """A mounted queue of :data:`SCHEMA` (the rows :func:`append` writes)."""
    create_queue(yt, path, SCHEMA, tablets)


def append(yt, path: str, tablet: int, first_id: int, count: int) -> None:
    yt.insert_rows(
        path,
        [
            {"$tablet_index": tablet, "id": i, "name": f"n{i}", "amount": i / 4}
            for i in range(first_id, first_id + count)
        ],
    )


def source_options(emulator, **extra) -> dict[str, str]:
    """Spark options of the source pointed at the emulator."""
    import json

    return {
        "proxy": emulator.url,
        "proxyDiscovery": "false",
        "clientConfig": json.dumps(emulator.client_config()),
        **{k: str(v) for k, v in extra.items()},
    }
