"""Bad input gets a clear error naming the fix, and nothing is committed (no snapshot, no
proof, no data file left in the table's folder); secrets never show."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, load, make_namespace, rows, run

from eosink import ConfigurationError, EosinkError


@pytest.fixture
def catalog(tmp_path):
    return catalog_properties(tmp_path)


def nothing_committed(catalog, tmp_path) -> None:
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        table = load(catalog)
    except (NoSuchTableError, NoSuchNamespaceError):
        table = None
    if table is not None:
        assert table.metadata.current_snapshot() is None or len(table.metadata.snapshots) == 1
        assert not [k for k in table.metadata.properties if k.startswith("eosink.proof.w")]
    files = list((tmp_path / "warehouse").glob("**/data/**/*.parquet"))
    assert not files, files


def test_missing_catalog():
    with pytest.raises(ConfigurationError, match="no catalog given"):
        IcebergSink(table=TABLE)


def test_catalog_that_cannot_be_opened(tmp_path):
    sink = IcebergSink(
        table=TABLE,
        catalog={"type": "no-such-kind", "uri": "x", "s3.secret-access-key": "TOPSECRET"},
    )
    with pytest.raises(ConfigurationError, match="cannot open the catalog") as error:
        run(sink, 0)
    assert "TOPSECRET" not in str(error.value)
    assert "TOPSECRET" not in repr(sink)


def test_table_identifier_without_namespace(catalog):
    with pytest.raises(ConfigurationError, match="<namespace>.<table>"):
        IcebergSink(table="events", catalog=catalog)


def test_missing_namespace_without_create_namespace(catalog, tmp_path):
    with pytest.raises(ConfigurationError, match="create_namespace=true"):
        run(IcebergSink(table=TABLE, catalog=catalog), 0)
    nothing_committed(catalog, tmp_path)


def test_missing_table_without_create(catalog, tmp_path):
    make_namespace(catalog)
    with pytest.raises(ConfigurationError, match="set create=true"):
        run(IcebergSink(table=TABLE, catalog=catalog, create=False), 0)
    nothing_committed(catalog, tmp_path)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"id": pa.array(["x"] * 5)}, "column 'id' is string in the stream but long"),
        ({"other": pa.array([1] * 5)}, "merge_schema=true"),
    ],
)
def test_schema_mismatch(catalog, tmp_path, extra, message):
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)
    assert run(sink, 0).status == "committed"
    before = load(catalog).metadata.current_snapshot().snapshot_id
    batch = rows(1)
    for name, column in extra.items():
        if name in batch.schema.names:
            batch = batch.set_column(batch.schema.get_field_index(name), name, column)
        else:
            batch = batch.append_column(name, column)
    with pytest.raises(ConfigurationError, match=message):
        run(sink, 1, [batch])
    assert load(catalog).metadata.current_snapshot().snapshot_id == before


def test_table_requires_a_column_the_stream_lacks(catalog, tmp_path):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    make_namespace(catalog)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
        NestedField(3, "tenant", StringType(), required=True),
    )
    load_catalog("eosink", **catalog).create_table(TABLE, schema=schema)
    with pytest.raises(ConfigurationError, match=r"requires column\(s\) \['tenant'\]"):
        run(IcebergSink(table=TABLE, catalog=catalog), 0)
    nothing_committed(catalog, tmp_path)


@pytest.mark.parametrize("spec", ["void(id)", "bucket(id)", "truncate(0, name)", "zorder(id)"])
def test_unsupported_or_malformed_partition_transform(catalog, spec):
    with pytest.raises(ConfigurationError, match="partition"):
        run(
            IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=[spec]), 0
        )


def test_existing_table_with_a_transform_the_sink_does_not_compute(catalog, tmp_path):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import VoidTransform
    from pyiceberg.types import LongType, NestedField, StringType

    make_namespace(catalog)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(1, 1000, VoidTransform(), "id_void"))
    load_catalog("eosink", **catalog).create_table(TABLE, schema=schema, partition_spec=spec)
    with pytest.raises(ConfigurationError, match="does not compute"):
        run(IcebergSink(table=TABLE, catalog=catalog), 0)
    nothing_committed(catalog, tmp_path)


def test_partition_by_other_than_the_tables(catalog):
    assert (
        run(
            IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=["name"]),
            0,
        ).status
        == "committed"
    )
    with pytest.raises(ConfigurationError, match="partition_by asks for"):
        run(IcebergSink(table=TABLE, catalog=catalog, partition_by=["bucket(2, id)"]), 1)


def test_format_version_it_cannot_write(catalog, tmp_path):
    from pyiceberg.catalog import load_catalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import LongType, NestedField, StringType

    with pytest.raises(ConfigurationError, match="format_version 3"):
        IcebergSink(table=TABLE, catalog=catalog, format_version=3)
    make_namespace(catalog)
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "name", StringType(), required=False),
    )
    # pyiceberg does not create v3 tables: register a v2 table's metadata rewritten as v3
    cat = load_catalog("eosink", **catalog)
    v2 = cat.create_table("lake.v2", schema=schema)
    metadata = json.loads(v2.metadata.model_dump_json(by_alias=True))
    metadata.update({"format-version": 3, "next-row-id": 0})
    path = tmp_path / "v3.metadata.json"
    path.write_text(json.dumps(metadata))
    cat.register_table(TABLE, f"file://{path}")
    assert load(catalog).metadata.format_version == 3
    with pytest.raises(ConfigurationError, match="format version 3"):
        run(IcebergSink(table=TABLE, catalog=catalog), 0)
    nothing_committed(catalog, tmp_path)


@pytest.mark.parametrize(
    "column",
    [
        pa.array([1] * 5, pa.uint64()),
        pa.array([dt.timedelta(seconds=1)] * 5, pa.duration("us")),
        pa.array([None] * 5, pa.null()),
    ],
)
def test_types_without_an_iceberg_type(catalog, tmp_path, column):
    batch = rows(0).append_column("odd", column)
    with pytest.raises(ConfigurationError, match="no Iceberg type"):
        run(IcebergSink(table=TABLE, catalog=catalog, create_namespace=True), 0, [batch])
    nothing_committed(catalog, tmp_path)


def test_nanosecond_timestamps_are_refused(catalog, tmp_path):
    batch = rows(0).append_column("t", pa.array([1] * 5, pa.timestamp("ns")))
    with pytest.raises(ConfigurationError, match="nanosecond"):
        run(IcebergSink(table=TABLE, catalog=catalog, create_namespace=True), 0, [batch])
    nothing_committed(catalog, tmp_path)


def test_spark_style_options_with_catalog_properties(catalog):
    """Spark's options: ``catalog.<property>`` per property, ``path`` as the table, any case."""
    options = {f"catalog.{k}": v for k, v in catalog.items()}
    options.update({"path": TABLE, "createnamespace": "true", "partitionby": "bucket(2, id)"})
    options["catalog.s3.secret-access-key"] = "TOPSECRET"
    sink = IcebergSink.from_options(options)
    assert sink.options.table == TABLE
    assert sink.options.catalog["uri"] == catalog["uri"]
    assert sink.options.partition_by == ("bucket(2, id)",)
    assert "TOPSECRET" not in repr(sink)
    with pytest.raises(EosinkError, match="unknown option"):
        IcebergSink.from_options({**options, "partitoin_by": "x"})


@pytest.mark.parametrize(
    "uri",
    [
        "postgresql+psycopg://eosink@db.internal:5432/catalog?password=hunter2-XYZ&sslmode=require",
        "postgresql+psycopg://eosink@db.internal/catalog?sslmode=require&PASSWORD=hunter2-XYZ",
        "https://catalog.internal/api?token=hunter2-XYZ",
    ],
)
def test_a_password_in_the_catalog_uris_query_never_shows(tmp_path, uri):
    """SQLAlchemy passes a URL's query parameters to the driver, ``password`` among them: the
    options' ``repr`` and the catalog's error texts mask it, and keep the rest of the URL."""
    from eosink_iceberg.catalog import scrub

    sink = IcebergSink(table=TABLE, catalog={"type": "sql", "uri": uri})
    shown = repr(sink.options)
    assert "hunter2-XYZ" not in shown and "hunter2-XYZ" not in repr(sink)
    assert "catalog.internal" in shown or "db.internal" in shown
    assert "sslmode=require" in shown or "token=" in shown
    error = scrub(f"could not connect to {uri}: password hunter2-XYZ rejected", sink.options)
    assert "hunter2-XYZ" not in error
