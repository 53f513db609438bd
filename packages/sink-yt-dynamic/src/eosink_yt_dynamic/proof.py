"""The proof of a batch: a row of ``<output>_eosink_progress``, one per (output table, its
node id, writer id), written in the tablet transaction that upserts the batch's rows.

This is the ``yt-dynamic`` sink's exactly-once evidence, in one place (:class:`ProgressTable`:
where it lives, how it is read and written; the sink's ``is_committed`` and ``commit`` call it).

A proof names the table it is about by path *and* node id: a progress table shared by several
outputs (fan-out with one writer id and one ``progress_path``) keeps their proofs apart, and a
table dropped and created again under the same path (a new node id) starts without proofs
instead of skipping batches it does not hold. Rows of an earlier table at the path are deleted
when the next batch starts.

Each row also carries the source spans its writer covered (:mod:`eosink_yt_dynamic.sources`),
and a commit refuses spans that meet another writer's. Every commit writes the output's *lock
row* (writer id ``""``) too, so that commits of two writers into one output are tablet
transactions writing one common row: the later one fails with a conflict, is redone, and then
sees the other's spans. Correctness of the data never depends on this table: losing a proof
only costs rewriting the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from eosink.plugin import AlreadyCommitted, BatchContext, Proof
from eosink_yt_common import retry_unit
from eosink_yt_dynamic.sources import Spans, decode_spans, encode_spans, merge_spans
from eosink_yt_dynamic.tables import ensure_aux_table, ql_string

PROGRESS_SCHEMA = [
    {"name": "output", "type": "string", "sort_order": "ascending"},
    {"name": "output_id", "type": "string", "sort_order": "ascending"},
    {"name": "writer_id", "type": "string", "sort_order": "ascending"},
    {"name": "batch_id", "type": "int64"},
    {"name": "proof", "type": "string"},
    {"name": "sources", "type": "string"},
]

#: The writer id of the lock row (writer ids are never empty).
LOCK_ROW = ""


@attrs.frozen
class ProgressTable:
    """The proofs of one output table, ``output``, kept in the table at ``path``."""

    path: str
    output: str

    def exists(self, client: Any) -> bool:
        return ensure_aux_table(client, self.path, PROGRESS_SCHEMA, create=False)

    def ensure(self, client: Any) -> None:
        ensure_aux_table(client, self.path, PROGRESS_SCHEMA)

    def _key(self, output_id: str, writer_id: str) -> dict[str, str]:
        return {"output": self.output, "output_id": output_id, "writer_id": writer_id}

    def proof(self, client: Any, output_id: str, writer_id: str) -> Proof | None:
        rows = list(client.lookup_rows(self.path, [self._key(output_id, writer_id)]))
        return Proof.from_json(rows[0]["proof"]) if rows else None

    def writers(self, client: Any, output_id: str) -> dict[str, Spans]:
        """The spans of every writer of this table (the batch's own writer included: its
        earlier batches' rows are checked too); rows of earlier tables at the same path are
        deleted on the way (best effort: they are never read again)."""
        rows = list(
            client.select_rows(
                f"output_id, writer_id, sources from [{self.path}] "
                f"where output = {ql_string(self.output)}"
            )
        )
        stale = [
            self._key(r["output_id"], r["writer_id"]) for r in rows if r["output_id"] != output_id
        ]
        if stale:
            client.delete_rows(self.path, stale)
        return {
            r["writer_id"]: decode_spans(r["sources"])
            for r in rows
            if r["output_id"] == output_id and r["writer_id"] != LOCK_ROW
        }

    def write(self, client: Any, output_id: str, ctx: BatchContext, proof: Proof) -> None:
        """Write ``proof`` in the caller's (tablet) transaction: the transactional mode's
        commit, which read the stored proof in that transaction first. No spans, no lock row:
        its rows are exact by atomicity, and writers of other keys must not conflict."""
        client.insert_rows(
            self.path,
            [
                {
                    **self._key(output_id, ctx.writer_id),
                    "batch_id": ctx.batch_id,
                    "proof": proof.to_json(),
                    "sources": None,
                }
            ],
        )

    def record(
        self,
        client: Any,
        ctx: BatchContext,
        proof: Proof,
        output_id: str,
        spans: Spans,
        check: Callable[[Spans, dict[str, Spans]], None] | None,
    ) -> None:
        """Store ``proof`` and the writer's spans grown by ``spans``, forward only.

        A stored proof of this batch or a later one means ``AlreadyCommitted`` (unless it is
        ours: a commit whose reply was lost). ``check(mine, others)`` sees the writer's new
        spans and the other writers' and raises to refuse the commit.
        """

        def unit() -> None:
            with client.Transaction(type="tablet", ping=False):
                rows = list(
                    client.select_rows(
                        f"writer_id, batch_id, proof, sources from [{self.path}] "
                        f"where output = {ql_string(self.output)} "
                        f"and output_id = {ql_string(output_id)}"
                    )
                )
                stored = next((r for r in rows if r["writer_id"] == ctx.writer_id), None)
                if stored is not None:
                    if stored["proof"] == proof.to_json():
                        return
                    if stored["batch_id"] >= ctx.batch_id:
                        raise AlreadyCommitted(
                            f"{ctx.label}: the proof of batch {stored['batch_id']} is already "
                            f"in {self.path}"
                        )
                mine = merge_spans(decode_spans(stored and stored["sources"]), spans)
                if check is not None:
                    others = {
                        r["writer_id"]: decode_spans(r["sources"])
                        for r in rows
                        if r["writer_id"] not in (ctx.writer_id, LOCK_ROW)
                    }
                    check(mine, others)
                row = {"batch_id": ctx.batch_id, "proof": proof.to_json()}
                client.insert_rows(
                    self.path,
                    [
                        {
                            **self._key(output_id, ctx.writer_id),
                            **row,
                            "sources": encode_spans(mine),
                        },
                        {**self._key(output_id, LOCK_ROW), **row, "sources": None},
                    ],
                )

        retry_unit(unit, what=f"{ctx.label} proof")


def retire_writer(
    client: Any, path: str, writer_id: str, *, progress_path: str | None = None
) -> int:
    """Forget a writer of the table at ``path``: its proofs and the source rows it covered.

    For a query that was replaced by another one reading the same queue under a new writer id:
    the new one is then no longer refused for writing rows the old one wrote. A query still
    running under ``writer_id`` would rewrite its next batch's rows (harmless) and record them
    again. Returns the number of proofs removed.
    """
    table = progress_path or f"{path}_eosink_progress"
    rows = list(
        client.select_rows(
            f"output, output_id, writer_id from [{table}] "
            f"where output = {ql_string(path)} and writer_id = {ql_string(writer_id)}"
        )
    )
    if rows:
        client.delete_rows(table, rows)
    return len(rows)
