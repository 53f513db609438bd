"""The postgres sink passes the whole conformance kit, judged by plain SQL."""

import pytest
from eosink_postgres.sink import PostgresSink
from pg_helpers import staging_tables

from eosink.testing.conformance import SinkConformance


class TestPostgresConformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, database):
        return lambda **options: PostgresSink(url=database, table="public.events", **options)

    @pytest.fixture
    def read_rows(self, read_target):
        return read_target

    @pytest.fixture(autouse=True)
    def no_staging_left(self, database):
        """Every scenario ends with no staging table left: aborts drop what they staged."""
        yield
        assert staging_tables(database) == []
