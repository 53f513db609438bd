"""YT master transactions as the sink uses them: explicit ids, explicit pings.

The main transaction (MainTx) of a batch outlives the process that started it: in the Spark
data-source front door ``init`` runs in one Python worker and ``commit`` in another, fresh
one. So no transaction here is owned by a client-side ``Transaction`` context that aborts on
exit: transactions are started with a timeout and their ids travel in the sink's state and
messages. One :class:`BatchKeeper` per batch, on the driver, pings MainTx and every
transaction nested in it (Init/Commit SubTx, every PartTx) from ``init`` until the batch
ends, so no timeout limits how long a batch may take (an upstream stage, a straggler task);
a task also pings its own PartTx while it writes.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from eosink.logs import get_logger
from eosink.process import process_state

log = get_logger("eosink.yt_static")

NULL_TX = "0-0-0-0"


def in_tx(client: Any, tx: str | None, *, ping_ancestors: bool = False) -> Any:
    """A context in which the client's commands run inside ``tx`` (outside any with ``None``).

    The context neither pings, commits nor aborts ``tx``: it only sets the client's current
    transaction.
    """
    return client.Transaction(
        transaction_id=tx or NULL_TX,
        acquire=False,
        ping=False,
        ping_ancestor_transactions=ping_ancestors if tx else None,
    )


def start_tx(client: Any, parent: str | None, timeout_s: float, title: str, **attrs: Any) -> str:
    """Start a master transaction under ``parent`` (or at the top), alive ``timeout`` past pings."""
    from yt.wrapper.transaction_commands import start_transaction

    return start_transaction(
        parent_transaction=parent or NULL_TX,
        timeout=int(timeout_s * 1000),
        attributes={"title": title, **attrs},
        client=client,
    )


def ping(client: Any, tx: str, *, ancestors: bool = False) -> None:
    """Ping ``tx`` (and with ``ancestors``, every transaction above it)."""
    from yt.wrapper.transaction_commands import ping_transaction

    with in_tx(client, tx, ping_ancestors=ancestors):
        ping_transaction(tx, client=client)


def is_no_such_transaction(error: BaseException) -> bool:
    from yt.wrapper.errors import YtError

    return isinstance(error, YtError) and error.is_no_such_transaction()


def alive(client: Any, tx: str | None) -> bool:
    """Whether ``tx`` is still active; a successful check also pings it."""
    if not tx:
        return False
    try:
        ping(client, tx)
    except Exception as exc:
        if is_no_such_transaction(exc):
            return False
        raise
    return True


def commit(client: Any, tx: str) -> None:
    from yt.wrapper.transaction_commands import commit_transaction

    commit_transaction(tx, client=client)


def abort(client: Any, tx: str | None) -> bool:
    """Abort ``tx``; ``False`` when it was already gone (committed, aborted or expired)."""
    from yt.wrapper.transaction_commands import abort_transaction

    if not tx:
        return False
    try:
        abort_transaction(tx, client=client)
    except Exception as exc:
        if is_no_such_transaction(exc):
            return False
        raise
    return True


def nested(client: Any, tx: str) -> list[str]:
    """The ids of the active transactions directly nested in ``tx``."""
    with in_tx(client, None):
        return [str(t) for t in client.get(f"#{tx}/@nested_transaction_ids") or []]


def ping_tree(client: Any, main_tx: str) -> bool | None:
    """Ping MainTx and every transaction directly nested in it (SubTxs, PartTxs, also those
    whose task has returned): ``True`` when MainTx was pinged, ``False`` when it ended
    (committed, aborted or expired), ``None`` when the ping failed otherwise."""
    try:
        ping(client, main_tx)
        children = nested(client, main_tx)
    except Exception as exc:  # noqa: BLE001 - the batch itself will report it
        log.info("yt.ping_failed", tx=main_tx, error=type(exc).__name__)
        return False if is_no_such_transaction(exc) else None
    for child in children:
        try:
            ping(client, child)
        except Exception as exc:  # noqa: BLE001 - e.g. committed meanwhile
            log.debug("yt.ping_failed", tx=child, error=type(exc).__name__)
    return True


class BatchKeeper:
    """The one pinger of a batch: a driver thread that pings MainTx and every transaction
    directly nested in it (SubTxs, PartTxs, also those whose task has returned) each period,
    for the batch's whole life, and stops when MainTx ends or the batch releases it.

    One per MainTx and process: ``init`` starts it, ``commit`` starts it again where it runs
    in another process (the data-source front door), ``commit`` and ``abort`` release it.
    Between a planning worker's ``init`` and the ``commit``, :mod:`eosink_yt_static.keeper`
    keeps the batch instead.
    """

    _guard = threading.Lock()

    def __init__(
        self, connection: Any, main_tx: str, period_s: float, live: dict[str, BatchKeeper]
    ) -> None:
        self.connection = connection
        self.main_tx = main_tx
        self.period_s = max(0.05, period_s)
        self._live = live  # the keepers of the process that started this one
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eosink-yt-batch", daemon=True)

    @staticmethod
    def _running() -> dict[str, BatchKeeper]:
        """This process's keepers by MainTx: process state (:func:`eosink.process.process_state`),
        so that each simulated process of the kit's histories keeps its own batches."""
        return process_state("eosink_yt_static.batch_keepers")

    @classmethod
    def keep(cls, connection: Any, main_tx: str, period_s: float) -> None:
        """Keep ``main_tx`` and its nested transactions alive until :meth:`release`."""
        live = cls._running()
        with cls._guard:
            running = live.get(main_tx)
            if running is not None and running._thread.is_alive():
                return
            keeper = live[main_tx] = cls(connection, main_tx, period_s, live)
            keeper._thread.start()

    @classmethod
    def release(cls, main_tx: str) -> None:
        live = cls._running()
        with cls._guard:
            keeper = live.pop(main_tx, None)
        if keeper is not None:
            keeper._stop.set()
            if keeper._thread is not threading.current_thread():
                keeper._thread.join(timeout=5)

    def _run(self) -> None:
        client = self.connection.client()
        while not self._stop.wait(self.period_s):
            if ping_tree(client, self.main_tx) is False:
                break  # MainTx ended: committed, aborted or expired
        with self._guard:
            if self._live.get(self.main_tx) is self:
                del self._live[self.main_tx]


class Pinger:
    """Pings transactions (and their ancestors) from a daemon thread while work runs.

    A thread of the process that does the work: it lives exactly as long as the work (used
    as a context manager) and stops by itself when a transaction is gone. It has its own client
    (clients are not thread-safe).
    """

    def __init__(self, connection: Any, txs: Sequence[str], period_s: float) -> None:
        self.connection = connection
        self.txs = [t for t in txs if t]
        self.period_s = max(0.05, period_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="eosink-yt-pinger", daemon=True)

    def _run(self) -> None:
        client = self.connection.client()
        while not self._stop.wait(self.period_s):
            for tx in self.txs:
                try:
                    ping(client, tx, ancestors=True)
                except Exception as exc:  # noqa: BLE001 - the work itself will report it
                    log.info("yt.ping_failed", tx=tx, error=type(exc).__name__)
                    if is_no_such_transaction(exc):
                        return

    def __enter__(self) -> Pinger:
        if self.txs:
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


@contextlib.contextmanager
def sub_tx(client: Any, parent: str, timeout_s: float, title: str) -> Iterator[str]:
    """A sub transaction of ``parent`` (MainTx) for one unit of work: committed at the end of
    the block, aborted when the block or the commit request fails; the batch's
    :class:`BatchKeeper` pings it.

    A SubTx whose commit request failed is aborted too: left open, the keeper would keep it
    (and the locks it holds) alive for the batch's whole life, and the retried unit would wait
    for those locks. If the commit did go through (its reply was lost), the abort finds no
    such transaction and changes nothing.
    """
    tx = start_tx(client, parent, timeout_s, title)
    try:
        with in_tx(client, tx):
            yield tx
        commit(client, tx)
    except BaseException:
        try:
            abort(client, tx)
        except Exception as exc:  # noqa: BLE001 - the original error matters
            log.info("yt.abort_failed", tx=tx, error=type(exc).__name__)
        raise


_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


def node_key(text: str) -> str:
    """A Cypress node name for any writer id: safe characters kept, others hex-escaped."""
    return _SAFE.sub(lambda m: "%" + "".join(f"{b:02x}" for b in m.group().encode()), text) or "%"
