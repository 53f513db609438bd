"""Running the emulator: in-process (:class:`YtEmulator`) or as a process
(:class:`EmulatorProcess`, ``python -m eosink_yt_emulator``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Self

from . import yson
from .faults import Commands, Faults, RequestLog
from .http import ProxyHandler
from .state import EmulatorState, descriptor_list

if TYPE_CHECKING:
    from yt.wrapper import YtClient


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256


def fast_retry_config() -> dict[str, Any]:
    """Client config that keeps the client's retry logic but shortens its sleeps."""
    backoff = {"policy": "constant_time", "constant_time": 50}
    return {
        "proxy": {"retries": {"backoff": backoff}},
        "dynamic_table_retries": {"backoff": backoff},
        "write_retries": {"backoff": backoff},
        "read_retries": {"backoff": backoff},
        "start_operation_retries": {"backoff": backoff},
        "concatenate_retries": {"backoff": backoff},
        "batch_requests_retries": {"backoff": backoff},
        "operation_tracker": {"poll_period": 100},
        # How often the client's pinger thread checks whether it should stop (client-side only).
        "transaction_sleep_period": 10,
    }


def _deep_update(dst: dict[str, Any], src: dict[str, Any]) -> dict[str, Any]:
    """Merge ``src`` into ``dst`` key by key, so an override keeps the defaults beside it."""
    for k, v in src.items():
        if isinstance(v, dict) and isinstance(dst.get(k), dict):
            _deep_update(dst[k], v)
        else:
            dst[k] = v
    return dst


def client_config(address: str, fast_retries: bool = True, **overrides: Any) -> dict[str, Any]:
    """Config for a real ``yt.wrapper.YtClient`` talking to the emulator at ``address``."""
    config = {
        "proxy": {"url": address, "enable_proxy_discovery": False},
        "enable_token": False,
        "apply_remote_patch_at_start": None,
        "is_local_mode": False,
        "ping_failed_mode": "pass",
    }
    if fast_retries:
        _deep_update(config, fast_retry_config())
    _deep_update(config, overrides)
    return config


class _ClientFactory:
    """What the in-process emulator and the emulator process share: address and clients."""

    host: str
    port: int

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def proxy(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"{host}:{int(self.port)}"

    @property
    def url(self) -> str:
        """The emulator's base URL, ``http://host:port``."""
        return "http://" + self.proxy

    def client_config(self, fast_retries: bool = True, **overrides: Any) -> dict[str, Any]:
        return client_config(self.proxy, fast_retries=fast_retries, **overrides)

    def client(
        self, fast_retries: bool = True, config: dict[str, Any] | None = None, **overrides: Any
    ) -> YtClient:
        """A real ``yt.wrapper.YtClient`` configured for this emulator.

        ``fast_retries`` keeps the client's retry logic but replaces its backoff sleeps
        with 50 ms; ``config`` / keyword overrides are merged into the client config
        (e.g. ``client(structured_data_format="json")``).
        """
        from yt.wrapper import YtClient

        cfg = client_config(self.proxy, fast_retries=fast_retries, **overrides)
        if config:
            _deep_update(cfg, config)
        return YtClient(config=cfg)


class YtEmulator(_ClientFactory):
    """An in-process emulator of the YTsaurus HTTP proxy.

    >>> emu = YtEmulator().start()
    >>> yt = emu.client()
    >>> yt.create("map_node", "//tmp/x")
    >>> emu.stop()
    """

    def __init__(
        self, host: str = "127.0.0.1", port: int = 0, proxies: int = 1, **config: Any
    ) -> None:
        self.host = host
        self.port = port
        #: How many HTTP proxies serve the one cluster (``/hosts`` lists them all): a sticky
        #: tablet transaction is known only to the proxy that started it.
        self.proxy_count = proxies
        self.state = EmulatorState(config)
        self.faults = Faults(self)
        self.requests = RequestLog()
        self.descriptors_json = json.dumps(descriptor_list()).encode("utf-8")
        self._servers = []
        self._server = None
        self._thread = None

    @property
    def proxies(self) -> list[str]:
        """The addresses (``host:port``) of the cluster's proxies, the first one ``proxy``."""
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return [f"{host}:{server.server_address[1]}" for server in self._servers]

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        for n in range(self.proxy_count):
            handler = type("BoundProxyHandler", (ProxyHandler,), {"emulator": self})
            server = _Server((self.host, self.port if n == 0 else 0), handler)
            handler.proxy_address = f"{self.host}:{server.server_address[1]}"
            self._servers.append(server)
            thread = threading.Thread(
                target=server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=f"yt-emulator-{n}",
                daemon=True,
            )
            thread.start()
        self._server = self._servers[0]
        self.port = self._server.server_address[1]
        self.state.address = self.proxy
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        self._servers = []
        self._server = None

    def __enter__(self) -> Self:
        return self.start() if self._server is None else self

    def add_generated_rows(
        self, path: Any, count: int, make_row: Callable[[int], dict[str, Any]]
    ) -> None:
        """Append ``count`` rows to the static table ``path`` without sending or storing them:
        one chunk that holds its row count and ``make_row(index)``, called only for the rows
        a read or an operation touches. For tables far larger than memory allows (a
        benchmark of appends into a table of 10M rows); ``make_row`` must be deterministic and,
        for a sorted table, produce rows in key order."""
        with self.state.lock:
            self.state.tables.add_generated_rows(path, count, make_row)

    # ---------------------------------------------------------------- control endpoint

    def control(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """``/_emulator/...``: faults and the request log for out-of-process use."""
        sub = path[len("/_emulator") :].strip("/")
        if sub == "ping":
            return 200, {"ok": True}
        if sub == "requests":
            return 200, [_jsonable(e) for e in list(self.requests)]
        if sub == "requests/clear":
            self.requests.clear()
            return 200, {}
        if sub == "faults" and method == "GET":
            return 200, self.faults.pending()
        if sub == "faults":
            req = json.loads(body.decode("utf-8") or "{}")
            action = req.get("action")
            args = req.get("args") or {}
            if action not in (
                "fail_next",
                "respond_503",
                "lose_reply",
                "delay",
                "expire_transaction",
                "clear",
            ):
                return 400, {"error": f"unknown action {action!r}"}
            try:
                getattr(self.faults, action)(**args)
            except Exception as e:  # report to the caller
                return 400, {"error": f"{type(e).__name__}: {e}"}
            return 200, {}
        if sub == "transactions":
            with self.state.lock:
                return 200, self.state.txm.active_ids()
        return 404, {"error": f"unknown control path {path!r}"}


def _jsonable(entry: dict[str, Any]) -> dict[str, Any]:
    """A request-log entry as JSON, for the control endpoint of a separate emulator process."""
    out = {}
    for k, v in entry.items():
        try:
            json.dumps(v)
            out[k] = v
        except TypeError:
            out[k] = yson.to_json_obj(v, encode_utf8=False, escape_dollar=False)
    return out


class RemoteFaults:
    """The :class:`~eosink_yt_emulator.faults.Faults` API over the HTTP control endpoint."""

    def __init__(self, url: str) -> None:
        self.url = url

    def _post(self, action: str, **args: Any) -> dict[str, Any]:
        """Send one fault action to the process's control endpoint; its JSON reply."""
        data = json.dumps({"action": action, "args": args}).encode("utf-8")
        req = urllib.request.Request(
            self.url + "/_emulator/faults",
            data=data,
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return json.loads(r.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            raise RuntimeError(e.read().decode("utf-8"))

    def fail_next(
        self,
        command: Commands,
        when: str = "before",
        kind: str = "error",
        times: int = 1,
        code: int = 1,
        message: str | None = None,
        match: dict[str, Any] | None = None,
        skip: int = 0,
    ) -> dict[str, Any]:
        return self._post(
            "fail_next",
            command=command,
            when=when,
            kind=kind,
            times=times,
            code=code,
            message=message,
            match=match,
            skip=skip,
        )

    def respond_503(
        self,
        command: Commands,
        times: int = 1,
        when: str = "before",
        match: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._post("respond_503", command=command, times=times, when=when, match=match)

    def lose_reply(
        self,
        command: Commands,
        times: int = 1,
        when: str = "after",
        match: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._post("lose_reply", command=command, times=times, when=when, match=match)

    def delay(
        self,
        command: Commands,
        seconds: float,
        times: int | None = None,
        match: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        return self._post("delay", command=command, seconds=seconds, times=times, match=match)

    def expire_transaction(self, tx_id: str | None) -> dict[str, Any]:
        """Abort ``tx_id`` in the emulator as if its timeout had passed."""
        return self._post("expire_transaction", tx_id=tx_id)

    def on_next(
        self,
        command: Commands,
        callback: Callable[[], object],
        match: dict[str, Any] | None = None,
        times: int | None = 1,
    ) -> None:
        """Not available out of process: the callback is test code that has to run inside
        the emulator's process; use an in-process ``YtEmulator`` for it."""
        raise NotImplementedError(
            "on_next needs an in-process YtEmulator: a callback cannot cross the control endpoint"
        )

    def clear(self) -> dict[str, Any]:
        """Drop every fault rule not yet applied."""
        return self._post("clear")

    def pending(self) -> list[dict[str, Any]]:
        """The fault rules not yet applied (for a test's check that its faults fired)."""
        with urllib.request.urlopen(self.url + "/_emulator/faults", timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))


class EmulatorProcess(_ClientFactory):
    """The emulator as a separate process (``python -m eosink_yt_emulator --port 0``)."""

    def __init__(
        self,
        port: int = 0,
        host: str = "127.0.0.1",
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        extra_args: Iterable[str] = (),
    ) -> None:
        self.host = host
        self.requested_port = port
        self.python = python or sys.executable
        self.env = env
        self.extra_args = list(extra_args)
        self.proc = None
        self.port = None

    def start(self, timeout: Any = 20.0) -> Self:
        env = dict(os.environ if self.env is None else self.env)
        src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        self.proc = subprocess.Popen(
            [
                self.python,
                "-m",
                "eosink_yt_emulator",
                "--host",
                self.host,
                "--port",
                str(self.requested_port),
            ]
            + self.extra_args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            text=True,
        )
        deadline = time.time() + timeout
        line = ""
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if line.startswith("listening on "):
                self.port = int(line.strip().rsplit(":", 1)[1])
                return self
            if self.proc.poll() is not None:
                break
        err = self.proc.stderr.read() if self.proc.poll() is not None else ""
        self.stop()
        raise RuntimeError(f"emulator process did not start: {line!r} {err}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None:
            for f in (self.proc.stdout, self.proc.stderr):
                try:
                    f.close()
                except Exception:
                    pass

    def __enter__(self) -> Self:
        return self.start()

    @property
    def faults(self) -> RemoteFaults:
        return RemoteFaults(self.url)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.url + "/_emulator/requests", timeout=10) as r:
            return json.loads(r.read().decode("utf-8"))
