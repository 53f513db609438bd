"""A batch's end offsets, read from the checkpoint's offset log as Spark writes it: a version
line, the batch's metadata, then one line per source (its offset JSON, or ``-``)."""

from __future__ import annotations

import json

import pytest

from eosink.errors import ConfigurationError
from eosink.spark.checkpoint import batch_offsets, session_storage_options

METADATA = {
    "batchWatermarkMs": 0,
    "batchTimestampMs": 1700000000000,
    "conf": {"spark.sql.shuffle.partitions": "4"},
}


def write_offsets(checkpoint, batch_id: int, *sources: object) -> None:
    """``offsets/<batch id>`` the way Spark's OffsetSeqLog writes it (no trailing newline)."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    lines = ["v1", json.dumps(METADATA)]
    lines += ["-" if s is None else json.dumps(s, separators=(",", ":")) for s in sources]
    (folder / str(batch_id)).write_text("\n".join(lines), encoding="utf-8")


def test_each_sources_offset_line_of_the_batch_comes_back_parsed(tmp_path):
    queue = {"v": 1, "queues": {"//q": {"0": 12, "1": 7}}, "consumer": "//c"}
    write_offsets(tmp_path, 0, {"v": 1, "queues": {"//q": {"0": 3, "1": 0}}}, None)
    write_offsets(tmp_path, 1, queue, {"logOffset": 5})
    assert batch_offsets(str(tmp_path), 1) == [queue, {"logOffset": 5}]
    assert batch_offsets(str(tmp_path), 0) == [{"v": 1, "queues": {"//q": {"0": 3, "1": 0}}}, None]
    assert batch_offsets(f"file:{tmp_path}", 1) == [queue, {"logOffset": 5}]


def test_a_missing_or_foreign_entry_is_a_clear_error(tmp_path):
    write_offsets(tmp_path, 0, {"a": 1})
    with pytest.raises(ConfigurationError, match="no offset log entry for batch 3"):
        batch_offsets(str(tmp_path), 3)
    (tmp_path / "offsets" / "1").write_text("not an offset log", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not an entry of Spark's offset log"):
        batch_offsets(str(tmp_path), 1)
    (tmp_path / "offsets" / "2").write_text("v1\n{}\n{broken", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not JSON"):
        batch_offsets(str(tmp_path), 2)


def test_a_local_checkpoint_needs_no_storage_options(tmp_path):
    assert session_storage_options(str(tmp_path)) == {}
