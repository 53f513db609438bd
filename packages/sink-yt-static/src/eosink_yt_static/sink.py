"""Exactly-once into a YT static table: one transaction tree per batch.

::

    MainTx (driver; id kept in the state store, a Cypress document per writer id)
    |-- SubTx -> Init      create <table>_tmp.<attempt> (strict schema, no sort order)
    |-- PartTx (executors, one per partition attempt, in parallel)
    |     `-- TableWriter  append the partition's rows to <table>_tmp.<attempt>
    `-- SubTx -> Commit    commit the PartTxs of the successful attempts; sort into _sorted,
                           merge with the table into _merged (append), move onto the table,
                           set the proof attribute; then MainTx commits: data + proof at once

Nothing of a batch is visible before MainTx commits; aborting MainTx removes every staging
table (they are created inside it) and every PartTx. The PartTx of a task stays open after its
``write`` returns: the driver commits exactly the PartTxs named by the messages of the
successful task attempts and aborts the others, so a retried or speculative task never adds
its rows twice.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any, Literal

import attrs
import pyarrow as pa
import structlog

import eosink
from eosink import (
    AlreadyCommitted,
    BatchContext,
    ConfigurationError,
    Proof,
    SinkError,
    crash_point,
    hookimpl,
)
from eosink_yt_common import (
    YtConnection,
    client_config_option,
    key_columns,
    retry_unit,
    yt_rows,
    yt_schema,
)
from eosink_yt_static import tx as txs
from eosink_yt_static.cli import YtStaticCommands

log = structlog.get_logger("eosink.yt_static")

#: The table attribute holding the proofs: ``{writer_id: proof json}``.
PROOFS_ATTR = "eosink_proofs"
#: Staging tables carry the MainTx that created them (to find them all inside it).
STAGING_ATTR = "eosink_main_tx"
#: Attributes of the target that staging tables (and so the table that replaces it) inherit.
INHERITED_ATTRS = ("compression_codec", "erasure_codec", "optimize_for", "replication_factor")

Cleanup = Literal["disabled", "truncate", "drop"]
CLEANUPS = ("disabled", "truncate", "drop")


def _cleanup(value: str) -> str:
    lowered = str(value).strip().lower()
    if lowered == "append":
        lowered = "disabled"
    if lowered not in CLEANUPS:
        raise ConfigurationError(
            f"option cleanup={value!r}: use 'disabled' (append to the table), 'truncate' "
            "(replace the rows, keep the table and its schema) or 'drop' (replace the table)"
        )
    return lowered


@attrs.frozen
class YtStaticOptions:
    """Options of the ``yt-static`` sink (Spark options are case and spelling insensitive)."""

    #: YT HTTP proxy, e.g. ``hahn`` or ``http://localhost:8000``.
    proxy: str
    #: The target static table, e.g. ``//home/project/orders``.
    path: str
    #: Token; by default the client reads ``YT_TOKEN`` or ``~/.yt/token``. Never logged.
    token: str | None = attrs.field(default=None, repr=False)
    #: Proxy discovery; turn off for single-proxy setups and emulators.
    proxy_discovery: bool = True
    #: What a batch does with the table's rows: disabled (append), truncate, drop.
    cleanup: str = attrs.field(default="disabled", converter=_cleanup)
    #: Key columns (sorted ascending) of a table the sink creates; an existing table's own
    #: key columns always win.
    key_columns: tuple[str, ...] = ()
    #: Cypress directory of the state store (one document per writer id holding its MainTx);
    #: default ``<path>_eosink_state``.
    state_path: str | None = None
    #: Lifetime of MainTx without a ping. Executors ping it while they write, the driver while
    #: it commits; in between (task scheduling) nobody does, so keep it generous.
    main_tx_timeout_s: float = 600.0
    #: Lifetime of a PartTx without a ping; it must survive from the end of its task until the
    #: driver commits it.
    part_tx_timeout_s: float = 600.0
    #: Lifetime of the Init and Commit sub transactions without a ping (pinged while they run).
    sub_tx_timeout_s: float = 120.0
    #: Merge with chunk combining (fewer, larger chunks).
    combine_chunks: bool = True
    #: Rows per ``write_table`` request of a PartTx.
    rows_per_request: int = 100_000
    #: Extra YT client configuration (YT's config keys), a dict or its JSON text, merged over
    #: eosink's defaults, e.g. ``{"proxy": {"request_timeout": 60000}}``.
    client_config: dict[str, Any] = attrs.field(factory=dict, converter=client_config_option)

    def __attrs_post_init__(self) -> None:
        if not self.path.startswith("//"):
            raise ConfigurationError(
                f"option path={self.path!r}: give an absolute Cypress path, e.g. //home/me/table"
            )
        for name in ("main_tx_timeout_s", "part_tx_timeout_s", "sub_tx_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"option {name}: give a positive number of seconds")

    def connection(self) -> YtConnection:
        return YtConnection(
            proxy=self.proxy,
            token=self.token,
            proxy_discovery=self.proxy_discovery,
            # A failed background ping must not interrupt a Spark worker's main thread; the
            # transaction's own next request reports it.
            config={"ping_failed_mode": "pass", **self.client_config},
        )


@attrs.frozen
class YtStaticState:
    """What ``init`` hands every ``write`` and ``commit``: small and picklable."""

    main_tx: str
    attempt: str
    tmp: str
    schema: str  # JSON of the YT schema of the table the batch ends in (with sort order)
    keys: tuple[str, ...]
    cleanup: str
    resumed: bool = False


@attrs.frozen
class YtStaticMessage:
    """One partition attempt: its open PartTx (``None`` when it had no rows) and its row count."""

    partition_id: int
    attempt: int
    part_tx: str | None
    rows: int

    @property
    def files(self) -> int:
        return 0 if self.part_tx is None else 1


def _parent(path: str) -> tuple[str, str]:
    parent, _, name = path.rstrip("/").rpartition("/")
    return parent or "/", name


def _read_proof(raw: Any, writer_id: str) -> Proof | None:
    if not raw or writer_id not in raw:
        return None
    return Proof.from_json(str(raw[writer_id]))


class YtStaticSink(YtStaticCommands, eosink.Sink):
    """Exactly-once into a YT static table through a per-batch transaction tree."""

    name = "yt-static"
    Options = YtStaticOptions

    # -- plumbing --------------------------------------------------------------------------
    @property
    def connection(self) -> YtConnection:
        return self.options.connection()

    def client(self) -> Any:
        return self.connection.client()

    @property
    def state_dir(self) -> str:
        return self.options.state_path or f"{self.options.path}_eosink_state"

    def state_doc(self, writer_id: str) -> str:
        return f"{self.state_dir}/{txs.node_key(writer_id)}"

    def staging(self, kind: str, attempt: str) -> str:
        return f"{self.options.path}_{kind}.{attempt}"

    def target_attrs(self, client: Any) -> dict[str, Any] | None:
        """The target's attributes (outside any transaction), ``None`` if it does not exist."""
        from yt.wrapper.errors import YtResponseError

        try:
            with txs.in_tx(client, None):
                node = client.get(
                    self.options.path,
                    attributes=["type", "dynamic", "schema", PROOFS_ATTR, *INHERITED_ATTRS],
                )
        except YtResponseError as exc:
            if exc.is_resolve_error():
                return None
            raise
        return dict(getattr(node, "attributes", {}) or {})

    def check_static(self, attrs_: dict[str, Any] | None) -> None:
        if attrs_ is None:
            return
        if attrs_.get("type") != "table":
            raise ConfigurationError(
                f"{self.options.path} is a {attrs_.get('type')}, not a table: point option path "
                "at a static table or at a path where the sink may create one"
            )
        if attrs_.get("dynamic"):
            raise ConfigurationError(
                f"{self.options.path} is a dynamic table; the yt-static sink writes static tables "
                "only (a transaction tree per batch). For dynamic tables use the yt-dynamic sink "
                "(format 'eosink-yt-dynamic', the idempotent receiver), or point option path at a "
                "static table"
            )

    def committed_proof(self, client: Any, writer_id: str) -> Proof | None:
        """The proof of ``writer_id`` as committed (read outside any transaction)."""
        attrs_ = self.target_attrs(client)
        self.check_static(attrs_)
        return _read_proof((attrs_ or {}).get(PROOFS_ATTR), writer_id)

    # -- driver: is_committed ----------------------------------------------------------------
    @hookimpl
    def is_committed(self, ctx: BatchContext) -> Proof | None:
        proof = self.committed_proof(self.client(), ctx.writer_id)
        if proof is not None and proof.batch_id >= ctx.batch_id:
            return proof
        return None

    # -- driver: init ------------------------------------------------------------------------
    def staged_schema(
        self, ctx: BatchContext, schema: pa.Schema, target: dict[str, Any] | None, cleanup: str
    ) -> list[dict[str, Any]]:
        """The schema of the table the batch ends in (with its key columns)."""
        wanted = list(self.options.key_columns)
        existing = [c for c in ((target or {}).get("schema") or []) if isinstance(c, dict)]
        strict = bool(existing) and str(
            getattr(target["schema"], "attributes", {}).get("strict", True)
        ).lower() not in ("false", "%false")
        if cleanup == "drop" or not strict:
            keys = wanted or (key_columns(existing) if strict else [])
            return yt_schema(schema, keys)
        names = [c["name"] for c in existing]
        if sorted(names) != sorted(schema.names):
            missing = sorted(set(names) - set(schema.names))
            extra = sorted(set(schema.names) - set(names))
            raise ConfigurationError(
                f"{self.options.path} has columns {names} but the data has {schema.names} "
                f"(missing {missing}, unknown {extra}): select the table's columns in the query, "
                "write to another path, or use cleanup='drop' to replace the table with the new "
                "schema"
            )
        keys = key_columns(existing)
        if wanted and wanted != keys:
            raise ConfigurationError(
                f"option key_columns={wanted} but {self.options.path} is keyed by {keys}: drop the "
                "option (the table's keys are used) or write to another path"
            )
        ours = {c["name"]: c["type"] for c in yt_schema(schema)}
        for column in existing:
            if not _compatible(ours[column["name"]], column.get("type", "any")):
                raise ConfigurationError(
                    f"column {column['name']!r} is {column.get('type')} in {self.options.path} "
                    f"but {ours[column['name']]} in the data: cast it in the query "
                    f"(e.g. col('{column['name']}').cast(...)) to match the table"
                )
        return [
            {k: v for k, v in c.items() if k in ("name", "type", "sort_order", "required")}
            for c in existing
        ]

    def effective_cleanup(self, ctx: BatchContext) -> str:
        if ctx.mode == "complete" and self.options.cleanup == "disabled":
            return "drop"  # Spark's complete mode: the table is the result of the batch
        return self.options.cleanup

    @hookimpl
    def init(self, ctx: BatchContext, schema: pa.Schema) -> YtStaticState:
        client = self.client()
        target = self.target_attrs(client)
        self.check_static(target)
        cleanup = self.effective_cleanup(ctx)
        final_schema = self.staged_schema(ctx, schema, target, cleanup)
        keys = tuple(key_columns(final_schema))
        main_tx, resumed = self._main_tx(client, ctx)
        attempt = uuid.uuid4().hex[:12]
        tmp = self.staging("tmp", attempt)
        inherited = {k: target[k] for k in INHERITED_ATTRS if target and k in target}

        def create_tmp() -> None:
            with txs.sub_tx(
                client, self.connection, main_tx, self.options.sub_tx_timeout_s, f"init {ctx.label}"
            ):
                client.create(
                    "table",
                    tmp,
                    recursive=True,
                    ignore_existing=True,  # this attempt's own name: a retried unit reuses it
                    attributes={
                        "schema": _unsorted(final_schema),
                        STAGING_ATTR: main_tx,
                        **inherited,
                    },
                )

        retry_unit(create_tmp, what="init sub transaction")
        log.info(
            "yt_static.init",
            writer=ctx.writer_id,
            batch=ctx.batch_id,
            main_tx=main_tx,
            resumed=resumed,
            tmp=tmp,
            cleanup=cleanup,
        )
        return YtStaticState(
            main_tx=main_tx,
            attempt=attempt,
            tmp=tmp,
            schema=json.dumps(final_schema),
            keys=keys,
            cleanup=cleanup,
            resumed=resumed,
        )

    def _main_tx(self, client: Any, ctx: BatchContext) -> tuple[str, bool]:
        """Resume this writer's MainTx if it belongs to this batch and lives, else start anew."""
        doc = self.state_doc(ctx.writer_id)
        with txs.in_tx(client, None):
            state = client.get(doc) if client.exists(doc) else None
        old = state.get("main_tx") if isinstance(state, dict) else None
        if old and txs.alive(client, old):
            if int(state.get("batch_id", -1)) == ctx.batch_id:
                return str(old), True
            log.info("yt_static.main_tx_superseded", main_tx=old, batch=state.get("batch_id"))
            txs.abort(client, str(old))
        main_tx = txs.start_tx(
            client,
            None,
            self.options.main_tx_timeout_s,
            f"eosink yt-static {ctx.label} -> {self.options.path}",
            eosink_writer=ctx.writer_id,
            eosink_batch=ctx.batch_id,
        )
        record = {
            "main_tx": main_tx,
            "batch_id": ctx.batch_id,
            "path": self.options.path,
            "started_at": time.time(),
        }

        def save() -> None:
            with txs.in_tx(client, None):
                client.create("document", doc, recursive=True, ignore_existing=True)
                client.set(doc, record)

        retry_unit(save, what="state store")
        return main_tx, False

    # -- executors: write --------------------------------------------------------------------
    @hookimpl
    def write(
        self,
        ctx: BatchContext,
        state: YtStaticState,
        partition_id: int,
        attempt: int,
        batches: Iterator[pa.RecordBatch],
    ) -> YtStaticMessage:
        spill = _Spill()
        try:
            source = spill.tee(batches)
            first = _peek(source)
            if first is None:
                return YtStaticMessage(partition_id, attempt, None, 0)
            client = self.client()
            rows_box = [0]
            title = f"part {partition_id}.{attempt} of {ctx.label}"
            streams = [_chain(first, source)]

            def write_part() -> str:
                stream = streams.pop() if streams else spill.replay()
                part_tx = txs.start_tx(client, state.main_tx, self.options.part_tx_timeout_s, title)
                try:
                    with txs.Pinger(self.connection, [part_tx], self.options.part_tx_timeout_s / 3):
                        rows_box[0] = self._append(client, part_tx, state.tmp, stream)
                except BaseException:
                    try:
                        txs.abort(client, part_tx)
                    except Exception:  # noqa: BLE001 - the write error matters
                        pass
                    spill.finish(stream)
                    raise
                return part_tx

            part_tx = retry_unit(write_part, what="part transaction")
            log.info(
                "yt_static.part_written",
                writer=ctx.writer_id,
                batch=ctx.batch_id,
                partition=partition_id,
                attempt=attempt,
                part_tx=part_tx,
                rows=rows_box[0],
            )
            return YtStaticMessage(partition_id, attempt, part_tx, rows_box[0])
        finally:
            spill.close()

    def _append(self, client: Any, part_tx: str, tmp: str, stream: Iterator[pa.RecordBatch]) -> int:
        from yt.wrapper import TablePath

        rows = 0
        with txs.in_tx(client, part_tx, ping_ancestors=True):
            pending: list[pa.RecordBatch] = []
            count = 0
            for batch in stream:
                if batch.num_rows == 0:
                    continue
                pending.append(batch)
                count += batch.num_rows
                if count >= self.options.rows_per_request:
                    client.write_table(TablePath(tmp, append=True), _rows(pending))
                    rows += count
                    pending, count = [], 0
            if pending:
                client.write_table(TablePath(tmp, append=True), _rows(pending))
                rows += count
        return rows

    # -- driver: commit ----------------------------------------------------------------------
    @hookimpl
    def commit(
        self,
        ctx: BatchContext,
        state: YtStaticState,
        messages: list[YtStaticMessage],
        proof: Proof,
    ) -> None:
        client = self.client()
        main_tx = state.main_tx
        committed = self.committed_proof(client, ctx.writer_id)
        if committed is not None and committed.batch_id >= ctx.batch_id:
            raise AlreadyCommitted(f"{ctx.label}: batch {committed.batch_id} already committed")
        if not txs.alive(client, main_tx):
            raise SinkError(
                f"{ctx.label}: the main transaction {main_tx} ended before the commit (expired "
                "or aborted), so the batch's staged rows are gone and nothing was published; the "
                "batch is written again when it is retried. If this repeats, raise option "
                f"main_tx_timeout_s (now {self.options.main_tx_timeout_s}s)"
            )
        stages = _Stages()
        with txs.Pinger(self.connection, [main_tx], self.options.main_tx_timeout_s / 3):
            mine = self._prepared_in(client, main_tx, ctx) is None
            if mine:
                with stages("part_txs"):
                    self._commit_parts(client, ctx, state, messages)
                    self._abort_nested(client, main_tx)

                def commit_unit() -> bool:
                    prepared = self._prepared_in(client, main_tx, ctx)
                    if prepared is not None:
                        # Our own earlier try (its reply lost), or another attempt's.
                        return prepared == proof
                    try:
                        self._commit_sub_tx(client, ctx, state, proof, stages)
                    except _PreparedByOther:
                        return False
                    return True

                mine = retry_unit(commit_unit, what="commit sub transaction")
                if mine:
                    crash_point("commit:proof-set")
            if not mine:
                # Another attempt of this batch (a driver that died, or a concurrent one)
                # prepared data + proof inside this MainTx: finish its commit, drop our staging.
                log.info("yt_static.finishing_prepared_commit", main_tx=main_tx, batch=ctx.batch_id)
                self._abort_nested(client, main_tx)

                def drop_staging() -> None:
                    with txs.sub_tx(
                        client,
                        self.connection,
                        main_tx,
                        self.options.sub_tx_timeout_s,
                        f"cleanup {ctx.label}",
                    ):
                        self._remove_staging(client, _parent(self.options.path)[0], main_tx)

                retry_unit(drop_staging, what="cleanup sub transaction")
            with stages("main_tx"):
                self._abort_nested(client, main_tx)
                self._commit_main(client, ctx, main_tx, proof if mine else None)
        crash_point("commit:main-tx-committed")
        log.debug(
            "yt_static.commit_stages", writer=ctx.writer_id, batch=ctx.batch_id, **stages.ms()
        )
        self._forget(client, ctx, main_tx)
        if not mine:
            raise AlreadyCommitted(f"{ctx.label}: committed by another attempt of this batch")

    def _prepared_in(self, client: Any, main_tx: str, ctx: BatchContext) -> Proof | None:
        """A proof of this batch set inside MainTx (by an attempt that did not commit it)."""
        from yt.wrapper.errors import YtResponseError

        try:
            with txs.in_tx(client, main_tx):
                raw = client.get(f"{self.options.path}/@{PROOFS_ATTR}")
        except YtResponseError as exc:
            if exc.is_resolve_error():
                return None
            raise
        proof = _read_proof(raw, ctx.writer_id)
        return proof if proof is not None and proof.batch_id >= ctx.batch_id else None

    def _commit_parts(
        self, client: Any, ctx: BatchContext, state: YtStaticState, messages: list[YtStaticMessage]
    ) -> None:
        """Commit the PartTxs of the successful attempts into MainTx; check that all rows are in."""
        for message in messages:
            if message is None or message.part_tx is None:
                continue
            try:
                txs.commit(client, message.part_tx)
            except Exception as exc:
                if not txs.is_no_such_transaction(exc):
                    raise
                # Committed by an earlier call of this commit, or expired: the count tells.
        expected = sum(m.rows for m in messages if m is not None)
        with txs.in_tx(client, state.main_tx):
            staged = int(client.get(f"{state.tmp}/@row_count"))
        if staged != expected:
            raise SinkError(
                f"{ctx.label}: {staged} rows staged in {state.tmp} but the tasks wrote {expected}: "
                "a part transaction expired between its task and the commit, so nothing was "
                "published and the batch is written again when it is retried. If this repeats, "
                f"raise option part_tx_timeout_s (now {self.options.part_tx_timeout_s}s)"
            )

    def _abort_nested(self, client: Any, main_tx: str) -> None:
        """Abort what is still open under MainTx: PartTxs of failed or superseded task attempts
        (their rows are not wanted) and leftovers of dead attempts."""
        for child in txs.nested(client, main_tx):
            if txs.abort(client, child):
                log.info("yt_static.nested_tx_aborted", main_tx=main_tx, tx=child)

    def _commit_sub_tx(
        self,
        client: Any,
        ctx: BatchContext,
        state: YtStaticState,
        proof: Proof,
        stages: _Stages | None = None,
    ) -> None:
        stages = stages or _Stages()
        path = self.options.path
        parent, name = _parent(path)
        with txs.sub_tx(
            client,
            self.connection,
            state.main_tx,
            self.options.sub_tx_timeout_s,
            f"commit {ctx.label}",
        ) as sub:
            # Serialize commits into this table: a concurrent attempt waits here (lock
            # conflict, retried) until this MainTx ends, then finds the proof.
            client.lock(parent, mode="shared", child_key=name)
            exists = client.exists(path)
            if exists:
                client.lock(path, mode="exclusive")
            with txs.in_tx(client, None):
                raw_committed = (
                    client.get(f"{path}/@{PROOFS_ATTR}")
                    if client.exists(f"{path}/@{PROOFS_ATTR}")
                    else None
                )
            committed = _read_proof(raw_committed, ctx.writer_id)
            if committed is not None and committed.batch_id >= ctx.batch_id:
                raise AlreadyCommitted(f"{ctx.label}: batch {committed.batch_id} already committed")
            with txs.in_tx(client, sub):
                proofs = dict(
                    client.get(f"{path}/@{PROOFS_ATTR}")
                    if exists and client.exists(f"{path}/@{PROOFS_ATTR}")
                    else {}
                )
                prepared = _read_proof(proofs, ctx.writer_id)
                if prepared is not None and prepared.batch_id >= ctx.batch_id:
                    raise _PreparedByOther()  # set inside MainTx after our first check
                inherited = (
                    dict(client.get(path, attributes=list(INHERITED_ATTRS)).attributes)
                    if exists
                    else {}
                )
                result = state.tmp
                final_schema = json.loads(state.schema)
                if state.keys:
                    sorted_path = self.staging("sorted", state.attempt)
                    self._create_staging(client, sorted_path, final_schema, state, inherited)
                    with stages("sort"):
                        client.run_sort(result, sorted_path, sort_by=list(state.keys))
                    result = sorted_path
                    crash_point("commit:sorted")
                if state.cleanup == "disabled" and exists:
                    merged = self.staging("merged", state.attempt)
                    self._create_staging(client, merged, final_schema, state, inherited)
                    with stages("merge"):
                        client.run_merge(
                            [path, result],
                            merged,
                            mode="sorted" if state.keys else "ordered",
                            spec={"combine_chunks": self.options.combine_chunks},
                        )
                    result = merged
                    crash_point("commit:merged")
                if state.cleanup == "truncate" and exists:
                    # Keep the table (its id, schema, attributes, ACL): replace only its rows.
                    with stages("merge"):
                        client.run_merge(
                            result,
                            path,
                            mode="sorted" if state.keys else "ordered",
                            spec={"combine_chunks": self.options.combine_chunks},
                        )
                    crash_point("commit:merged")
                else:
                    with stages("move"):
                        client.move(result, path, force=True, recursive=True)
                    crash_point("commit:moved")
                with stages("proof"):
                    self._remove_staging(client, parent, state.main_tx)
                    proofs[ctx.writer_id] = proof.to_json()
                    client.set(f"{path}/@{PROOFS_ATTR}", proofs)
            stages.start("sub_tx_commit")

    def _create_staging(
        self,
        client: Any,
        path: str,
        schema: list[dict[str, Any]],
        state: YtStaticState,
        inherited: dict[str, Any],
    ) -> None:
        client.create(
            "table",
            path,
            recursive=True,
            attributes={"schema": schema, STAGING_ATTR: state.main_tx, **inherited},
        )

    def _remove_staging(self, client: Any, parent: str, main_tx: str) -> None:
        """Remove every staging table this MainTx created (of any attempt) before it commits."""
        prefix = _parent(self.options.path)[1] + "_"
        for child in client.list(parent, attributes=[STAGING_ATTR]):
            if str(child).startswith(prefix) and child.attributes.get(STAGING_ATTR) == main_tx:
                client.remove(f"{parent}/{child}", force=True)

    def _commit_main(
        self, client: Any, ctx: BatchContext, main_tx: str, proof: Proof | None
    ) -> None:
        """Commit MainTx: the single atomic step. A lost reply is resolved by the proof."""
        try:
            txs.commit(client, main_tx)
        except Exception as exc:
            # The client already resent the commit with the same mutation id; if the reply
            # still did not come through, the table tells whether the commit happened.
            stored = self.committed_proof(self.client(), ctx.writer_id)
            if stored is not None and (
                stored == proof if proof is not None else stored.batch_id >= ctx.batch_id
            ):
                log.warning(
                    "yt_static.commit_reply_lost",
                    writer=ctx.writer_id,
                    batch=ctx.batch_id,
                    main_tx=main_tx,
                    error=type(exc).__name__,
                )
                return
            raise

    def _forget(self, client: Any, ctx: BatchContext, main_tx: str) -> None:
        """Clear the state store's MainTx (best effort: a stale id is found dead next time)."""
        doc = self.state_doc(ctx.writer_id)
        try:
            with txs.in_tx(client, None):
                state = client.get(doc)
                if isinstance(state, dict) and state.get("main_tx") == main_tx:
                    client.set(doc, {**state, "main_tx": None, "committed_batch": ctx.batch_id})
        except Exception as exc:  # noqa: BLE001 - bookkeeping only
            log.info("yt_static.state_store_not_updated", error=type(exc).__name__)

    # -- driver: abort -----------------------------------------------------------------------
    @hookimpl
    def abort(self, ctx: BatchContext, state: YtStaticState | None, messages: list[Any]) -> None:
        if state is None:
            return
        client = self.client()
        # Aborting MainTx removes its staging tables and PartTxs; what a commit published is
        # outside it (a committed MainTx cannot be aborted).
        if txs.abort(client, state.main_tx):
            log.info("yt_static.main_tx_aborted", writer=ctx.writer_id, batch=ctx.batch_id)


class _PreparedByOther(Exception):
    """Another attempt of the batch prepared its commit inside the shared MainTx first."""


class _Stages:
    """Wall time of the internal stages of a commit, for one debug event."""

    def __init__(self) -> None:
        self.took: dict[str, float] = {}
        self._open: tuple[str, float] | None = None

    def start(self, name: str) -> None:
        self._open = (name, time.monotonic())

    def __call__(self, name: str) -> Any:
        import contextlib

        @contextlib.contextmanager
        def timed() -> Iterator[None]:
            started = time.monotonic()
            try:
                yield
            finally:
                self.took[name] = self.took.get(name, 0.0) + time.monotonic() - started

        self._close()
        return timed()

    def _close(self) -> None:
        if self._open is not None:
            name, started = self._open
            self.took[name] = self.took.get(name, 0.0) + time.monotonic() - started
            self._open = None

    def ms(self) -> dict[str, float]:
        self._close()
        return {f"{k}_ms": round(v * 1000, 1) for k, v in self.took.items()}


def _compatible(ours: str, theirs: str) -> bool:
    families = {
        "int8": "int",
        "int16": "int",
        "int32": "int",
        "int64": "int",
        "uint8": "uint",
        "uint16": "uint",
        "uint32": "uint",
        "uint64": "uint",
        "float": "double",
        "double": "double",
        "boolean": "boolean",
        "string": "string",
        "utf8": "string",
        "date": "date",
        "timestamp": "timestamp",
    }
    if theirs in ("any", "yson"):
        return True
    return families.get(ours, ours) == families.get(theirs, theirs)


def _unsorted(schema: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in c.items() if k != "sort_order"} for c in schema]


def _rows(batches: list[pa.RecordBatch]) -> Iterator[dict[str, Any]]:
    for batch in batches:
        yield from yt_rows(batch)


def _peek(it: Iterator[pa.RecordBatch]) -> pa.RecordBatch | None:
    for batch in it:
        if batch.num_rows:
            return batch
    return None


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


class _Spill:
    """Keeps a partition's batches on local disk as they stream by, so a PartTx can be retried
    as a unit after its rows were consumed."""

    def __init__(self) -> None:
        self.path: str | None = None
        self.writer: pa.ipc.RecordBatchStreamWriter | None = None
        self.done = False

    def tee(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            if batch.num_rows:
                if self.writer is None:
                    fd, self.path = tempfile.mkstemp(prefix="eosink-yt-part-", suffix=".arrow")
                    os.close(fd)
                    self.writer = pa.ipc.new_stream(self.path, batch.schema)
                self.writer.write_batch(batch)
            yield batch
        self._seal()

    def finish(self, stream: Iterator[pa.RecordBatch]) -> None:
        """Drain the source into the spill after a failed attempt (for the next one)."""
        for _ in stream:
            pass
        self._seal()

    def _seal(self) -> None:
        if self.writer is not None and not self.done:
            self.writer.close()
        self.done = True

    def replay(self) -> Iterator[pa.RecordBatch]:
        if self.path is None:
            return iter(())
        reader = pa.ipc.open_stream(self.path)
        return iter(reader)

    def close(self) -> None:
        self._seal()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass
