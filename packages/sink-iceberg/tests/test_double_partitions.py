"""Double partition values stay exact in every manifest eosink's commits write.

pyiceberg 0.12's Cython Avro decoder (its default) returns an Avro ``double`` through a C
``float`` (apache/iceberg-python#3808, fixed after 0.12.0): a double partition value read from
a manifest comes back as 0.10000000149011612 for 0.1, ``inf`` for 1e300, -0.0 for -2.26e-276.
A manifest pyiceberg writes from what it read (manifests merged by an append, the entries an
overwrite keeps of a manifest it rewrites) holds those values from then on, and every reader
(DuckDB, Iceberg's Java runtime, pyiceberg) prunes the file by them: a filtered read skips its
rows. The manifests are read here with pyiceberg's pure-Python decoder, which reads doubles
right.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, duckdb_connection, duckdb_missing, load, run

VALUES = [0.1, 1e300, -2.2573120438805188e-276, 45818293.0]


@pytest.fixture
def catalog(tmp_path):
    return catalog_properties(tmp_path)


def rows(keys: list[int], values: list[float], tag: str) -> pa.RecordBatch:
    return pa.record_batch(
        {
            "k": pa.array(keys, pa.int64()),
            "f": pa.array(values, pa.float64()),
            "v": pa.array([f"{tag}{k}" for k in keys]),
        }
    )


def partition_values(catalog: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The partition value of every live data file of the current snapshot, as its manifest
    holds it (read with the pure-Python decoder)."""
    import pyiceberg.avro.file as avro_file
    from pyiceberg.avro.decoder import StreamingBinaryDecoder

    with monkeypatch.context() as patch:
        patch.setattr(avro_file, "new_decoder", StreamingBinaryDecoder)
        table = load(catalog)
        return sorted(
            entry.data_file.partition[0]
            for manifest in table.current_snapshot().manifests(table.io)
            for entry in manifest.fetch_manifest_entry(table.io, discard_deleted=True)
        )


def duckdb_keys(catalog: dict[str, str], value: float) -> list[int] | None:
    if duckdb_missing():
        return None
    location = load(catalog).metadata_location
    query = f"SELECT k FROM iceberg_scan('{location}') WHERE f = ?::DOUBLE"
    return sorted(k for (k,) in duckdb_connection().execute(query, [value]).fetchall())


def merge_manifests(catalog: dict[str, str]) -> None:
    with load(catalog).transaction() as txn:
        txn.set_properties(
            {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "2"}
        )


def test_appends_that_merge_manifests_keep_the_values(catalog, monkeypatch):
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=["f"])
    for batch, value in enumerate(VALUES):
        assert run(sink, batch, [rows([batch], [value], "a")]).status == "committed"
        if batch == 0:
            merge_manifests(catalog)
    assert len(load(catalog).current_snapshot().manifests(load(catalog).io)) < len(VALUES)
    assert partition_values(catalog, monkeypatch) == sorted(VALUES)
    for k, value in enumerate(VALUES):
        assert duckdb_keys(catalog, value) in ([k], None)


def test_an_upsert_keeps_the_values_of_the_files_it_does_not_touch(catalog, monkeypatch):
    sink = IcebergSink(
        table=TABLE,
        catalog=catalog,
        create_namespace=True,
        partition_by=["f"],
        mode="upsert",
        key=["k"],
    )
    keys = list(range(len(VALUES)))
    assert run(sink, 0, [rows(keys, VALUES, "a")]).status == "committed"  # one manifest
    assert run(sink, 1, [rows([0], [0.5], "b")]).status == "committed"  # rewrites it
    assert partition_values(catalog, monkeypatch) == sorted([0.5, *VALUES[1:]])
    for k, value in enumerate(VALUES[1:], start=1):
        assert duckdb_keys(catalog, value) in ([k], None)


def test_a_complete_batch_replaces_files_of_any_double_partition(catalog, monkeypatch):
    """Found by a soak (``TestIcebergCompleteSimulation``, seed 2969074074): a complete batch
    dropping a file of partition -2.26e-276 failed ("Missing required files to delete"):
    pyiceberg looked for it among the manifests whose summaries hold the value it read back,
    -0.0, and found none."""
    sink = IcebergSink(table=TABLE, catalog=catalog, create_namespace=True, partition_by=["f"])
    keys = list(range(len(VALUES)))
    for batch in range(3):
        assert run(sink, batch, [rows(keys, VALUES, f"{batch}")], mode="complete").status == (
            "committed"
        )
    assert partition_values(catalog, monkeypatch) == sorted(VALUES)
