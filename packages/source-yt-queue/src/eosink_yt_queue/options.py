"""The options of the ``eosink-yt-queue`` source, spelled and parsed once.

Spark hands them as case-insensitive strings (``maxRowsPerTrigger`` arrives as
``maxrowspertrigger``); :func:`eosink.options_from` maps any spelling onto these fields.
"""

from __future__ import annotations

import attrs
from eosink_yt_common import YtClientOptions

from eosink import ConfigurationError

#: Rows per ``pull_queue`` request (YT's own default batch is 1000 rows).
PULL_ROWS = 10_000


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ConfigurationError(f"option {attribute.name}: give a positive number, not {value}")


@attrs.frozen(kw_only=True)
class QueueOptions(YtClientOptions):
    """What to read and how much per micro-batch."""

    #: The queue: an ordered dynamic table, e.g. ``//home/app/events`` (or ``.load(path)``).
    path: str
    #: ``earliest`` (the first row not trimmed), ``latest`` (rows appended from now on), or
    #: JSON ``{"<tablet>": <row index>, ...}`` naming every tablet.
    starting_offsets: str = "earliest"
    #: At most this many rows per micro-batch, shared across tablets; unset: all available.
    max_rows_per_trigger: int | None = attrs.field(default=None, validator=_positive_or_none)
    #: Add SPYT's service columns ``__spyt_streaming_src_tablet_index`` / ``_row_index``.
    include_service_columns: bool = False
    #: Rows of one tablet read by one Spark task at most (a bigger range is split).
    rows_per_partition: int = attrs.field(default=100_000, validator=_positive_or_none)
    #: Rows per ``pull_queue`` request inside a task.
    pull_rows: int = attrs.field(default=PULL_ROWS, validator=_positive_or_none)
