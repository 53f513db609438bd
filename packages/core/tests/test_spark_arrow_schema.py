"""The Arrow schema eosink expects from Spark, on every pyspark it supports (4.1 and later).

pyspark 4.2 added ``to_arrow_schema(..., timezone=...)``; on 4.1 that call raised a
``TypeError`` at the first batch of both front doors (found running eosink-iceberg's doors on
Spark 4.1.4 beside Iceberg's runtime). 4.1's function writes every zoned timestamp in UTC: the
zone is set afterwards, nested timestamps too."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from eosink.spark.executors import spark_arrow_schema

SCHEMA = StructType(
    [
        StructField("id", LongType()),
        StructField("at", TimestampType()),
        StructField("local", TimestampNTZType()),
        StructField("inner", StructType([StructField("at", TimestampType())])),
        StructField("ats", ArrayType(TimestampType())),
        StructField("by_name", MapType(StringType(), TimestampType())),
    ]
)


def expected(zone: str) -> pa.Schema:
    ts = pa.timestamp("us", tz=zone)
    return pa.schema(
        [
            ("id", pa.int64()),
            ("at", ts),
            ("local", pa.timestamp("us")),
            ("inner", pa.struct([("at", ts)])),
            ("ats", pa.list_(ts)),
            ("by_name", pa.map_(pa.string(), ts)),
        ]
    )


@pytest.fixture
def pyspark_41(monkeypatch):
    """pyspark 4.1's ``to_arrow_schema``: no ``timezone``, zoned timestamps in UTC."""
    import pyspark.sql.pandas.types as types

    newer = types.to_arrow_schema

    def to_arrow_schema(
        schema,
        error_on_duplicated_field_names_in_struct=False,
        timestamp_utc=True,
        prefers_large_types=False,
    ):
        return newer(schema, timezone="UTC")

    monkeypatch.setattr(types, "to_arrow_schema", to_arrow_schema)


@pytest.mark.parametrize("zone", ["UTC", "Europe/Amsterdam"])
def test_the_schema_on_this_pyspark(zone):
    assert spark_arrow_schema(SCHEMA, zone).equals(expected(zone))


@pytest.mark.parametrize("zone", ["UTC", "Europe/Amsterdam"])
def test_the_schema_on_pyspark_41(pyspark_41, zone):
    import pyspark.sql.pandas.types as types

    with pytest.raises(TypeError, match="timezone"):
        types.to_arrow_schema(SCHEMA, timezone=zone)
    assert spark_arrow_schema(SCHEMA, zone).equals(expected(zone))
