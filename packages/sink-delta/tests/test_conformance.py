"""The delta sink passes the core's whole conformance kit, read back by delta-rs."""

import pytest
from eosink_delta.sink import DeltaSink, read_table

from eosink.testing.conformance import SinkConformance


class TestDeltaConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, tmp_path):
        return lambda: DeltaSink(path=str(tmp_path / "table"))

    @pytest.fixture
    def read_rows(self, tmp_path):
        def read():
            path = tmp_path / "table"
            return read_table(str(path)).to_pylist() if (path / "_delta_log").exists() else []

        return read


class TestDeltaPartitionedConformance(TestDeltaConformance):
    """The same scenarios on a table partitioned by a column of the rows."""

    @pytest.fixture
    def make_sink(self, tmp_path):
        return lambda: DeltaSink(path=str(tmp_path / "table"), partition_by=["name"])
