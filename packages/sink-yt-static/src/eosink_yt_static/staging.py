"""Staging: SubTx -> Init, and the PartTx TableWriters of the tasks.

Init (a SubTx of MainTx, on the driver) creates this attempt's ``tmp.<attempt>`` table in the
staging folder ``<table>_eosink_staging.<writer id>.<MainTx id>`` (strict schema, sort order
removed). Each task then opens a PartTx under MainTx and appends its partition to that table
(the TableWriter), in requests of ``rows_per_request`` rows; its PartTx stays open after the
task returns, for the driver to commit (or abort, for an attempt Spark did not keep).

Everything staged is created inside MainTx: nobody outside sees it, aborting MainTx removes
it, and the commit removes the whole staging folder (this writer's in this MainTx: nothing is
listed) before MainTx commits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs
import pyarrow as pa

from eosink.logs import get_logger
from eosink.plugin import BatchContext
from eosink_yt_common import retry_unit, yt_rows
from eosink_yt_static import tx as txs
from eosink_yt_static.options import YtStaticOptions
from eosink_yt_static.spill import PartFeed

log = get_logger("eosink.yt_static")


@attrs.frozen
class YtStaticState:
    """What ``init`` hands every ``write`` and ``commit``: small and picklable."""

    main_tx: str
    attempt: str
    staging: str  # this writer's staging folder
    tmp: str
    schema: str  # JSON of the YT schema of the table the batch ends in (with sort order)
    keys: tuple[str, ...]
    cleanup: str
    resumed: bool = False


@attrs.frozen
class YtStaticMessage:
    """One partition attempt: its open PartTx (``None`` when it had no rows), its row count and
    the bytes it kept on local disk for a retry."""

    partition_id: int
    attempt: int
    part_tx: str | None
    rows: int
    spilled_bytes: int = 0

    @property
    def files(self) -> int:
        return 0 if self.part_tx is None else 1


def staging_folder(options: YtStaticOptions, writer_id: str, main_tx: str) -> str:
    """This writer's staging folder in this MainTx (attempts that resume MainTx share it)."""
    return f"{options.path}_eosink_staging.{txs.node_key(writer_id)}.{main_tx}"


def create_table(
    client: Any, path: str, schema: list[dict[str, Any]], inherited: dict[str, Any]
) -> None:
    """A staging table (inside the current transaction), with the target's codecs."""
    client.create("table", path, recursive=True, attributes={"schema": schema, **inherited})


def init(
    client: Any,
    options: YtStaticOptions,
    ctx: BatchContext,
    main_tx: str,
    attempt: str,
    final_schema: list[dict[str, Any]],
    inherited: dict[str, Any],
) -> str:
    """SubTx -> Init: create this attempt's ``tmp`` table; returns its path."""
    tmp = f"{staging_folder(options, ctx.writer_id, main_tx)}/tmp.{attempt}"
    unsorted = [{k: v for k, v in c.items() if k != "sort_order"} for c in final_schema]

    def create_tmp() -> None:
        with txs.sub_tx(client, main_tx, options.sub_tx_timeout_s, f"init {ctx.label}"):
            if not client.exists(tmp):  # a retried unit may have created it
                create_table(client, tmp, unsorted, inherited)

    retry_unit(create_tmp, what="init sub transaction")
    return tmp


def write_part(
    options: YtStaticOptions,
    ctx: BatchContext,
    state: YtStaticState,
    partition_id: int,
    attempt: int,
    batches: Iterator[pa.RecordBatch],
) -> YtStaticMessage:
    """PartTx -> TableWriter: append one partition to ``tmp`` inside a new PartTx, left open."""
    feed = PartFeed(batches)
    try:
        client = options.connection().client()
        title = f"part {partition_id}.{attempt} of {ctx.label}"
        rows_box = [0]

        def write_unit() -> str | None:
            requests = feed.requests(options.rows_per_request)
            first = next(requests, None)
            if first is None:
                return None  # no rows: no PartTx
            part_tx = txs.start_tx(client, state.main_tx, options.part_tx_timeout_s, title)
            try:
                with txs.Pinger(options.connection(), [part_tx], options.part_tx_timeout_s / 3):
                    rows_box[0] = _append(client, part_tx, state.tmp, first, requests)
            except BaseException:
                try:
                    txs.abort(client, part_tx)
                except Exception:  # noqa: BLE001 - the write error matters
                    pass
                raise
            return part_tx

        part_tx = retry_unit(write_unit, what="part transaction")
        if part_tx is not None:
            log.info(
                "yt_static.part_written",
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                partition=partition_id,
                attempt=attempt,
                part_tx=part_tx,
                rows=rows_box[0],
                spilled_bytes=feed.spilled_bytes,
            )
        return YtStaticMessage(partition_id, attempt, part_tx, rows_box[0], feed.spilled_bytes)
    finally:
        feed.close()


def _append(
    client: Any,
    part_tx: str,
    tmp: str,
    first: list[pa.RecordBatch],
    rest: Iterator[list[pa.RecordBatch]],
) -> int:
    from yt.wrapper import TablePath

    rows = 0
    with txs.in_tx(client, part_tx, ping_ancestors=True):
        for request in _chain(first, rest):
            client.write_table(TablePath(tmp, append=True), _rows(request))
            rows += sum(b.num_rows for b in request)
    return rows


def _chain(
    first: list[pa.RecordBatch], rest: Iterator[list[pa.RecordBatch]]
) -> Iterator[list[pa.RecordBatch]]:
    yield first
    yield from rest


def _rows(batches: list[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield from yt_rows(batch)
