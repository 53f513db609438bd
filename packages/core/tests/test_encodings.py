"""Which columns the sinks' Arrow writers dictionary-encode (eosink.encodings)."""

import io

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from eosink.encodings import DictionaryChoice, dictionary_columns


def sample(rows: int) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(range(rows), pa.int64()),
            "country": pa.array([str(i % 50) for i in range(rows)]),
            "amount": pa.array([i * 0.5 for i in range(rows)]),
            "flag": pa.array([i % 2 == 0 for i in range(rows)]),
            # 100,000 values over a million rows: 95% distinct in a sample, yet worth a dictionary
            "user": pa.array(np.random.default_rng(7).integers(0, 100_000, rows)),
        }
    )


def encodings(table: pa.Table, use_dictionary) -> dict[str, tuple[str, ...]]:
    out = io.BytesIO()
    pq.write_table(table, out, use_dictionary=use_dictionary)
    group = pq.ParquetFile(io.BytesIO(out.getvalue())).metadata.row_group(0)
    return {group.column(i).path_in_schema: group.column(i).encodings for i in range(5)}


def test_columns_without_repeated_values_are_written_plain():
    assert dictionary_columns(sample(10_000)) == ["country", "flag", "user"]
    found = encodings(sample(10_000), dictionary_columns(sample(10_000)))
    assert "RLE_DICTIONARY" not in found["id"] and "RLE_DICTIONARY" not in found["amount"]
    assert "RLE_DICTIONARY" in found["country"] and "RLE_DICTIONARY" in found["user"]


def test_a_sample_too_small_or_nested_keeps_pyarrows_default():
    assert dictionary_columns(sample(999)) is True
    nested = sample(5_000).append_column("s", pa.array([{"x": i} for i in range(5_000)]))
    assert dictionary_columns(nested) is True


def test_a_task_judges_its_first_files_rows_for_all_its_files():
    choice = DictionaryChoice()
    assert choice(sample(999)) is True  # too few rows to judge: the next file is asked again
    assert choice(sample(10_000)) == ["country", "flag", "user"]
    repeated = sample(10_000).set_column(0, "id", pa.array([1] * 10_000, pa.int64()))
    assert dictionary_columns(repeated) == ["id", "country", "flag", "user"]
    assert choice(repeated) == ["country", "flag", "user"]  # the task's first judgement
    other = sample(10_000).drop_columns(["country"])  # another schema is judged on its own
    assert choice(other) == ["flag", "user"]


def test_the_same_rows_and_statistics_either_way():
    table = sample(20_000)
    plain, default = io.BytesIO(), io.BytesIO()
    pq.write_table(table, plain, use_dictionary=dictionary_columns(table))
    pq.write_table(table, default)
    read = [pq.ParquetFile(io.BytesIO(b.getvalue())) for b in (plain, default)]
    assert read[0].read().equals(read[1].read())
    stats = [
        [f.metadata.row_group(0).column(i).statistics.to_dict() for i in range(5)] for f in read
    ]
    assert stats[0] == stats[1]


def test_columns_of_every_flat_type_are_judged_or_kept():
    rows = 2_000
    table = pa.table(
        {
            "nothing": pa.nulls(rows),
            "small": pa.array([i % 3 for i in range(rows)], pa.dictionary(pa.int8(), pa.int8())),
            "day": pa.array(range(rows), pa.int32()).cast(pa.date32()),
            "bytes": pa.array([str(i).encode() for i in range(rows)], pa.binary()),
        }
    )
    assert dictionary_columns(table) == ["nothing", "small"]
    pq.write_table(table, io.BytesIO(), use_dictionary=dictionary_columns(table))
