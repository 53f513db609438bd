"""The Spark front doors: ``foreach_batch``, ``write_batch`` and the Python data sources."""

from eosink.spark.foreach_batch import ForeachBatchWriter, foreach_batch, write_batch
from eosink.spark.session import MICROS_TIMESTAMPS, is_classic, session_conf
from eosink.spark.staging import StagedFile, StagedFiles, stage_dataframe


def register(spark):  # noqa: ANN001, ANN201 - thin re-export; pyspark imported on use
    """Register the ``eosink-<name>`` data source of every installed sink with ``spark``."""
    from eosink.spark.datasource import register as _register

    return _register(spark)


__all__ = [
    "MICROS_TIMESTAMPS",
    "ForeachBatchWriter",
    "StagedFile",
    "StagedFiles",
    "foreach_batch",
    "is_classic",
    "register",
    "session_conf",
    "stage_dataframe",
    "write_batch",
]
