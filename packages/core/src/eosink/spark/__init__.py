"""The Spark front doors: ``foreach_batch``, ``write_batch`` and the Python data sources, and
what sink authors drive Spark's writers with (``stage_dataframe``, ``is_classic``,
``session_conf``). Internals stay in their modules (e.g. ``eosink.spark.foreach_batch``)."""

from eosink.spark.foreach_batch import foreach_batch, write_batch
from eosink.spark.session import is_classic, session_conf
from eosink.spark.staging import StagedFile, StagedFiles, stage_dataframe


def register(spark):  # noqa: ANN001, ANN201 - thin re-export; pyspark imported on use
    """Register the ``eosink-<name>`` data source of every installed sink with ``spark``."""
    from eosink.spark.datasource import register as _register

    return _register(spark)


__all__ = [
    "StagedFile",
    "StagedFiles",
    "foreach_batch",
    "is_classic",
    "register",
    "session_conf",
    "stage_dataframe",
    "write_batch",
]
