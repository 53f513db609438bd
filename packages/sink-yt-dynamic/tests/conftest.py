"""Fixtures: an emulated YT proxy per test and sinks pointed at it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from eosink_yt_dynamic import YtDynamicSink, create_output_table, read_table

pytest_plugins = ["eosink_yt_emulator.pytest_plugin"]

OUT = "//home/eosink/out"


def rows_schema(queue_id: bool = False) -> pa.Schema:
    fields = [
        ("tablet_index", pa.int64()),
        ("row_index", pa.int64()),
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
    ]
    if queue_id:
        fields.insert(0, ("queue_id", pa.string()))
    return pa.schema(fields)


def make_sink_for(emulator, path: str = OUT, **options) -> YtDynamicSink:
    """A sink on the emulator (fast client retries, no token lookups)."""
    return YtDynamicSink(
        proxy=emulator.url,
        path=path,
        proxy_discovery=False,
        client_config=emulator.client_config(),
        **options,
    )


@pytest.fixture
def yt(yt_emulator):
    return yt_emulator.client()


@pytest.fixture
def out_table(yt):
    create_output_table(yt, OUT, rows_schema())
    return OUT


def table_rows(yt, path: str = OUT) -> list[dict]:
    return read_table(yt, path)
