"""The Parquet codec of the files a batch writes: the sink's ``compression`` option when given,
else the table's ``write.parquet.compression-codec``, the property Iceberg's own writers (Spark's,
pyiceberg's) take it from, and Iceberg's default (zstd) when the table sets none. A table whose
owner chose snappy for its readers' CPU gets snappy files from eosink as from Spark."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, make_namespace, read_checked, run

from eosink.errors import ConfigurationError

CODEC = "write.parquet.compression-codec"


def make_table(catalog, properties):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    make_namespace(catalog)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
    )
    load_catalog("eosink", **catalog).create_table(TABLE, schema, properties=properties)


def codecs(catalog) -> set[str]:
    table = load(catalog)
    paths = [task.file.file_path for task in table.scan().plan_files()]
    assert paths
    return {
        pq.read_metadata(p.removeprefix("file://")).row_group(0).column(0).compression
        for p in paths
    }


@pytest.mark.parametrize(
    ("properties", "option", "expected"),
    [
        ({}, None, "ZSTD"),
        ({CODEC: "snappy"}, None, "SNAPPY"),
        ({CODEC: "GZIP"}, None, "GZIP"),
        ({CODEC: "uncompressed"}, None, "UNCOMPRESSED"),
        ({CODEC: "snappy"}, "zstd", "ZSTD"),
        ({}, "none", "UNCOMPRESSED"),
    ],
)
def test_the_codec_is_the_options_else_the_tables(tmp_path, properties, option, expected):
    catalog = catalog_properties(tmp_path)
    make_table(catalog, properties)
    sink = IcebergSink(table=TABLE, catalog=catalog, **({"compression": option} if option else {}))
    assert run(sink, 0).status == "committed"
    assert codecs(catalog) == {expected}
    assert sorted(read_checked(catalog).column("id").to_pylist()) == list(range(5))


def test_a_codec_the_sink_cannot_write_is_refused_naming_the_property(tmp_path):
    catalog = catalog_properties(tmp_path)
    make_table(catalog, {CODEC: "lzo"})
    sink = IcebergSink(table=TABLE, catalog=catalog)
    with pytest.raises(ConfigurationError, match=r"write\.parquet\.compression-codec.*'lzo'"):
        run(sink, 0)
    assert load(catalog).metadata.current_snapshot() is None


def test_a_replacing_batch_rewrites_kept_rows_with_the_tables_codec(tmp_path):
    catalog = catalog_properties(tmp_path)
    make_table(catalog, {CODEC: "snappy"})
    sink = IcebergSink(table=TABLE, catalog=catalog, mode="upsert", key=["id"])
    assert run(sink, 0).status == "committed"
    changed = pa.record_batch({"id": pa.array([1], pa.int64()), "name": pa.array(["new"])})
    assert run(sink, 1, [changed]).status == "committed"
    assert codecs(catalog) == {"SNAPPY"}
