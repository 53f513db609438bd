"""The iceberg sink passes the core's whole conformance kit, read back by pyiceberg's scan and,
for the partitioned table, by DuckDB's iceberg extension."""

import pytest
from eosink_iceberg.sink import IcebergSink
from iceberg_helpers import TABLE, catalog_properties, read_checked, read_pyiceberg

from eosink.testing.conformance import SinkConformance


def _rows(table):
    return table.to_pylist() if hasattr(table, "to_pylist") else list(table)


class TestIcebergConformance(SinkConformance):
    @pytest.fixture
    def catalog(self, tmp_path):
        return catalog_properties(tmp_path)

    @pytest.fixture
    def make_sink(self, catalog):
        return lambda: IcebergSink(table=TABLE, catalog=catalog, create_namespace=True)

    @pytest.fixture
    def read_rows(self, catalog):
        return lambda: _rows(read_pyiceberg(catalog))


class TestIcebergPartitionedConformance(TestIcebergConformance):
    """The same scenarios on a table partitioned by a bucket of the id and a truncation of the
    name, judged by pyiceberg and, where its iceberg extension loads, DuckDB."""

    @pytest.fixture
    def make_sink(self, catalog):
        return lambda: IcebergSink(
            table=TABLE,
            catalog=catalog,
            create_namespace=True,
            partition_by=["bucket(4, id)", "truncate(2, name)"],
        )

    @pytest.fixture
    def read_rows(self, catalog):
        return lambda: _rows(read_checked(catalog))
