"""The options of the ``eosink-yt-queue`` source, spelled and parsed once.

Spark hands them as case-insensitive strings (``maxRowsPerTrigger`` arrives as
``maxrowspertrigger``); :func:`eosink.plugin.options_from` maps any spelling onto these fields.
"""

from __future__ import annotations

import attrs
from eosink_yt_common import YtClientOptions

from eosink.plugin import ConfigurationError

#: Rows per ``pull_queue`` request (YT's own default batch is 1000 rows).
PULL_ROWS = 10_000


def _positive_or_none(instance: object, attribute: attrs.Attribute, value: int | None) -> None:
    if value is not None and value <= 0:
        raise ConfigurationError(f"option {attribute.name}: give a positive number, not {value}")


@attrs.frozen(kw_only=True)
class QueueOptions(YtClientOptions):
    """What to read and how much per micro-batch."""

    #: The queue: an ordered dynamic table, e.g. ``//home/app/events`` (or ``.load(path)``);
    #: several queues separated by commas, ``//home/app/a,//home/app/b``.
    path: str
    #: ``earliest`` (the first row not trimmed), ``latest`` (rows appended from now on), or
    #: JSON ``{"<queue>": {"<tablet>": <row index>, ...}}`` naming every tablet of every queue
    #: (``{"<tablet>": <row index>, ...}`` when one queue is read).
    starting_offsets: str = "earliest"
    #: At most this many rows per micro-batch, shared across tablets; unset: all available.
    max_rows_per_trigger: int | None = attrs.field(default=None, validator=_positive_or_none)
    #: Add SPYT's service columns ``__spyt_streaming_src_tablet_index`` / ``_row_index``.
    include_service_columns: bool = False
    #: A column holding the queue path of every row (several queues: required with the service
    #: columns, since each queue numbers its rows on its own).
    queue_id_column: str | None = None
    #: A YT consumer (sorted dynamic table with ``@treat_as_queue_consumer=%true``): registered
    #: with every queue when the query starts, advanced after every committed batch.
    consumer_path: str | None = None
    #: Register the consumer as vital: YT's automatic trimming then waits for it.
    consumer_vital: bool = False
    #: Rows of one tablet read by one Spark task at most (a bigger range is split).
    rows_per_partition: int = attrs.field(default=100_000, validator=_positive_or_none)
    #: Rows per ``pull_queue`` request inside a task.
    pull_rows: int = attrs.field(default=PULL_ROWS, validator=_positive_or_none)

    def __attrs_post_init__(self) -> None:
        queues = self.queues
        if not queues or len(set(queues)) != len(queues):
            raise ConfigurationError(
                f"option path: {self.path!r} must name one queue or several different ones, "
                "separated by commas"
            )
        if len(queues) > 1 and self.include_service_columns and not self.queue_id_column:
            raise ConfigurationError(
                f"{len(queues)} queues are read with includeServiceColumns: rows of different "
                "queues share (tablet index, row index), so a receiver keyed by them would "
                "overwrite one queue's rows with another's. Set queueIdColumn (e.g. queue_id) "
                "and put that column first in the output table's key"
            )

    @property
    def queues(self) -> list[str]:
        """The queue paths, in the order given."""
        return [p.strip() for p in self.path.split(",") if p.strip()]
