"""What the kit's simulation (``test_simulation.py``) found about its independent readers,
shown on tables pyiceberg writes itself: each test pins a reader's limit the kit works around,
and fails when the limit goes away (the workaround can go then)."""

from __future__ import annotations

import decimal
import os
import subprocess
import sys
import textwrap
from typing import Any

import pyarrow as pa
import pytest
from iceberg_helpers import catalog_properties, duckdb_connection, duckdb_missing
from test_simulation import duckdb_cannot_read

#: Counts a table's rows with DuckDB's ``iceberg_scan`` in a process of its own (DuckDB may
#: abort the process it runs in).
COUNT_IN_A_CHILD = textwrap.dedent(
    """
    import sys
    from iceberg_helpers import duckdb_connection

    query = f"SELECT count(*) FROM iceberg_scan('{sys.argv[1]}')"
    print(duckdb_connection().execute(query).fetchone()[0])
    """
)


def decimal_table(tmp_path, name: str, kinds: list[pa.DataType]) -> Any:
    """A table pyiceberg makes and appends one row to, partitioned by identity of each column
    (``c0``, ``c1``...: one a type in ``kinds``)."""
    from pyiceberg.catalog import load_catalog

    catalog = load_catalog("eosink", **catalog_properties(tmp_path / name))
    catalog.create_namespace_if_not_exists("lake")
    fields = [pa.field(f"c{i}", kind) for i, kind in enumerate(kinds)]
    schema = pa.schema([pa.field("id", pa.int64()), *fields])
    table = catalog.create_table(f"lake.{name}", schema=schema)
    with table.update_spec() as update:
        for field in fields:
            update.add_identity(field.name)
    one = decimal.Decimal("0.001")
    columns = {f.name: pa.array([one], f.type) for f in fields}
    table.append(pa.table({"id": pa.array([1], pa.int64()), **columns}, schema=schema))
    return catalog.load_table(f"lake.{name}")


def test_duckdb_aborts_on_two_partition_fields_of_one_decimal_type(tmp_path):
    """Found by a soak (``TestIcebergCompleteSimulation``, ``--hypothesis-seed=3``, 60
    examples): DuckDB's ``iceberg_scan`` aborted the whole test process ("Cannot parse file
    header: Cannot save fixed schema") on a table partitioned by two ``decimal(20, 10)``
    columns, whatever the query. pyiceberg's manifest writer defines the Avro fixed type of a
    decimal partition field (``decimal_20_10``) once per field, and DuckDB's avro extension
    refuses a name defined twice and throws where nothing catches it. A table pyiceberg writes
    itself does the same; two fields of different decimal types read fine. The kit's DuckDB
    reader declines such tables (``duckdb_cannot_read``); when this test fails, the limit can
    go."""
    if duckdb_missing():
        pytest.skip(duckdb_missing())
    twice = decimal_table(tmp_path, "twice", [pa.decimal128(20, 10), pa.decimal128(20, 10)])
    child = subprocess.run(
        [sys.executable, "-c", COUNT_IN_A_CHILD, twice.metadata_location],
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode != 0, child.stdout  # DuckDB reads it now: the limit can go
    assert "Cannot save fixed schema" in child.stderr, child.stderr[-2000:]
    assert duckdb_cannot_read(twice)

    kinds = [pa.decimal128(12, 3), pa.decimal128(20, 10)]
    different = decimal_table(tmp_path, "different", kinds)
    con = duckdb_connection()
    try:
        query = f"SELECT count(*) FROM iceberg_scan('{different.metadata_location}')"
        assert con.execute(query).fetchone()[0] == 1
    finally:
        con.close()
    assert duckdb_cannot_read(different) is None
