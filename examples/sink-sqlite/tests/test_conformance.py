"""The sqlite example passes the whole conformance kit."""

import pytest
from eosink_sqlite.sink import SqliteSink, read_rows

from eosink.testing.conformance import SinkConformance


class TestSqliteConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, tmp_path):
        return lambda: SqliteSink(path=str(tmp_path / "target.db"))

    @pytest.fixture
    def read_rows(self, tmp_path):
        return lambda: read_rows(str(tmp_path / "target.db"))
