"""Store faults for PostgreSQL: a loopback TCP proxy in front of the test server that cuts a
connection where a test says, below the sink (which cannot tell it from the server).

The proxy reads PostgreSQL's wire protocol (v3) far enough to see requests: a client's
messages are held until one ends a request (``Query``, ``Sync``, ``CopyDone``, ``CopyFail``),
then go to the server together. Each request is classified by its statement (the ``Query``'s
text, or the last ``Parse``'s): ``head`` (BEGIN), ``list`` (catalog questions), ``get`` (other
reads), ``put`` (INSERT, CREATE, COPY, COMMIT...), ``delete`` (DROP, DELETE, ROLLBACK), with the
statement's start as the key (so a fault may aim at ``^COMMIT``); :meth:`FaultProxy.before` runs
another program's action when a chosen statement arrives, before it reaches the server. An armed
:class:`~eosink.testing.faultfs.StoreFault` fires at its ``after``-th matching request:

* ``error`` / ``short_write``: the connection is cut and the request never reaches the server;
* ``lost_reply``: the request goes to the server, which carries it out (a COMMIT commits); the
  connection is cut when its answer comes back, before the client reads it (a COPY's answer
  is the server's go-ahead for its data: the server then gives up the copy).

It implements the simulation's :class:`~eosink.testing.faultfs.FaultTarget`, so the kit's
generated histories arm faults in it as they do in the in-memory object store.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs

from eosink.testing.faultfs import ArmedFaults, StoreFault

HOST = "127.0.0.1"
SSL_REQUEST, GSS_REQUEST = 80877103, 80877104
BOUNDARIES = {b"Q", b"S", b"c", b"f"}
#: The server's answer to a COPY statement (CopyInResponse, CopyOutResponse, CopyBothResponse):
#: the server then waits for the copy's data, and no ReadyForQuery comes until the copy ends.
COPY_ANSWERS = {b"G", b"H", b"W"}


@attrs.define
class Fired:
    kind: str
    op: str
    key: str
    request: int


def classify(statement: str) -> tuple[str, str]:
    """(op, key) of a request by its SQL text."""
    text = " ".join(statement.split())
    word = text.split(" ", 1)[0].upper() if text else ""
    if word in ("BEGIN", "START"):
        op = "head"
    elif word in ("DROP", "DELETE", "TRUNCATE", "ROLLBACK"):
        op = "delete"
    elif word in ("SELECT", "SHOW", "WITH", "(SELECT"):
        catalog = re.search(r"pg_class|pg_attribute|pg_index|to_regclass|pg_stat", text)
        op = "list" if catalog else "get"
    else:
        op = "put"
    return op, text[:80]


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _read_typed(sock: socket.socket) -> tuple[bytes, bytes]:
    head = _recv_exact(sock, 5)
    (length,) = struct.unpack("!I", head[1:])
    return head[:1], head + _recv_exact(sock, length - 4)


class Connection:
    """One client connection and its server connection, pumped by two threads."""

    def __init__(self, proxy: FaultProxy, client: socket.socket) -> None:
        self.proxy = proxy
        self.client = client
        self.server = socket.create_connection(proxy.upstream)
        # Each message goes on as it comes (a reply is several: rows, CommandComplete,
        # ReadyForQuery): with Nagle's algorithm the second waits for the client's delayed
        # ACK, ~40 ms a statement, which libpq (TCP_NODELAY) never waits for on its own.
        for sock in (self.client, self.server):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.lose_until: set[bytes] = set()
        self.closed = threading.Event()
        self.parsed = ""  # the statement of the last Parse message

    def close(self) -> None:
        self.closed.set()
        for s in (self.client, self.server):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def run(self) -> None:
        try:
            self._startup()
            threading.Thread(target=self._from_server, daemon=True).start()
            pending: list[bytes] = []
            while not self.closed.is_set():
                kind, message = _read_typed(self.client)
                pending.append(message)
                if kind == b"P":
                    name_end = message.index(b"\0", 5)
                    self.parsed = message[name_end + 1 : message.index(b"\0", name_end + 1)].decode(
                        errors="replace"
                    )
                elif kind == b"Q":
                    self.parsed = message[5:-1].decode(errors="replace")
                if kind == b"X":  # Terminate
                    self.server.sendall(b"".join(pending))
                    break
                if kind == b"p":  # authentication: not a request
                    self.server.sendall(b"".join(pending))
                    pending = []
                    continue
                if kind == b"d":  # COPY data: streamed; the copy is decided at its CopyDone
                    if sum(map(len, pending)) > 1 << 16:
                        self.server.sendall(b"".join(pending))
                        pending = []
                    continue
                if kind not in BOUNDARIES:
                    continue
                statement = "COPY" if kind in (b"c", b"f") else self.parsed
                op, key = classify(statement)
                self.proxy.run_actions(key)
                fault = self.proxy.due(op, key)
                if fault is not None and fault.kind in ("error", "short_write"):
                    break  # cut: the request never reaches the server
                if fault is not None:  # lost_reply: carried out, its answer lost
                    query = kind in (b"Q", b"S")
                    self.lose_until = {b"Z", *COPY_ANSWERS} if query else {b"C", b"E"}
                self.server.sendall(b"".join(pending))
                pending = []
        except (OSError, ConnectionError, ValueError):
            pass
        finally:
            if not self.lose_until:
                self.close()

    def _startup(self) -> None:
        while True:
            head = _recv_exact(self.client, 4)
            (length,) = struct.unpack("!I", head)
            body = _recv_exact(self.client, length - 4)
            self.server.sendall(head + body)
            (code,) = struct.unpack("!I", body[:4])
            if code in (SSL_REQUEST, GSS_REQUEST):
                self.client.sendall(_recv_exact(self.server, 1))  # 'N': no encryption
                continue
            return

    def _from_server(self) -> None:
        try:
            while not self.closed.is_set():
                kind, message = _read_typed(self.server)
                if self.lose_until:
                    if kind in self.lose_until:
                        break
                    continue
                self.client.sendall(message)
        except (OSError, ConnectionError):
            pass
        finally:
            self.close()


class FaultProxy(ArmedFaults):
    """A loopback proxy to the server of ``database_url``; ``url`` is the same database
    through the proxy. Use as a context manager (it stops listening at exit)."""

    def __init__(self, database_url: str) -> None:
        parts = urlsplit(database_url)
        self.upstream = (parts.hostname or HOST, parts.port or 5432)
        self.listener = socket.create_server((HOST, 0))
        port = self.listener.getsockname()[1]
        userinfo = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        query = "sslmode=disable&gssencmode=disable"
        self.url = urlunsplit((parts.scheme, f"{userinfo}{HOST}:{port}", parts.path, query, ""))
        self.lock = threading.Lock()
        self.faults: list[StoreFault] = []
        self._fired: list[Fired] = []
        self.requests = 0
        self.connections: list[Connection] = []
        self.actions: list[tuple[str, Callable[[], None]]] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.listener.close()
        for conn in list(self.connections):
            conn.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            conn = Connection(self, client)
            self.connections = [c for c in self.connections if not c.closed.is_set()] + [conn]
            threading.Thread(target=conn.run, daemon=True).start()

    def before(self, statement: str, action: Callable[[], None]) -> None:
        """Run ``action`` (once) when the next request whose statement matches ``statement``
        (a regular expression searched in its start) arrives, before it goes to the server:
        another program's move at that exact point of the sink's work."""
        with self.lock:
            self.actions.append((statement, action))

    def run_actions(self, key: str) -> None:
        with self.lock:
            due = [a for a in self.actions if re.search(a[0], key)]
            self.actions = [a for a in self.actions if a not in due]
        for _, action in due:
            action()

    # -- the simulation's FaultTarget ------------------------------------------------------------
    @property
    def fired(self) -> list[Fired]:
        return list(self._fired)

    def reset(self) -> None:
        """No faults armed (a new history)."""
        self.disarm()

    def due(self, op: str, key: str) -> StoreFault | None:
        with self.lock:
            self.requests += 1
            for fault in self.faults:
                if fault.matches(op, key):  # type: ignore[arg-type]
                    fault.seen += 1
                    if fault.seen >= fault.after:
                        self.faults.remove(fault)
                        self._fired.append(Fired(fault.kind, op, key, self.requests))
                        return fault
            return None
