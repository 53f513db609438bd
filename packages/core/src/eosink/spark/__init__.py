"""The Spark front doors: ``foreach_batch``, ``write_batch`` and the Python data sources."""

from eosink.spark.foreach_batch import ForeachBatchWriter, foreach_batch, write_batch


def register(spark):  # noqa: ANN001, ANN201 - thin re-export; pyspark imported on use
    """Register the ``eosink-<name>`` data source of every installed sink with ``spark``."""
    from eosink.spark.datasource import register as _register

    return _register(spark)


__all__ = ["ForeachBatchWriter", "foreach_batch", "register", "write_batch"]
