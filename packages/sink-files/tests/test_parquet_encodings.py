"""The arrow file writer's Parquet encodings: a column whose first rows repeat no value is
written without a dictionary (eosink.encodings), every other column keeps one; the rows and the
footer statistics are those of pyarrow's default encodings."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
from files_helpers import run

from eosink_files import committed_files
from eosink_files.sink import FilesSink


def batch(start: int, rows: int) -> pa.RecordBatch:
    ids = range(start, start + rows)
    return pa.record_batch(
        {
            "id": pa.array(ids, pa.int64()),
            "country": pa.array([f"c{i % 50}" for i in ids]),
        }
    )


def test_unique_columns_are_written_plain_and_read_back_the_same(tmp_path):
    out = str(tmp_path / "out")
    run(FilesSink(path=out, file_writer="arrow"), 0, [[batch(0, 5_000), batch(5_000, 5_000)]])
    (written,) = committed_files(out)
    path = os.path.join(out, written.relpath)
    metadata = pq.ParquetFile(path).metadata
    group = metadata.row_group(0)
    assert "RLE_DICTIONARY" not in group.column(0).encodings  # id: no value twice
    assert "RLE_DICTIONARY" in group.column(1).encodings  # country: 50 values
    assert group.column(0).statistics.min == 0 and group.column(0).statistics.max == 9_999
    table = pq.read_table(path)
    assert table.num_rows == 10_000 and table.column("country").to_pylist()[:2] == ["c0", "c1"]
