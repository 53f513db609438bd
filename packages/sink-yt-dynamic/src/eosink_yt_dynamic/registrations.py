"""The cross-chunk duplicate check: key runs registered in ``<output>_eosink_keys``.

Before a task writes a chunk, it registers the chunk's keys (as row-index runs, see
:mod:`eosink_yt_dynamic.keys`) for its batch attempt, and refuses a key some other chunk of
the attempt registered. The table holds, per source group and slice of :data:`BUCKET_ROWS`
row indexes (a *bucket*), the union of the runs every chunk registered there, plus one marker
row per chunk. A chunk's registration is one tablet transaction:

1. look up its marker and the buckets its runs touch (exact keys: no scan, and the rows read
   do not grow with the chunks of the batch; contiguous rows touch one or two buckets);
2. a marker means an earlier attempt of this very task registered and checked the chunk:
   done; a bucket whose runs meet the chunk's is a duplicate: refused, nothing written;
3. write the buckets grown by the chunk's runs, and the marker.

Two chunks sharing a key share its bucket row, and each writes it: if their transactions
overlap, the later commit fails with a conflict and is redone, and then reads the other's
runs. So of any two chunks with a common key, the one registering last fails before writing,
and no row of a batch is overwritten by another row of the same batch. Rows of committed
batches are deleted by the next commit.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import numpy as np

from eosink.logs import get_logger
from eosink.plugin import BatchContext
from eosink_yt_common import retry_unit
from eosink_yt_dynamic.keys import Runs, bucketed, first_common, union_runs
from eosink_yt_dynamic.tables import ensure_aux_table, ql_string

log = get_logger("eosink.yt_dynamic")

KEYS_SCHEMA = [
    {"name": "output_id", "type": "string", "sort_order": "ascending"},
    {"name": "writer_id", "type": "string", "sort_order": "ascending"},
    {"name": "batch_id", "type": "int64", "sort_order": "ascending"},
    {"name": "attempt", "type": "string", "sort_order": "ascending"},
    {"name": "slot", "type": "string", "sort_order": "ascending"},
    {"name": "runs", "type": "string"},
]


def _slot(kind: str, *parts: Any) -> str:
    return kind + json.dumps(list(parts), separators=(",", ":"), default=str)


@attrs.frozen
class Registrations:
    """The registrations of one batch attempt (``attempt``: a new id per ``init``)."""

    path: str
    output_id: str
    writer_id: str
    batch_id: int
    attempt: str

    def register(self, client: Any, partition_id: int, chunk: int, runs: Runs):
        """Register ``runs`` of a chunk: None, or the first key another chunk registered
        before, as ``(group values, row index)``."""
        scope = {
            "output_id": self.output_id,
            "writer_id": self.writer_id,
            "batch_id": self.batch_id,
            "attempt": self.attempt,
        }
        marker = _slot("c", partition_id, chunk)
        buckets = {_slot("b", *key): piece for key, piece in bucketed(runs).items()}

        def unit():
            with client.Transaction(type="tablet", ping=False):
                keys = [{**scope, "slot": s} for s in (marker, *buckets)]
                found = {r["slot"]: r["runs"] for r in client.lookup_rows(self.path, keys)}
                if marker in found:
                    return None
                rows = [{**scope, "slot": marker, "runs": None}]
                for slot, (values, flat) in buckets.items():
                    if slot in found:
                        theirs = np.asarray(json.loads(found[slot]), dtype=np.int64)
                        row = first_common(flat, theirs)
                        if row is not None:
                            return values, row
                        flat = union_runs(theirs, flat)
                    rows.append({**scope, "slot": slot, "runs": json.dumps(flat.tolist())})
                client.insert_rows(self.path, rows)
                return None

        return retry_unit(unit, what=f"key registration of partition {partition_id} chunk {chunk}")


def ensure_keys_table(client: Any, path: str) -> None:
    ensure_aux_table(client, path, KEYS_SCHEMA)


def drop_registrations(
    client: Any,
    path: str,
    output_id: str,
    ctx: BatchContext,
    *,
    upto: bool = False,
    attempt: str | None = None,
) -> None:
    """Delete registrations no check needs any more: of this batch's ``attempt``, or of every
    batch of the writer up to this one. Best effort: they are not data."""
    where = (
        f"output_id = {ql_string(output_id)} and writer_id = {ql_string(ctx.writer_id)} "
        f"and batch_id {'<=' if upto else '='} {ctx.batch_id}"
    )
    if attempt is not None:
        where += f" and attempt = {ql_string(attempt)}"
    try:
        keys = list(
            client.select_rows(
                f"output_id, writer_id, batch_id, attempt, slot from [{path}] where {where}"
            )
        )
        if keys:
            client.delete_rows(path, keys)
    except Exception as exc:  # noqa: BLE001 - leftovers are harmless and retried next commit
        log.warning("yt_dynamic.key_runs_cleanup_failed", table=path, error=type(exc).__name__)
