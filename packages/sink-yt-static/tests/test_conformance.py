"""The yt-static sink passes the core's conformance kit against the YT proxy emulator."""

import pytest
from yt_static_helpers import leftovers, open_transactions, read_rows

from eosink.testing.conformance import SinkConformance

from conftest import TABLE


class TestYtStaticConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, make_sink):
        return make_sink

    @pytest.fixture
    def read_rows(self, yt):
        return lambda: read_rows(yt, TABLE)

    @pytest.fixture(autouse=True)
    def _clean_afterwards(self, yt):
        yield
        assert leftovers(yt) == []
        assert open_transactions(yt) == []


class TestYtStaticSortedConformance(TestYtStaticConformance):
    """The same with key columns: sort into _sorted, merge keeping the sort order."""

    @pytest.fixture
    def make_sink(self, make_sink):
        return lambda: make_sink(key_columns=("id",))
