"""SPYT's transactional mode (``mode="transactional"``): one tablet transaction per batch.

The idempotent receiver makes replays harmless by keying every row by its source row, so it
only takes one-to-one queries. Here exactness comes from atomicity instead, so any query works
(aggregations in Spark's ``update`` output mode included), keyed by the output table's key:

* ``init`` (driver) starts ONE sticky tablet transaction and keeps it alive with a pinger
  thread for the batch's whole life (:class:`Pinger`);
* every task attaches to it by id and inserts its partition's rows (``insert_rows`` with the
  transaction's id); nothing is visible before the commit. A task Spark runs again inserts the
  same rows into the same transaction again: an upsert of a row over itself, which leaves each
  key once (the last write of a key in a transaction wins);
* ``commit`` (driver) reads this writer's proof in the transaction (a proof of this batch or a
  later one: ``AlreadyCommitted``), writes the new proof row in it and commits: rows and proof
  become visible together, or neither does. A failed batch's transaction is aborted (``abort``)
  or expires when nobody pings it (a killed driver): its rows never become visible.

Over HTTP a tablet transaction is *sticky*: it lives in the proxy that started it, and every
request naming it must reach that proxy (another one answers "Sticky transaction ... is not
found"). The driver therefore picks one proxy (:func:`pin_proxy`) and every request of the
batch's transaction, the tasks' inserts included, goes there.

YT's limits become errors that name the fix: rows per transaction (the cluster's
``max_rows_per_transaction``, 100,000 by default; error 1717), a transaction that expired or
was lost, null key values, rows of one batch sharing a key.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from eosink.logs import get_logger
from eosink.plugin import BatchContext, ConfigurationError, SinkError
from eosink_yt_common import YtConnection

log = get_logger("eosink.yt_dynamic")

#: YT's error code for a transaction over ``max_rows_per_transaction`` (TooManyRowsInTransaction).
TOO_MANY_ROWS = 1717

#: The transaction's YT ids of this process, with their pingers (the driver's ``init`` started
#: them; ``commit``/``abort`` in the same process stop them).
_PINGERS: dict[str, Pinger] = {}
_PINGERS_LOCK = threading.Lock()


@attrs.frozen
class TransactionState:
    """What ``init`` decided, shipped to every task: the transaction and where it lives."""

    transaction_id: str
    #: The proxy holding the (sticky) transaction: every request naming it goes there.
    proxy: str
    key: tuple[str, ...]
    #: The node id of the output table the batch writes into (proofs are about it).
    output_id: str


@attrs.frozen
class TransactionMessage:
    """What one task inserted into the batch's transaction."""

    partition_id: int
    rows: int
    chunks: int
    #: Sorted 64-bit hashes of the partition's keys: the driver finds keys two partitions share.
    key_hashes: bytes = b""

    @property
    def files(self) -> int:  # the core's logs count "files": here, insert requests
        return self.chunks


def pin_proxy(connection: YtConnection) -> str:
    """The one proxy that serves the batch's transaction: with proxy discovery on, one of the
    cluster's proxies chosen as the client chooses them (``/hosts``, its role and bans);
    else the configured proxy."""
    client = connection.client()
    if not client.config["proxy"]["enable_proxy_discovery"]:
        return connection.proxy
    from yt.wrapper.http_driver import HeavyProxyProvider, HeavyProxyProviderState

    return str(HeavyProxyProvider(client, HeavyProxyProviderState())())


def pinned(connection: YtConnection, proxy: str) -> YtConnection:
    """``connection`` to exactly ``proxy``, discovery off (over the user's client config too)."""
    config = dict(connection.config)
    config["proxy"] = {**config.get("proxy", {}), "enable_proxy_discovery": False}
    return attrs.evolve(connection, proxy=proxy, proxy_discovery=False, config=config)


def table_key(schema: Sequence[dict[str, Any]]) -> tuple[str, ...]:
    return tuple(c["name"] for c in schema if c.get("sort_order"))


def check_rows(schema: pa.Schema, table_schema: Sequence[dict[str, Any]], path: str) -> None:
    """Refuse rows without the table's key columns, or with columns the table lacks."""
    key = table_key(table_schema)
    missing = [k for k in key if k not in schema.names]
    if missing:
        raise ConfigurationError(
            f"output table {path} is keyed by {list(key)}, but the rows lack {missing}: an "
            "upsert needs every key column. Fix: keep the key columns in the rows (e.g. the "
            "groupBy columns of an aggregation), or write to a table keyed by the query's key: "
            "eosink_yt_dynamic.create_output_table(client, path, df, key=[...])"
        )
    columns = {c["name"] for c in table_schema}
    extra = [n for n in schema.names if n not in columns]
    if extra:
        raise ConfigurationError(
            f"output table {path} has no columns {extra} (its schema is strict). Fix: select "
            f"only the table's columns {sorted(columns)}, or add them with `yt alter-table`"
        )


def key_mismatch(path: str, key: Sequence[str], table: Sequence[str]) -> ConfigurationError:
    return ConfigurationError(
        f"option key {list(key)} differs from the key of output table {path}, {list(table)}: "
        "rows are replaced by the table's key. Fix: set key to the table's key, or write into "
        "a table keyed by it"
    )


class Pinger(threading.Thread):
    """Keeps a tablet transaction alive: pings it every third of its timeout until stopped or
    until it is gone (then the batch's commit says so)."""

    def __init__(
        self, connection: YtConnection, transaction_id: str, timeout_s: float, owner: tuple
    ) -> None:
        super().__init__(name=f"eosink-yt-ping-{transaction_id}", daemon=True)
        #: (output path, writer id, batch id): an abort without the state finds it by that
        self.owner = owner
        self.connection = connection
        self.transaction_id = transaction_id
        self.period_s = timeout_s / 3
        self.stopped = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        client = self.connection.client()
        while not self.stopped.wait(self.period_s):
            try:
                client.ping_transaction(self.transaction_id)
            except Exception as exc:  # noqa: BLE001 - the commit reports it
                if getattr(exc, "is_no_such_transaction", lambda: False)():
                    self.error = exc
                    log.warning("yt_dynamic.transaction_lost", transaction=self.transaction_id)
                    return
                log.info("yt_dynamic.ping_failed", error=type(exc).__name__)


def start(connection: YtConnection, timeout_s: float, owner: tuple) -> str:
    """Start the batch's tablet transaction on ``connection``'s proxy and ping it from here."""
    client = connection.client()
    tx = str(client.start_transaction(type="tablet", sticky=True, timeout=int(timeout_s * 1000)))
    pinger = Pinger(connection, tx, timeout_s, owner)
    with _PINGERS_LOCK:
        _PINGERS[tx] = pinger
    pinger.start()
    return tx


def stop_pinger(transaction_id: str) -> None:
    with _PINGERS_LOCK:
        pinger = _PINGERS.pop(transaction_id, None)
    if pinger is not None:
        pinger.stopped.set()


def owned(owner: tuple) -> list[tuple[str, YtConnection]]:
    """The transactions this process started for ``owner`` (output path, writer id and, if
    given, batch id) and still pings: attempts whose state never reached ``abort`` (an
    ``init`` that failed after starting one)."""
    with _PINGERS_LOCK:
        return [(tx, p.connection) for tx, p in _PINGERS.items() if p.owner[: len(owner)] == owner]


def check_keys_set(chunk: pa.Table, key: Sequence[str], path: str) -> None:
    """Refuse null key values: a row without its key has nothing to replace."""
    for column in key:
        nulls = chunk.column(column).null_count
        if nulls:
            raise ConfigurationError(
                f"output table {path}: {nulls} rows have a null {column!r}, a key column: an "
                "upsert replaces the row of a key, and these have none. Fix: filter or fill "
                f"the nulls before the sink (e.g. df.na.drop(subset=[{column!r}]) or "
                "coalesce), or key the table by columns that are never null"
            )


def _key_text(key: Sequence[str], values: Sequence[Any]) -> str:
    return "(" + ", ".join(f"{k}={v!r}" for k, v in zip(key, values)) + ")"


FIX_SHARED_KEY = (
    "in one transaction the later write of a key wins, and which one is later is Spark's "
    "partitioning, not the query. Fix: reduce the rows to one per key before the sink (e.g. "
    "groupBy(key).agg(...), or a window keeping the row you want), or key the table by "
    "columns that tell the rows apart"
)


def chunk_key_hashes(chunk: pa.Table, key: Sequence[str], path: str) -> np.ndarray:
    """64-bit hashes of the keys of ``chunk``; refuses a key it holds twice, naming it."""
    keys = chunk.select(list(key))
    counts = keys.group_by(list(key)).aggregate([([], "count_all")])
    if counts.num_rows != keys.num_rows:
        dup = counts.filter(pc.greater(counts.column("count_all"), 1)).slice(0, 1).to_pylist()[0]
        raise ConfigurationError(
            f"output table {path}: {dup['count_all']} rows of one batch have the key "
            f"{_key_text(key, [dup[k] for k in key])}; " + FIX_SHARED_KEY
        )
    hashes = [
        int.from_bytes(hashlib.blake2b(repr(row).encode(), digest_size=8).digest(), "big")
        for row in zip(*(keys.column(k).to_pylist() for k in key))
    ]
    return np.array(hashes, dtype=np.uint64)


def partition_key_hashes(
    parts: Sequence[np.ndarray], key: Sequence[str], path: str, partition_id: int
) -> bytes:
    """The sorted hashes of a partition's chunks; refuses a key two chunks share."""
    hashes = np.sort(np.concatenate(list(parts) or [np.array([], dtype=np.uint64)]))
    if len(hashes) > 1 and bool((hashes[1:] == hashes[:-1]).any()):
        raise ConfigurationError(
            f"output table {path}: partition {partition_id} of one batch holds several rows "
            f"with the same key ({', '.join(key)}); " + FIX_SHARED_KEY
        )
    return hashes.tobytes()


def shared_key(messages: Sequence[TransactionMessage], key: Sequence[str], path: str) -> None:
    """Refuse a key that two partitions of the batch carry (compared by hash: the driver holds
    8 bytes per row, and a batch holds at most one transaction's rows)."""
    arrays = [np.frombuffer(m.key_hashes, dtype=np.uint64) for m in messages]
    owners = np.concatenate(
        [np.full(len(a), m.partition_id, dtype=np.int64) for a, m in zip(arrays, messages)]
        or [np.array([], dtype=np.int64)]
    )
    hashes = np.concatenate(arrays or [np.array([], dtype=np.uint64)])
    order = np.argsort(hashes, kind="stable")
    hashes, owners = hashes[order], owners[order]
    same = np.nonzero(hashes[1:] == hashes[:-1])[0]
    if len(same):
        i = int(same[0])
        raise ConfigurationError(
            f"output table {path}: partitions {int(owners[i])} and {int(owners[i + 1])} of one "
            f"batch hold rows with the same key ({', '.join(key)}); " + FIX_SHARED_KEY
        )


def too_many_rows(ctx: BatchContext, path: str, rows: int | None, limit: int) -> ConfigurationError:
    held = f"{rows} rows" if rows is not None else "more rows"
    return ConfigurationError(
        f"{ctx.label}: the batch holds {held} for {path}, more than the {limit} rows one YT "
        "tablet transaction may write (the cluster's max_rows_per_transaction; YT error 1717, "
        "TooManyRowsInTransaction); nothing of the batch is visible. Fix: bound the batch "
        "(maxFilesPerTrigger, maxOffsetsPerTrigger, the YT source's rows per batch), or use "
        "mode='idempotent' (it writes a batch in many transactions; one-to-one queries only); "
        "if the cluster's limit is higher, set the option max_batch_rows to it"
    )


def transaction_gone(
    ctx: BatchContext, state: TransactionState, timeout_s: float, error: BaseException
) -> SinkError:
    return SinkError(
        f"{ctx.label}: the batch's tablet transaction {state.transaction_id} is gone: it "
        f"expired (not pinged within transaction_timeout_s={timeout_s:g}; the driver holding "
        f"it stalled or died) or the proxy {state.proxy} holding it restarted. Nothing of the "
        "batch is visible; the batch fails and its replay writes it again. Fix: if the driver "
        "may stall longer, raise the option transaction_timeout_s; check the proxy "
        f"({type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''})"
    )


def conflict(ctx: BatchContext, state: TransactionState, path: str) -> SinkError:
    return SinkError(
        f"{ctx.label}: another transaction wrote rows with keys of this batch into {path} "
        f"while the batch ran (YT error 1700, a write-write conflict): the batch's "
        f"transaction {state.transaction_id} was aborted and nothing of it is visible; the "
        "batch fails and its replay writes it again. Fix: let one writer own each key (two "
        "queries upserting the same keys race; their order is not defined)"
    )


def chunks_of(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.Table]:
    """Tables of at most ``size`` rows (one ``insert_rows`` request each)."""
    pending: list[pa.Table] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(pa.Table.from_batches([batch]))
        count += batch.num_rows
        while count >= size:
            merged = pa.concat_tables(pending)
            yield merged.slice(0, size)
            rest = merged.slice(size)
            pending, count = ([rest] if rest.num_rows else []), rest.num_rows
    if count:
        yield pa.concat_tables(pending)
