"""A real PostgreSQL server on loopback for tests: the machine's PostgreSQL binaries, a
temporary data directory, a free port, torn down after the test session.

PostgreSQL refuses to run as root (``initdb`` and ``postgres`` both exit): a test process that
runs as root starts the server as the ``postgres`` system user (Debian's package creates it),
with the data directory owned by that user; any other user runs it as itself.

The binaries are looked up in ``EOSINK_POSTGRES_BIN``, then in Debian's
``/usr/lib/postgresql/<version>/bin`` (newest first), then on ``PATH``. Missing binaries are an
error naming the package to install, never a skipped test.

Use it from pytest (``pytest_plugins = ["eosink.testing.postgres"]`` or import the fixture)::

    def test_copy(postgres_server):
        url = postgres_server.url(database="postgres")
        ...

or as a context manager (``with postgres_server_running() as server: ...``), e.g. for a
server of one's own that a test restarts (:meth:`PostgresServer.restart`).

The server listens on 127.0.0.1 only, has no Unix socket, requires a password
(``scram-sha-256``) for every connection, and runs with ``fsync=off`` (its data lives as long
as the test run; a clean stop still writes everything). This module needs no PostgreSQL client
library: tests use their own (``psycopg``) against :meth:`PostgresServer.url`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import attrs

HOST = "127.0.0.1"
SUPERUSER = "postgres"
#: The superuser's password: fixed, so that tests can tell a leaked secret from one that was not.
SUPERUSER_PASSWORD = "eosink-test-postgres-password"  # noqa: S105 - a test server's
SERVER_USER = "postgres"
INSTALL_HINT = (
    "PostgreSQL's server binaries (initdb, postgres) were not found: install Debian's "
    "`postgresql` package (apt-get install postgresql), or set EOSINK_POSTGRES_BIN to the "
    "folder that holds them"
)


def find_binaries() -> str:
    """The folder holding ``initdb`` and ``postgres``; raises naming the package if none."""
    candidates = []
    if os.environ.get("EOSINK_POSTGRES_BIN"):
        candidates.append(os.environ["EOSINK_POSTGRES_BIN"])
    debian = glob.glob("/usr/lib/postgresql/*/bin")
    candidates += sorted(debian, key=lambda p: int(p.split("/")[-2].split(".")[0]), reverse=True)
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(os.path.dirname(on_path))
    for folder in candidates:
        if all(os.access(os.path.join(folder, b), os.X_OK) for b in ("initdb", "postgres")):
            return folder
    raise RuntimeError(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


@attrs.define
class PostgresServer:
    """A running test server: where it listens and how to reach it as the superuser."""

    port: int
    data_dir: str
    bin_dir: str
    run_as: int | None = None  # uid the server runs as (None: this process's user)
    password: str = attrs.field(default=SUPERUSER_PASSWORD, repr=False)
    process: subprocess.Popen[bytes] | None = attrs.field(default=None, repr=False)
    log_path: str = ""

    host: str = HOST
    user: str = SUPERUSER

    def url(
        self, database: str = "postgres", user: str | None = None, password: str | None = None
    ) -> str:
        """A ``postgresql://`` URL of ``database`` (the superuser's unless ``user`` is given)."""
        who, secret = (self.user, self.password) if user is None else (user, password or "")
        auth = f"{who}:{secret}@" if secret else f"{who}@"
        return f"postgresql://{auth}{self.host}:{self.port}/{database}"

    # -- life cycle ----------------------------------------------------------------------------
    def start(self, timeout_s: float = 60.0) -> None:
        """Start the server process on the data directory and wait until it takes connections."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it
        self.process = subprocess.Popen(
            [
                os.path.join(self.bin_dir, "postgres"),
                "-D",
                self.data_dir,
                "-p",
                str(self.port),
                "-c",
                f"listen_addresses={HOST}",
                "-c",
                "unix_socket_directories=",
                "-c",
                "fsync=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdout=log,
            stderr=log,
            user=self.run_as,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the test PostgreSQL server exited with {self.process.returncode}:\n"
                    + self.log_tail()
                )
            if time.monotonic() > deadline:
                raise RuntimeError("the test PostgreSQL server did not start:\n" + self.log_tail())
            time.sleep(0.1)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Fast shutdown (SIGINT: sessions are cut, everything committed is kept)."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def restart(self) -> None:
        """Stop and start again on the same port and data (a server restart between batches)."""
        self.stop()
        self.start()

    def log_tail(self, lines: int = 30) -> str:
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def _ready(self) -> bool:
        isready = os.path.join(self.bin_dir, "pg_isready")
        if os.access(isready, os.X_OK):
            done = subprocess.run(
                [isready, "-h", HOST, "-p", str(self.port), "-t", "1"],
                capture_output=True,
                check=False,
            )
            return done.returncode == 0
        try:  # pragma: no cover - every packaging of the server ships pg_isready
            socket.create_connection((HOST, self.port), timeout=1).close()
            return True
        except OSError:
            return False


def _server_uid() -> int | None:
    if os.geteuid() != 0:
        return None
    try:
        return pwd.getpwnam(SERVER_USER).pw_uid
    except KeyError:
        raise RuntimeError(
            f"this process runs as root and PostgreSQL will not; no {SERVER_USER!r} user to run "
            "it as. Install Debian's `postgresql` package (it creates the user), or run the "
            "tests as another user"
        ) from None


@contextmanager
def postgres_server_running(**settings: Any) -> Iterator[PostgresServer]:
    """``initdb`` a temporary data directory, start the server, yield it, stop and remove it."""
    bin_dir = find_binaries()
    uid = _server_uid()
    root = tempfile.mkdtemp(prefix="eosink-postgres-")
    try:
        data_dir = os.path.join(root, "data")
        pwfile = os.path.join(root, "pwfile")
        with open(pwfile, "w") as f:
            f.write(SUPERUSER_PASSWORD + "\n")
        if uid is not None:
            os.chmod(root, 0o755)
            os.chown(root, uid, -1)
            os.chown(pwfile, uid, -1)
        done = subprocess.run(
            [
                os.path.join(bin_dir, "initdb"),
                "-D",
                data_dir,
                "-U",
                SUPERUSER,
                f"--pwfile={pwfile}",
                "--auth=scram-sha-256",
                "--encoding=UTF8",
                "--locale=C",
                "--no-sync",
            ],
            capture_output=True,
            user=uid,
            check=False,
        )
        os.unlink(pwfile)
        if done.returncode != 0:
            raise RuntimeError("initdb failed: " + done.stderr.decode(errors="replace")[-2000:])
        server = PostgresServer(
            port=free_port(),
            data_dir=data_dir,
            bin_dir=bin_dir,
            run_as=uid,
            log_path=os.path.join(root, "server.log"),
            **settings,
        )
        if uid is not None:
            open(server.log_path, "a").close()
            os.chown(server.log_path, uid, -1)
        server.start()
        watchdog = _watchdog(server, root)
        try:
            yield server
        finally:
            server.stop()
            watchdog.kill()
            watchdog.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


#: Stops the server and removes its folder when the test process is gone without tearing down
#: (killed, or ended by a test runner's timeout): the server runs in a session of its own.
_WATCHDOG = """
import os, shutil, signal, sys, time
parent, data, root = int(sys.argv[1]), sys.argv[2], sys.argv[3]
while True:
    try:
        os.kill(parent, 0)
    except ProcessLookupError:
        break
    time.sleep(1)
try:  # the server running now (a restart started another process)
    with open(os.path.join(data, "postmaster.pid")) as f:
        server = int(f.readline())
    os.kill(server, signal.SIGINT)
    for _ in range(300):
        os.kill(server, 0)
        time.sleep(0.1)
except (OSError, ValueError):  # stopped already
    pass
shutil.rmtree(root, ignore_errors=True)
"""


def _watchdog(server: PostgresServer, root: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHDOG, str(os.getpid()), server.data_dir, root],
        start_new_session=True,
    )


try:
    import pytest
except ImportError:  # pragma: no cover - used without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def postgres_server() -> Iterator[PostgresServer]:
        """One loopback PostgreSQL server for the whole test session."""
        with postgres_server_running() as server:
            yield server
