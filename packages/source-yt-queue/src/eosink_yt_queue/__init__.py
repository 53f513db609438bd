"""eosink source: YT queues (ordered dynamic tables) as a Spark streaming source.

``eosink_yt_queue.register(spark)``, then
``spark.readStream.format("eosink-yt-queue").option("proxy", ...).load("//home/app/queue")``.
Offsets are row indexes per tablet; ``include_service_columns`` adds SPYT's service columns so
that the rows feed eosink's idempotent receiver (``eosink-yt-dynamic``) unchanged.
"""

from importlib.metadata import PackageNotFoundError, version

from eosink_yt_queue.offsets import QueueChangedError, TrimmedRowsError
from eosink_yt_queue.options import QueueOptions
from eosink_yt_queue.source import (
    NAME,
    SPYT_ROW_INDEX,
    SPYT_TABLET_INDEX,
    YtQueueDataSource,
    register,
)

try:
    __version__ = version("eosink-yt-queue") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "NAME",
    "SPYT_ROW_INDEX",
    "SPYT_TABLET_INDEX",
    "QueueChangedError",
    "QueueOptions",
    "TrimmedRowsError",
    "YtQueueDataSource",
    "register",
]
