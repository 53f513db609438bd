"""Spark's own reader reads exactly what the sink committed, after compactions, expiry and a
torn log file rewritten by the replay (``spark.read.parquet`` honours ``_spark_metadata``)."""

from __future__ import annotations

import os

from eosink_files.log_view import forget_views
from eosink_files.sink import FilesSink
from files_helpers import rows, run


def expected(batches):
    return sorted(i for b in batches for p in range(2) for i in rows(b, p).column("id").to_pylist())


def spark_ids(spark, out):
    return sorted(r.id for r in spark.read.parquet(out).select("id").collect())


def test_compacted_and_expired_log(spark, tmp_path):
    out = str(tmp_path / "out")
    for b in range(35):
        assert run(FilesSink(path=out, log_cleanup_delay_s=0), b).status == "committed"
    names = os.listdir(os.path.join(out, "_spark_metadata"))
    assert "29.compact" in names and "0" not in names  # compacted and expired
    assert spark_ids(spark, out) == expected(range(35))


def test_torn_log_file_rewritten_by_the_replay(spark, tmp_path):
    out = str(tmp_path / "out")
    for b in range(10):
        run(FilesSink(path=out, single_writer=True), b)
    compact = os.path.join(out, "_spark_metadata", "9.compact")
    with open(compact, "rb") as f:
        lines = f.read().split(b"\n")
    with open(compact, "wb") as f:  # torn after the proofs and one file
        f.write(b"\n".join(lines[:12]))
    forget_views()
    assert run(FilesSink(path=out, single_writer=True), 9).status == "committed"
    assert spark_ids(spark, out) == expected(range(10))
