"""eosink sink: YT sorted dynamic tables, idempotent upserts keyed by the source row, or SPYT's
transactional mode (``mode="transactional"``: one tablet transaction per batch, rows replaced
by the table's key, any query).

``eosink.sink("yt-dynamic", proxy=..., path="//home/x/out")`` or
``.format("eosink-yt-dynamic")``; helpers to get the key right: :func:`with_queue_id`,
:func:`with_source_key`, :func:`create_output_table`, :func:`mount_table`; and to retire a
writer whose rows another writer takes over: :func:`retire_writer`.
"""

from importlib.metadata import PackageNotFoundError, version

from eosink_yt_dynamic.keys import SPYT_ROW_INDEX, SPYT_TABLET_INDEX
from eosink_yt_dynamic.proof import retire_writer
from eosink_yt_dynamic.sink import YtDynamicOptions, YtDynamicSink, read_table
from eosink_yt_dynamic.source_key_columns import with_queue_id, with_source_key
from eosink_yt_dynamic.tables import create_output_table, mount_table, output_columns

try:
    __version__ = version("eosink-yt-dynamic") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "SPYT_ROW_INDEX",
    "SPYT_TABLET_INDEX",
    "YtDynamicOptions",
    "YtDynamicSink",
    "create_output_table",
    "mount_table",
    "output_columns",
    "read_table",
    "retire_writer",
    "with_queue_id",
    "with_source_key",
]
