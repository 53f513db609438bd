"""What Spark's writer staged is published only as its committed task attempts left it.

``stage_dataframe`` lets Spark write a batch into a staging folder, then hands the sink the part
files to publish. Spark's job commit moves the committed task attempts' files into the folder
and removes ``_temporary``; an attempt that was not committed (a speculative copy or a killed
task that kept writing) can still leave part files under ``_temporary/``, and an output
committer that commits tasks in place (algorithm 2) can leave a failed attempt's file among the
committed ones. The folders here are laid out as Spark's ``FileOutputCommitter`` lays them out.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eosink.errors import StagedRowsMismatchError
from eosink.spark.staging import check_staged_rows, committed_part_files

JOB = "5f0c6a8e-2b1e-4d5c-9a57-0c1d2e3f4a5b"
ATTEMPT = "attempt_202611250012_0003_m_000000_7"


def parquet(path: Path, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(range(rows), pa.int64())}), path)


def test_files_of_an_attempt_that_was_not_committed_are_not_staged(tmp_path: Path) -> None:
    parquet(tmp_path / f"part-00000-{JOB}-c000.snappy.parquet", 3)
    parquet(tmp_path / "day=1" / f"part-00001-{JOB}.c000.snappy.parquet", 2)
    parquet(tmp_path / "_c=2" / f"part-00001-{JOB}.c000.snappy.parquet", 1)  # a partition
    leftover = f"_temporary/0/_temporary/{ATTEMPT}/part-00000-{JOB}-c000.snappy.parquet"
    parquet(tmp_path / leftover, 3)
    parquet(tmp_path / ".spark-staging-1" / f"part-00002-{JOB}.c000.snappy.parquet", 3)
    files = committed_part_files(str(tmp_path))
    assert sorted(f.relpath for f in files) == [
        f"_c=2/part-00001-{JOB}.c000.snappy.parquet",
        f"day=1/part-00001-{JOB}.c000.snappy.parquet",
        f"part-00000-{JOB}-c000.snappy.parquet",
    ]
    check_staged_rows(str(tmp_path), files, "parquet", 6)


def test_a_row_count_other_than_the_counted_one_is_refused(tmp_path: Path) -> None:
    parquet(tmp_path / f"part-00000-{JOB}-c000.snappy.parquet", 3)
    parquet(tmp_path / f"part-00000-{JOB}-attempt-7-c000.snappy.parquet", 3)  # in place
    files = committed_part_files(str(tmp_path))
    with pytest.raises(StagedRowsMismatchError, match=r"6 rows in 2 file\(s\).*counted 3"):
        check_staged_rows(str(tmp_path), files, "parquet", 3)
    with pytest.raises(StagedRowsMismatchError, match="counted 7"):
        check_staged_rows(str(tmp_path), files, "parquet", 7)  # a file missing


@pytest.mark.parametrize("compressed", [False, True], ids=["json", "json.gz"])
def test_json_lines_are_counted_too(tmp_path: Path, compressed: bool) -> None:
    text = b'{"id":1}\n{}\n{"id":3,"s":"a\\nb"}\n'
    name = f"part-00000-{JOB}-c000.json" + (".gz" if compressed else "")
    (tmp_path / name).write_bytes(gzip.compress(text) if compressed else text)
    files = committed_part_files(str(tmp_path))
    check_staged_rows(str(tmp_path), files, "json", 3)
    with pytest.raises(StagedRowsMismatchError):
        check_staged_rows(str(tmp_path), files, "json", 2)


# Text as Spark's CSV writer (univocity) writes it with its defaults (quote ", escape \, line
# separator \n): a value holding a line separator, the separator or a quote is quoted, a quote
# inside is escaped with \ and an escape before a quote is escaped too.
SPARK_CSV = (
    b"id,s\n"
    b'1,"two\nlines"\n'
    b'2,"a \\"quoted\\" word, and a comma"\n'
    b'3,"ends in a backslash\\\\"\n'
    b"4,\n"
    b'5,"\r\n"\n'
)


@pytest.mark.parametrize("compressed", [False, True], ids=["csv", "csv.gz"])
def test_csv_records_are_counted_as_spark_wrote_them(tmp_path: Path, compressed: bool) -> None:
    """Finding: staged CSV files were never row-checked. Records are counted by the writer's
    own quoting rules, not by lines: a quoted value may span lines."""
    name = f"part-00000-{JOB}-c000.csv" + (".gz" if compressed else "")
    (tmp_path / name).write_bytes(gzip.compress(SPARK_CSV) if compressed else SPARK_CSV)
    (tmp_path / f"part-00001-{JOB}-c000.csv").write_bytes(b"id,s\n")  # a header, no rows
    files = committed_part_files(str(tmp_path))
    check_staged_rows(str(tmp_path), files, "csv", 5, {"header": "true"})
    with pytest.raises(StagedRowsMismatchError, match=r"7 rows in 2 file\(s\).*counted 5"):
        check_staged_rows(str(tmp_path), files, "csv", 5, {"header": "false"})
    with pytest.raises(StagedRowsMismatchError, match="counted 6"):
        check_staged_rows(str(tmp_path), files, "csv", 6, {"header": "true"})


def test_csv_with_the_writers_own_quote_escape_and_line_separator(tmp_path: Path) -> None:
    text = b"1;'x;y'|2;'it''s|two'|3;z|"
    (tmp_path / f"part-00000-{JOB}-c000.csv").write_bytes(text)
    files = committed_part_files(str(tmp_path))
    options = {"sep": ";", "quote": "'", "escape": "'", "lineSep": "|"}
    check_staged_rows(str(tmp_path), files, "csv", 3, options)
    with pytest.raises(StagedRowsMismatchError):
        check_staged_rows(str(tmp_path), files, "csv", 4, options)
