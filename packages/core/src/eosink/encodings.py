"""Which columns of a Parquet file the sinks' Arrow writers dictionary-encode.

pyarrow's writer, like Spark's, starts every column with a dictionary and falls back to plain
pages once the dictionary passes 1 MB. For a column whose values are all different (ids,
timestamps, measured floats) that dictionary is built and thrown away in every row group: 30% of
the encoder's time on the benchmark's stream (benchmarks/README.md), for files of the same size.
So the writers ask the first rows they write: a column whose sample holds (nearly) no value
twice is written plain, every other column keeps its dictionary, and anything this cannot judge
(a small sample, nested columns) keeps pyarrow's default. Readers are not concerned: both
encodings are plain Parquet, with the same statistics.

A task writing many files (one per partition) judges once, by its first file's rows
(:class:`DictionaryChoice`): counting every file's sample cost a partitioned write 30% of its
time (50 partitions, 20,000 rows a file). A column with distinct values in one partition has
them in the others; a column that only some partitions repeat costs those files some bytes,
never a value.
"""

from __future__ import annotations

import attrs
import pyarrow as pa
import pyarrow.compute as pc

#: Below this many rows a sample says nothing about a column's values.
MIN_SAMPLE = 1_000
#: The rows counted: the first of the row group (counting a million would cost what it saves).
SAMPLE = 10_000
#: A column whose sample holds at least this share of distinct values is written plain. High:
#: a column of 100,000 values repeated over a million rows shows 95% distinct values in 10,000
#: rows and compresses better with its dictionary, which stays under pyarrow's 1 MB limit.
DISTINCT_SHARE = 0.99


def dictionary_columns(first: pa.Table | pa.RecordBatch) -> bool | list[str]:
    """``use_dictionary`` for a Parquet writer whose first row group is ``first``: the columns to
    dictionary-encode, or True (every column, pyarrow's default) when its first rows cannot
    tell."""
    if first.num_rows < MIN_SAMPLE:
        return True
    sample = first.slice(0, SAMPLE)
    if any(pa.types.is_nested(field.type) for field in sample.schema):
        return True  # use_dictionary names leaf paths; nested columns keep the default
    keep = []
    for name, column in zip(sample.schema.names, sample.columns):
        if not _countable(column.type):
            keep.append(name)
            continue
        distinct = pc.count_distinct(column, mode="all").as_py()
        if distinct < DISTINCT_SHARE * sample.num_rows:
            keep.append(name)
    return keep


@attrs.define
class DictionaryChoice:
    """:func:`dictionary_columns` judged once per task and schema, for every file it writes.

    A sample too small to judge is not kept: the next file's rows are asked again."""

    chosen: dict[pa.Schema, bool | list[str]] = attrs.field(factory=dict)

    def __call__(self, first: pa.Table | pa.RecordBatch) -> bool | list[str]:
        choice = self.chosen.get(first.schema)
        if choice is None:
            choice = dictionary_columns(first)
            if first.num_rows >= MIN_SAMPLE:
                self.chosen[first.schema] = choice
        return choice


def _countable(type_: pa.DataType) -> bool:
    """Whether a column of ``type_`` may be judged by its distinct values: not a dictionary or
    boolean column (small by nature), nor a null one (no kernel counts those)."""
    return not (
        pa.types.is_dictionary(type_) or pa.types.is_boolean(type_) or pa.types.is_null(type_)
    )
