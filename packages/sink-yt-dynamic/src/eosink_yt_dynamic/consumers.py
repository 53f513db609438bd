"""The transactional mode moves the YT queue consumer of the batch's source with its rows.

Reading from eosink-yt-queue with a consumer, the source advances the consumer in its
``commit(end)``, which Spark calls after the batch: a driver that dies between the sink's
commit and that call leaves the consumer behind the table. Here the consumer moves in the
batch's tablet transaction instead, with the rows and the proof: all three become visible
together, or none does. The source's own advance afterwards finds it there already.

Where the batch's end is: Spark's offset log, ``<checkpoint>/offsets/<batch id>``, one line per
source (:func:`eosink.spark.checkpoint.batch_offsets`); eosink-yt-queue's lines name the
consumer and the proxy of its cluster (:mod:`eosink_yt_common.queue_offsets`). Only a consumer
on the output's cluster moves here: a tablet transaction spans one cluster. For every tablet:

* the consumer never moves backwards: a tablet whose stored offset is at or past the batch's
  end is left alone (another reader of the same consumer went further);
* otherwise ``advance_consumer`` gets the offset just read as ``old_offset``: inside the
  transaction YT checks it still holds, so a concurrent advance is refused instead of
  overwritten;
* the consumer is progress for YT (trimming, lag), never what a replay reads (the checkpoint
  is): a checkpoint that cannot be read, offsets without a consumer (checkpoints written by
  eosink-yt-queue before offsets named it) or an advance YT refuses are logged, and the batch
  commits its rows and proof as it would without a consumer; the source's ``commit(end)``
  advances the consumer afterwards, as before.
"""

from __future__ import annotations

from typing import Any

from eosink.logs import get_logger
from eosink.plugin import BatchContext
from eosink.spark.checkpoint import batch_offsets, session_storage_options
from eosink_yt_common.queue_offsets import ConsumerPosition, consumer_position, same_cluster

log = get_logger("eosink.yt_dynamic")


def batch_consumers(ctx: BatchContext, proxy: str) -> list[ConsumerPosition]:
    """The consumers of the batch's YT queue sources on ``proxy``'s cluster, and where the
    batch leaves them; none for a batch job, a query without a checkpoint, or a checkpoint
    that cannot be read (logged)."""
    if ctx.kind != "stream" or not ctx.checkpoint:
        return []
    try:
        lines = batch_offsets(ctx.checkpoint, ctx.batch_id, session_storage_options(ctx.checkpoint))
    except Exception as exc:  # noqa: BLE001 - the consumer is not the batch's exactness
        log.warning(
            "yt_dynamic.consumer_offsets_unreadable",
            batch=ctx.label,
            checkpoint=ctx.checkpoint,
            error=f"{type(exc).__name__}: {exc}",
        )
        return []
    found = [p for p in map(consumer_position, lines) if p is not None]
    here = [p for p in found if same_cluster(p.proxy, proxy)]
    for other in found:
        if other not in here:
            log.info(
                "yt_dynamic.consumer_on_other_cluster", consumer=other.consumer, proxy=other.proxy
            )
    return here


def stored_offsets(client: Any, consumer: str) -> dict[tuple[str, int], int]:
    """The consumer's offsets now: ``(queue path, partition index) -> offset``."""
    rows = client.select_rows(f"queue_path, partition_index, [offset] from [{consumer}]")
    return {(str(r["queue_path"]), int(r["partition_index"])): int(r["offset"]) for r in rows}


def advance(client: Any, position: ConsumerPosition) -> dict[tuple[str, int], int]:
    """Move ``position.consumer`` forward to the batch's end, in the transaction ``client`` is
    in (``client.Transaction(transaction_id=...)``: yt.wrapper sends its id with the request);
    returns the tablets moved."""
    stored = stored_offsets(client, position.consumer)
    moved = {}
    for (queue, tablet), row in sorted(position.offsets.items()):
        now = stored.get((queue, tablet))
        if now is not None and now >= row:
            continue
        client.advance_consumer(position.consumer, queue, tablet, old_offset=now, new_offset=row)
        moved[(queue, tablet)] = row
    return moved


def advance_all(client: Any, ctx: BatchContext, positions: list[ConsumerPosition]) -> None:
    """:func:`advance` every consumer; one YT refuses is logged and left to the source."""
    for position in positions:
        try:
            moved = advance(client, position)
        except Exception as exc:  # noqa: BLE001 - the rows and proof commit all the same
            log.warning(
                "yt_dynamic.consumer_not_advanced",
                batch=ctx.label,
                consumer=position.consumer,
                error=f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}",
            )
            continue
        log.info(
            "yt_dynamic.consumer_advanced",
            batch=ctx.label,
            consumer=position.consumer,
            tablets=len(moved),
        )
