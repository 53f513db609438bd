"""The HTTP proxy wire protocol (API v4).

Follows https://ytsaurus.tech/docs/en/user-guide/proxy/http-reference and the shared
notes on what the real client sends:

* ``GET /api`` lists versions, ``GET /api/v4`` the command descriptors
  (``commands_v4.json``, dumped from the C++ driver);
* method per descriptor: ``PUT`` when the command has input, else ``POST`` when it
  is volatile, else ``GET``; parameters in ``X-YT-Parameters`` (YSON text or JSON per
  ``X-YT-Header-Format``), in the body for ``POST``, or in the query string;
* request bodies may be ``chunked`` and ``gzip`` (zlib or gzip streams), ``deflate``,
  ``identity`` (``br`` when the ``brotli`` module is importable);
* errors: HTTP 400 with ``X-YT-Error``, ``X-YT-Response-Code``,
  ``X-YT-Response-Message`` and the same JSON as the body; 503 = proxy unavailable;
* ``X-YT-Accept-Framing: 1`` -> framed body (``0x01`` + uint32 LE length + payload,
  ``0x02`` keep-alive) and ``X-YT-Framing: 1``; tabular reads send
  ``X-YT-Response-Parameters``;
* mutating commands carry ``mutation_id``/``retry``; responses are kept per mutation
  id and replayed to retries (see ``state.ResponseKeeper``).
"""

from __future__ import annotations

import json
import socket
import struct
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler
from typing import Any

from . import yson
from .bodies import read_body
from .commands import Binary, Tabular
from .errors import YtError
from .faults import FaultRule
from .formats import Format
from .yson import unwrap

#: A response: HTTP status, body, headers, content type.
Response = tuple[int, bytes, dict[str, str], str]


def http_method_for(desc: dict[str, Any]) -> str:
    """The HTTP method of a command, from its descriptor (as the client chooses it)."""
    if desc["input_type"] != "null":
        return "PUT"
    if desc["is_volatile"]:
        return "POST"
    return "GET"


def _log_entry(method: str, command: str) -> dict[str, Any]:
    """A new entry of the request log (``emu.requests``), filled in as the request goes."""
    return {
        "time": time.time(),
        "method": method,
        "command": command,
        "params": {},
        "status": None,
        "fault": None,
        "mutation_id": None,
        "retry": False,
        "transaction_id": None,
        "error_code": None,
    }


class ProxyHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # small request/response pairs: avoid 40 ms delayed-ACK stalls
    server_version = "eosink-yt-emulator"
    emulator = None  # set by the server factory
    #: The address of the proxy this handler serves as (sticky transactions belong to it).
    proxy_address = None

    def log_message(self, fmt: str, *args: Any) -> None:  # silence stderr logging
        pass

    # ------------------------------------------------------------------ plumbing

    def _read_body(self) -> bytes:
        return read_body(self.rfile, self.headers)

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        self.send_response(status)
        hdrs = {
            "Content-Type": content_type,
            "Content-Length": str(len(body)),
            "X-YT-Request-Id": f"{id(self):016x}",
            "X-YT-Proxy": socket.gethostname(),
        }
        if headers:
            hdrs.update(headers)
        for k, v in hdrs.items():
            self.send_header(k, v)
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)

    def _error_response(self, err: YtError, status: int = 400) -> Response:
        doc = err.to_dict()
        text = json.dumps(doc, ensure_ascii=True)
        headers = {
            "X-YT-Error": text,
            "X-YT-Response-Code": str(err.code),
            "X-YT-Response-Message": json.dumps(err.message, ensure_ascii=True)[1:-1],
        }
        return (status, text.encode("ascii"), headers, "application/json")

    def _drop_connection(self) -> None:
        self.close_connection = True
        try:
            self.wfile.flush()
        except Exception:
            pass
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ------------------------------------------------------------------ verbs

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_HEAD(self) -> None:
        self._handle()

    def _handle(self) -> None:
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        emu = self.emulator
        emu.state.serve_as(self.proxy_address)
        try:
            if path.startswith("/_emulator"):
                body = self._read_body()
                status, out = emu.control(self.command, path, body)
                self._send(status, json.dumps(out).encode("utf-8"))
                return
            if path == "/api":
                self._read_body()
                self._send(200, json.dumps(["v3", "v4"]).encode())
                return
            if path == "/api/v4":
                self._read_body()
                self._send(200, emu.descriptors_json)
                return
            if path == "/hosts":
                self._read_body()
                self._send(200, json.dumps(getattr(emu, "proxies", [emu.proxy])).encode())
                return
            if path in ("/auth/whoami", "/ping", "/service", "/version"):
                self._read_body()
                payload = {
                    "/auth/whoami": {"login": "root", "realm": "emulator"},
                    "/ping": {},
                    "/service": {"name": "eosink-yt-emulator"},
                    "/version": {"version": "emulator"},
                }[path]
                self._send(200, json.dumps(payload).encode())
                return
            if path.startswith("/api/v4/"):
                self._command(path[len("/api/v4/") :], url.query)
                return
            self._read_body()
            err = YtError(f"Unknown URL {path}", 1)
            status, body, headers, ctype = self._error_response(err, 404)
            self._send(status, body, headers, ctype)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    # ------------------------------------------------------------------ commands
    #
    # A command request goes: read it (``_read_request``), apply the faults injected before
    # it (``_faults_before``), run it, through the response keeper when it is a retriable
    # mutation (``_kept``), log it, apply the faults injected after it (``_faults_after``),
    # frame the body if the client asked for framing (``_framed``), send.

    def _command(self, command: str, query: str) -> None:
        entry = _log_entry(self.command, command)
        try:
            response = self._apply(command, query, entry)
        finally:
            entry["duration"] = time.time() - entry["time"]
            self.emulator.requests.add(entry)
        if response is None:  # answered (or dropped) by a fault injected before applying
            return
        response = self._faults_after(command, entry, response)
        if response is not None:
            self._send(*self._framed(response, entry))

    def _apply(self, command: str, query: str, entry: dict[str, Any]) -> Response | None:
        """The command's response; ``None`` if a fault injected before it answered already."""
        try:
            desc, params, input_data = self._read_request(command, query, entry)
            if self._faults_before(command, params, entry):
                return None
            if desc["is_volatile"] and params.get("mutation_id"):
                return self._kept(command, desc, params, input_data, entry)
            return self._execute(command, desc, params, input_data)
        except YtError as err:
            return self._error_response(err)
        except Exception as exc:  # an emulator bug: report it loudly, never as a retriable 5xx
            err = YtError(
                f"Internal emulator error: {type(exc).__name__}: {exc}",
                1,
                {"traceback": traceback.format_exc()},
            )
            return self._error_response(err)

    def _read_request(
        self, command: str, query: str, entry: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """The command's descriptor, parameters and input, as the descriptor says to read them."""
        desc = self.emulator.state.descriptors.get(command)
        header_format = (self.headers.get("X-YT-Header-Format") or "yson").strip()
        hf = "json" if "json" in header_format else "yson"
        entry["content_encoding"] = self.headers.get("Content-Encoding")
        entry["header_format"] = hf
        raw = self._read_body()
        if desc is None:
            raise YtError(f"Command {command!r} is not registered", 1, {"command": command})
        expected = http_method_for(desc)
        if self.command != expected:
            raise YtError(
                f"Command {command!r} must be requested with {expected}, got {self.command}",
                1,
                {"command": command},
            )
        params = dict(urllib.parse.parse_qsl(query)) if query else {}
        hp = self.headers.get("X-YT-Parameters")
        if hp:
            params.update(self._parse_params(hp.encode("latin-1"), hf))
        if desc["input_type"] == "null" and raw:
            ctype = (self.headers.get("Content-Type") or "").lower()
            params.update(self._parse_params(raw, "json" if "json" in ctype else "yson"))
        entry["params"] = params
        if params.get("transaction_id"):
            entry["transaction_id"] = str(unwrap(params.get("transaction_id"))[0])
        return desc, params, self._input(desc, params, raw, entry)

    @staticmethod
    def _input(desc: dict[str, Any], params: dict[str, Any], raw: bytes, entry: dict) -> Any:
        """The command's input: rows, a structured value, bytes, or ``None``."""
        if desc["input_type"] == "tabular":
            rows = Format(params.get("input_format"), "yson").load_rows(raw)
            entry["row_count"] = len(rows)
            return rows
        if desc["input_type"] == "structured":
            fmt = Format(params.get("input_format"), "yson")
            if fmt.name == "json":
                return yson.from_json(raw, fmt.encode_utf8)
            return yson.loads(raw) if raw.strip() else None
        if desc["input_type"] == "binary":
            return raw
        return None

    def _faults_before(self, command: str, params: dict[str, Any], entry: dict[str, Any]) -> bool:
        """Apply the faults injected before the command; ``True`` if one answered it.

        This thread holds no emulator lock here, so a delay or a callback blocks nobody else.
        """
        for rule in self.emulator.faults.take(command, "before", params):
            entry["fault"] = f"{rule.when}/{rule.kind}"
            if rule.kind == "delay":
                time.sleep(rule.seconds)
                continue
            if rule.kind == "callback":
                self._run_callback(rule, command)
                continue
            if rule.kind == "lost_reply":
                entry["status"] = "dropped"
                self._drop_connection()
                return True
            if rule.kind == "503":
                err = YtError("Proxy is unavailable (injected)", 105)
                entry["status"] = 503
                self._send(*self._error_response(err, 503))
                return True
            raise YtError(rule.message, rule.code, {"injected": True})
        return False

    def _kept(
        self,
        command: str,
        desc: dict[str, Any],
        params: dict[str, Any],
        input_data: Any,
        entry: dict[str, Any],
    ) -> Response:
        """Run a mutation once per mutation id: a retry gets the first attempt's response."""
        keeper = self.emulator.state.keeper
        mutation_id = str(unwrap(params["mutation_id"])[0])
        is_retry = bool(unwrap(params.get("retry", False))[0])
        entry["mutation_id"] = mutation_id
        entry["retry"] = is_retry
        try:
            stored = keeper.begin(mutation_id, is_retry)
        except KeyError:
            raise YtError(
                'Duplicate request is not marked as "retry"', 1, {"mutation_id": mutation_id}
            ) from None
        if stored is not None:
            entry["kept"] = True
            return stored
        response = None  # kept as "no response" if the command fails with an emulator bug
        try:
            response = self._execute(command, desc, params, input_data)
        except YtError as err:
            response = self._error_response(err)
        finally:
            keeper.end(mutation_id, response)
        return response

    def _faults_after(
        self, command: str, entry: dict[str, Any], response: Response
    ) -> Response | None:
        """Log the response's status, then apply the first fault injected after the command
        (it replaces the response, or drops it: then ``None``)."""
        status, _, headers, _ = response
        entry["status"] = status
        if status >= 400:
            try:
                entry["error_code"] = int(headers.get("X-YT-Response-Code", 1))
            except (TypeError, ValueError):
                entry["error_code"] = 1
        for rule in self.emulator.faults.take(command, "after", entry["params"]):
            entry["fault"] = f"{rule.when}/{rule.kind}"
            if rule.kind == "lost_reply":
                entry["status"] = "dropped"
                self._drop_connection()
                return None
            if rule.kind == "503":
                err = YtError("Proxy is unavailable (injected after applying)", 105)
                entry["status"] = 503
                return self._error_response(err, 503)
            injected = self._error_response(YtError(rule.message, rule.code, {"injected": True}))
            entry["status"] = injected[0]
            entry["error_code"] = rule.code
            return injected
        return response

    def _framed(self, response: Response, entry: dict[str, Any]) -> Response:
        """The response framed (``X-YT-Framing``) if the client accepts framing."""
        status, body, headers, ctype = response
        if self.headers.get("X-YT-Accept-Framing") != "1" or status != 200:
            return response
        framed = [b"\x02"]
        for i in range(0, max(len(body), 1), 1 << 20):
            chunk = body[i : i + (1 << 20)]
            if chunk or not body:
                framed.append(b"\x01" + struct.pack("<I", len(chunk)) + chunk)
        entry["framed"] = True
        return status, b"".join(framed), dict(headers, **{"X-YT-Framing": "1"}), ctype

    def _run_callback(self, rule: FaultRule, command: str) -> None:
        """Run an ``on_next`` callback; its failure fails the request, which is not applied."""
        try:
            rule.callback()
        except Exception as exc:
            raise YtError(
                f"Callback injected before command {command!r} failed: {type(exc).__name__}: {exc}",
                1,
                {"injected": True, "traceback": traceback.format_exc()},
            )

    def _parse_params(self, data: bytes, fmt: str) -> dict[str, Any]:
        data = data.strip()
        if not data:
            return {}
        try:
            value = yson.from_json(data) if fmt == "json" else yson.loads(data)
        except (ValueError, yson.YsonError) as e:
            raise YtError(f"Error parsing command parameters: {e}", 1)
        value = unwrap(value)[0]
        if not isinstance(value, dict):
            raise YtError("Command parameters must be a map", 1)
        return value

    def _execute(
        self, command: str, desc: dict[str, Any], params: dict[str, Any], input_data: Any
    ) -> Response:
        emu = self.emulator
        state = emu.state
        with state.lock:
            state.txm.reap()
            result = state.commands.run(command, params, input_data)
        headers = {}
        if isinstance(result, Tabular):
            fmt = Format(params.get("output_format"), "yson")
            body = fmt.dump_rows(result.rows)
            if result.response_parameters is not None:
                rp = result.response_parameters
                hf = self.headers.get("X-YT-Header-Format") or "yson"
                if "json" in hf:
                    headers["X-YT-Response-Parameters"] = json.dumps(
                        yson.to_json_obj(rp), ensure_ascii=True
                    )
                else:
                    headers["X-YT-Response-Parameters"] = yson.dumps(rp).decode("latin-1")
            return (200, body, headers, fmt.content_type)
        if isinstance(result, Binary):
            return (200, result.data, headers, "application/octet-stream")
        if desc["output_type"] == "null" or result is None:
            return (200, b"", headers, "application/json")
        fmt = Format(params.get("output_format"), "json")
        return (200, fmt.dump_node(result), headers, fmt.content_type)
