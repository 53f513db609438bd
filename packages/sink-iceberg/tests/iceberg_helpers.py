"""A SQL catalog on SQLite per test, the independent readers, and driving the sink without
Spark."""

from __future__ import annotations

import glob
import os
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from eosink.testing.local import numbered_rows, run_local

QUERY = "00000000-0000-4000-8000-00000000000b"
TABLE = "lake.events"


def catalog_properties(folder: Path | str) -> dict[str, str]:
    """pyiceberg's SQL catalog on a SQLite file, its warehouse a local folder."""
    folder = Path(folder)
    (folder / "warehouse").mkdir(parents=True, exist_ok=True)
    return {
        "type": "sql",
        "uri": f"sqlite:///{folder}/catalog.db",
        "warehouse": f"file://{folder}/warehouse",
    }


def make_namespace(catalog: dict[str, str], namespace: str = "lake") -> None:
    from pyiceberg.catalog import load_catalog

    load_catalog("eosink", **catalog).create_namespace_if_not_exists(namespace)


def load(catalog: dict[str, str], table: str = TABLE) -> Any:
    from pyiceberg.catalog import load_catalog

    return load_catalog("eosink", **catalog).load_table(table)


def read_pyiceberg(catalog: dict[str, str], table: str = TABLE) -> pa.Table | list:
    """Every row of the current snapshot, by pyiceberg's scan (plans files from manifests)."""
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        loaded = load_catalog("eosink", **catalog).load_table(table)
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    return loaded.scan().to_arrow()


def _extension_file(module: str) -> str | None:
    import importlib

    try:
        package = importlib.import_module(module)
    except ImportError:
        return None
    folder = os.path.dirname(package.__file__ or "")
    found = glob.glob(os.path.join(folder, "**", "*.duckdb_extension"), recursive=True)
    return found[0] if found else None


def duckdb_missing() -> str | None:
    """Why DuckDB cannot read Iceberg here (``None``: it can)."""
    if _extension_file("duckdb_extension_iceberg") is None:
        return "the duckdb-extension-iceberg wheel is not installed"
    if _extension_file("duckdb_extension_avro") is None:
        # the iceberg extension reads manifests with it, and would download it otherwise
        return "the duckdb-extension-avro wheel is not installed"
    return None


def duckdb_connection() -> Any:
    """DuckDB with the avro and iceberg extensions loaded from files (never downloaded)."""
    import duckdb

    why = duckdb_missing()
    if why:
        import pytest

        pytest.skip(why)  # only tests that need DuckDB itself call this
    con = duckdb.connect(
        config={"allow_unsigned_extensions": "true", "autoinstall_known_extensions": "false"}
    )
    con.execute(f"LOAD '{_extension_file('duckdb_extension_avro')}'")
    con.execute(f"LOAD '{_extension_file('duckdb_extension_iceberg')}'")
    return con


def read_duckdb(catalog: dict[str, str], table: str = TABLE) -> pa.Table | list:
    """Every row of the current snapshot, by DuckDB's iceberg extension reading the table's
    current metadata file (a reader that shares no code with pyiceberg)."""
    from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

    try:
        location = load(catalog, table).metadata_location
    except (NoSuchTableError, NoSuchNamespaceError):
        return []
    con = duckdb_connection()
    try:
        return con.execute(f"SELECT * FROM iceberg_scan('{location}')").to_arrow_table()
    finally:
        con.close()


rows = numbered_rows
#: ``run(sink, batch_id, parts=None, *, writer_id="w", mode="append", query_id=QUERY)``: one
#: stream batch through the protocol in this process.
run = partial(run_local, sink_name="iceberg", query_id=QUERY)


def read_checked(catalog: dict[str, str], table: str = TABLE) -> pa.Table | list:
    """pyiceberg's rows, and where DuckDB's iceberg extension is available, its rows too: both
    readers must see the same rows (compared by id, or by count without an id column)."""
    rows_ = read_pyiceberg(catalog, table)
    if duckdb_missing() is not None or not hasattr(rows_, "num_rows"):
        return rows_
    other = read_duckdb(catalog, table)
    if "id" in rows_.column_names:
        assert sorted(other.column("id").to_pylist()) == sorted(rows_.column("id").to_pylist())
    assert other.num_rows == rows_.num_rows, (other.num_rows, rows_.num_rows)
    return rows_


def spark_session_conf(folder: str | os.PathLike[str]) -> dict[str, str]:
    """Iceberg's Spark runtime on the catalog of :func:`catalog_properties` (``folder``): its SQL
    extensions and the catalog ``eosink``, Iceberg's JDBC catalog on the SQL catalog's SQLite
    file, as a user points Spark at pyiceberg's catalog."""
    prefix = "spark.sql.catalog.eosink"
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.catalog-impl": "org.apache.iceberg.jdbc.JdbcCatalog",
        f"{prefix}.uri": f"jdbc:sqlite:{folder}/catalog.db",
        f"{prefix}.warehouse": f"file://{folder}/warehouse",
        # pyiceberg's SQL catalog has the column of views (iceberg_type): the schema's V1
        f"{prefix}.jdbc.schema-version": "V1",
    }
