"""The batch's pinger when ``init`` runs in a process that ends before the batch does.

In the data-source front door ``init`` runs in a Python worker that Spark starts for planning
and ends (or parks) once the writer is shipped, and ``commit`` runs later in another, fresh
worker. A keeper thread of the planning worker (:class:`eosink_yt_static.tx.BatchKeeper`)
would stop with it, and an upstream stage or a straggler longer than ``main_tx_timeout_s``
would then see MainTx (or a finished task's PartTx) expire: the batch fails on every replay.
So ``init`` run in a Spark Python worker starts this small detached process, which pings
MainTx and every transaction nested in it for the batch, like the thread does, and stops as
soon as any of these holds:

- the batch released it: ``commit`` or ``abort`` (in any worker on this machine) removed its
  marker file;
- MainTx ended (committed, aborted or expired);
- the process that started the planning worker (Spark's Python daemon or the driver JVM,
  which live as long as the driver) is gone: the query is dead;
- no ping succeeded for ``main_tx_timeout_s``: MainTx has expired anyway;
- ``keepalive_max_s`` passed since ``init``: a batch longer than that fails and is retried.

So a dead query's transaction is never kept alive for longer than the bound.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import subprocess
import sys
import tempfile
import time
from typing import Any

import attrs

from eosink.logs import get_logger

log = get_logger("eosink.yt_static")

#: How often the keeper looks at its marker file and at the driver's process.
TICK_S = 0.2
#: How long ``init`` waits for the keeper's first ping (a Python start and one request).
READY_TIMEOUT_S = 60.0


def in_spark_worker() -> bool:
    """Whether this process is a Python worker started by Spark (the data-source door's
    planning and commit workers are; the driver process running ``foreachBatch`` is not)."""
    return "PYTHON_WORKER_FACTORY_SECRET" in os.environ


def marker(main_tx: str) -> str:
    """The file whose presence keeps the keeper of ``main_tx`` running."""
    return os.path.join(tempfile.gettempdir(), f"eosink-yt-static-keepers-{os.getuid()}", main_tx)


@attrs.frozen
class KeeperOrder:
    """What the detached keeper needs, sent on its stdin (the token never on a command line)."""

    connection: Any
    main_tx: str
    period_s: float
    main_tx_timeout_s: float
    max_s: float
    watch_pid: int
    marker: str


def start(
    connection: Any,
    main_tx: str,
    period_s: float,
    main_tx_timeout_s: float,
    max_s: float,
    watch_pid: int | None = None,
) -> None:
    """Start the detached keeper of ``main_tx``; it watches ``watch_pid``, by default this
    process's parent (what started the Spark worker: it lives as long as the driver)."""
    path = marker(main_tx)
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    open(path, "wb").close()
    watch = os.getppid() if watch_pid is None else watch_pid
    order = KeeperOrder(connection, main_tx, period_s, main_tx_timeout_s, max_s, watch, path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    try:
        ready = _spawn(main_tx, pickle.dumps(order), env)
    except Exception as exc:  # noqa: BLE001 - a short batch commits without it
        ready, error = False, repr(exc)
    else:
        error = None if ready else "no first ping"
    if not ready:
        release(main_tx)
        log.warning("yt_static.keeper_not_started", main_tx=main_tx, error=error)
        return
    log.info("yt_static.keeper_started", main_tx=main_tx, watch_pid=watch)


def _spawn(main_tx: str, order: bytes, env: dict[str, str]) -> bool:
    """Start the keeper and wait until it pinged MainTx once (the caller's own keeper thread
    covers the batch until then): no moment of the batch is left unpinged."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosink_yt_static.keeper", main_tx],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(order)
        proc.stdin.close()
        # The process forks once more and exits: the keeper is nobody's child, so it never
        # lingers as a zombie of a worker that Spark parks for reuse.
        proc.wait(timeout=READY_TIMEOUT_S)
        readable, _, _ = select.select([proc.stdout], [], [], READY_TIMEOUT_S)
        return bool(readable) and proc.stdout.readline().strip() == b"ready"
    finally:
        proc.stdout.close()


def release(main_tx: str) -> None:
    """Tell the detached keeper of ``main_tx`` (if any, on this machine) to stop."""
    with contextlib.suppress(FileNotFoundError):
        os.remove(marker(main_tx))


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def run(order: KeeperOrder, ready: Any = None) -> str:
    """Ping the batch's transactions until one of the stop conditions holds; returns which.
    ``ready`` (a file) is told after the first successful ping, then closed."""
    from eosink_yt_static import tx as txs

    client = order.connection.client()
    started = last_ok = next_ping = time.monotonic()
    while True:
        now = time.monotonic()
        if not os.path.exists(order.marker):
            return "released"
        if not _process_alive(order.watch_pid):
            return "driver gone"
        if now - started > order.max_s:
            return "keepalive_max_s passed"
        if now - last_ok > order.main_tx_timeout_s:
            return "unreachable"
        if now >= next_ping:
            pinged = txs.ping_tree(client, order.main_tx)
            if pinged is False:
                return "main tx ended"
            if pinged:
                last_ok = now
                if ready is not None:
                    ready.write(b"ready\n")
                    ready.close()
                    ready = None
            next_ping = now + order.period_s
        time.sleep(TICK_S)


def main() -> None:
    order = pickle.loads(sys.stdin.buffer.read())
    if os.fork():
        os._exit(0)  # the spawning worker reaps this one; the grandchild keeps the batch
    ready = os.fdopen(os.dup(1), "wb", buffering=0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1):  # logs go nowhere; only ``ready`` reaches the spawning worker
        os.dup2(devnull, fd)
    try:
        reason = run(order, ready)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(order.marker)
    log.info("yt_static.keeper_stopped", main_tx=order.main_tx, reason=reason)


if __name__ == "__main__":
    main()
