"""CSV values read back as the sink wrote them by the package's own reader
(``eosink_files.read_table``: pyarrow's CSV parser, told Spark's escaping) and the manifest
oracle (Spark's reader itself: ``test_spark_csv_quotes.py``)."""

from __future__ import annotations

import pyarrow as pa
from eosink_files import read_table
from eosink_files.sink import FilesSink
from files_helpers import run
from spark_manifest_oracle import read_committed
from test_spark_csv_quotes import ODD


def test_odd_values_read_back_by_the_package_reader(tmp_path):
    out = str(tmp_path / "out")
    ids = pa.array(range(len(ODD)), pa.int64())
    batch = pa.record_batch({"id": ids, "s": pa.array(ODD, pa.string())})
    assert run(FilesSink(path=out, format="csv"), 0, [[batch]]).status == "committed"
    want = sorted((i, v or None) for i, v in enumerate(ODD))  # "" reads back as null
    got = read_table(out).to_pylist()
    assert sorted((r["id"], r["s"]) for r in got) == want


def test_odd_values_without_line_breaks_read_back_by_the_oracle(tmp_path):
    """The oracle reads as Spark's reader with its default options, which cuts a value at a
    line break (``multiLine`` reads it whole)."""
    out = str(tmp_path / "out")
    values = [v for v in ODD if v is None or not any(b in v for b in "\r\n")]
    ids = pa.array(range(len(values)), pa.int64())
    batch = pa.record_batch({"id": ids, "s": pa.array(values, pa.string())})
    assert run(FilesSink(path=out, format="csv"), 0, [[batch]]).status == "committed"
    table, _ = read_committed(out, batch.schema, format="csv")
    want = sorted((i, v or None) for i, v in enumerate(values))
    assert sorted(zip(table.column("id").to_pylist(), table.column("s").to_pylist())) == want
