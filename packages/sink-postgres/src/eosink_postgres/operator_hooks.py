"""The ``postgres`` sink's operator hooks: its answers to ``eosink status|verify|cleanup``.

``eosink cleanup postgres public.orders -o url=postgresql://writer@db/shop`` lists the staging
tables of failed attempts at that target (a dry run), ``--delete`` drops those older than
``--older-than``. A staging table is never referenced by a proof: a commit drops the tables it
moved in its own transaction, so what is left belongs to an attempt that never committed (or
to one still running: hence the age threshold).
"""

from __future__ import annotations

import uuid
from typing import Any

from psycopg import sql

from eosink.plugin import Proof, clock, hookimpl
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification

STAGING = "staging table"


class PostgresOperatorHooks:
    """Operator hooks of the postgres sink (``PostgresSink`` provides ``connect``/``options``)."""

    options: Any
    connect: Any

    def _latest_proofs(self, conn: Any, target_id: str) -> list[tuple[Proof, str]]:
        from eosink_postgres import proof as proof_rows
        from eosink_postgres import store

        rows = conn.execute(
            sql.SQL(
                "SELECT DISTINCT ON (writer_id) proof, mode FROM {} WHERE target_id = %s "
                "ORDER BY writer_id, batch_id DESC"
            ).format(store.ident(self.options.meta_schema, proof_rows.PROOFS)),
            (uuid.UUID(target_id),),
        ).fetchall()
        return [(Proof.from_dict(r[0]), r[1]) for r in rows]

    def _target(self, conn: Any) -> str | None:
        """The target's identity (None: no table, or no proofs of it)."""
        from eosink_postgres import identity, store
        from eosink_postgres import proof as proof_rows

        oid = store.target_oid(conn, self.options)
        if oid is None or not proof_rows.meta_ready(conn, self.options):
            return None
        found = identity.find(conn, self.options, oid)
        return found.target_id if found is not None else None

    def _ours(self, about: dict[str, Any], target_id: str | None) -> bool:
        """Whether a staging table (its comment: ``about``) was staged for this target."""
        if target_id is not None and about.get("target_id") == target_id:
            return True
        return bool(about.get("target") == self.options.qualified)

    @hookimpl
    def target_status(self) -> TargetStatus:
        from eosink_postgres import store

        with self.connect(autocommit=True) as conn:
            target_id = self._target(conn)
            proofs = self._latest_proofs(conn, target_id) if target_id is not None else []
            staging = [
                s for s in store.staging_tables(conn, self.options) if self._ours(s[1], target_id)
            ]
        return TargetStatus(
            target=self.options.qualified,
            writers=tuple(p for p, _ in proofs),
            details={
                "target_id": target_id,
                "meta_schema": self.options.meta_schema,
                "staging_tables": len(staging),
            },
        )

    @hookimpl
    def verify_target(self) -> Verification:
        """Every writer's progress row agrees with its latest proof; for a target written
        only by appends, the table holds as many rows as the proofs count."""
        from eosink_postgres import proof as proof_rows
        from eosink_postgres import store

        problems: list[str] = []
        with self.connect(autocommit=True) as conn:
            target_id = self._target(conn)
            if target_id is None:
                return Verification(self.options.qualified, 0, ())
            key = uuid.UUID(target_id)
            meta = self.options.meta_schema
            progress = dict(
                conn.execute(
                    sql.SQL("SELECT writer_id, last_batch FROM {} WHERE target_id = %s").format(
                        store.ident(meta, proof_rows.PROGRESS)
                    ),
                    (key,),
                ).fetchall()
            )
            latest = self._latest_proofs(conn, target_id)
            for proof, _ in latest:
                if progress.get(proof.writer_id) != proof.batch_id:
                    problems.append(
                        f"writer {proof.writer_id!r}: progress says batch "
                        f"{progress.get(proof.writer_id)}, the latest proof {proof.batch_id}"
                    )
            (modes, rows) = conn.execute(
                sql.SQL(
                    "SELECT array_agg(DISTINCT mode), coalesce(sum(rows), 0) FROM {} "
                    "WHERE target_id = %s"
                ).format(store.ident(meta, proof_rows.PROOFS)),
                (key,),
            ).fetchone()
            if modes == ["append"]:
                (held,) = conn.execute(
                    sql.SQL("SELECT count(*) FROM {}").format(store.target_ident(self.options))
                ).fetchone()
                if held != rows:
                    problems.append(f"the proofs count {rows} rows, the table holds {held}")
        return Verification(self.options.qualified, len(latest) + 1, tuple(problems))

    @hookimpl
    def cleanup_target(self, older_than_s: float, delete: bool) -> CleanupReport:
        """Staging tables of this target's failed attempts (dry run unless ``delete``)."""
        from eosink_postgres import store

        removable: list[Leftover] = []
        kept: list[Leftover] = []
        with self.connect(autocommit=True) as conn:
            target_id = self._target(conn)
            now = clock.now()
            for name, about in store.staging_tables(conn, self.options):
                if not self._ours(about, target_id):
                    continue  # another target's: not ours to judge
                age = now - float(about.get("created", now))
                item = Leftover(f"{self.options.meta_schema}.{name}", STAGING, None, age)
                (removable if age >= older_than_s else kept).append(item)
            if delete:
                for item in removable:
                    conn.execute(
                        sql.SQL("DROP TABLE IF EXISTS {}").format(
                            store.ident(self.options.meta_schema, item.path.split(".", 1)[1])
                        )
                    )
        return CleanupReport(self.options.qualified, tuple(removable), tuple(kept), delete)
