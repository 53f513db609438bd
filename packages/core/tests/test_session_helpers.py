"""Helpers for sinks that drive Spark's own writers: session kind and a scoped SQL conf."""

import pytest

from eosink.spark import is_classic, session_conf


class Conf:
    def __init__(self, **values):
        self.values = dict(values)

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value

    def unset(self, key):
        self.values.pop(key, None)


class Session:
    def __init__(self, classic=True, **conf):
        self.conf = Conf(**conf)
        self.classic = classic

    @property
    def sparkContext(self):  # noqa: N802 - Spark's name
        if not self.classic:
            raise RuntimeError("not available on Spark Connect")
        return object()


class Frame:
    def __init__(self, session):
        self.sparkSession = session


def test_is_classic_tells_connect_apart():
    assert is_classic(Frame(Session()))
    assert not is_classic(Frame(Session(classic=False)))


@pytest.mark.parametrize("before", [None, "INT96"])
def test_session_conf_is_restored_even_after_a_failure(before):
    key = "spark.sql.parquet.outputTimestampType"
    spark = Session(**({key: before} if before else {}))
    with pytest.raises(RuntimeError):
        with session_conf(spark, key, "TIMESTAMP_MICROS"):
            assert spark.conf.get(key) == "TIMESTAMP_MICROS"
            raise RuntimeError("the write failed")
    assert spark.conf.get(key) == before
