"""Faults of the loopback S3 server (:mod:`eosink.testing.s3`): a plan of :class:`Fault` the
tests set at run time on the server's control path, the WSGI middleware that injects them, and
the client the tests plan them with (see that module's docstring for the kinds and their
effects).
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from http import HTTPStatus
from typing import Any, NoReturn
from xml.sax.saxutils import escape as xml_escape

import attrs


#: The control path of the fault injector. No bucket can be named ``_eosink`` (S3 bucket names
#: start with a letter or a digit), so no S3 request ever has this path.
FAULTS_PATH = "/_eosink/faults"
FAULT_KINDS = ("error", "lost_reply", "short_write", "delay")
#: The S3 error (code, message) a fault answers with, by HTTP status.
S3_ERRORS: dict[int, tuple[str, str]] = {
    400: (
        "IncompleteBody",
        "You did not provide the number of bytes specified by the Content-Length HTTP header.",
    ),
    500: ("InternalError", "We encountered an internal error. Please try again."),
    503: ("SlowDown", "Please reduce your request rate."),
}


def _methods(value: str | Iterable[str]) -> tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value)
    return tuple(sorted({name.upper() for name in names}))


def _status(value: int | None) -> int | None:
    if value is not None and value not in S3_ERRORS:
        raise ValueError(f"a fault answers one of {sorted(S3_ERRORS)} (or None), not {value}")
    return value


@attrs.frozen
class Fault:
    """One fault of a plan: what the server does to which requests.

    A fault watches the requests whose method is in ``methods`` and whose object key (the path
    after the bucket, ``""`` for requests on a bucket) matches ``key`` (``re.search``). It
    counts them, and hits the ``nth`` of them and the ``times - 1`` after it.

    ``kind``:

    * ``error``: answer ``status`` (503 SlowDown unless given; 500 InternalError, 400
      IncompleteBody) without handling the request: nothing changes in the store;
    * ``lost_reply``: handle the request (it lands, under the same one-write-at-a-time lock as
      every write), then lose the answer: close the connection without one (``status=None``)
      or answer ``status``. The client thinks it failed, although it took effect;
    * ``short_write``: read half of the request's body, then close the connection (or answer
      ``status``): the body was cut short, and S3 stores nothing of a body it did not get;
    * ``delay``: wait ``seconds`` before handling the request (not holding the write lock).
    """

    kind: str = attrs.field(validator=attrs.validators.in_(FAULT_KINDS))
    key: str = ""
    methods: tuple[str, ...] = attrs.field(default=("PUT",), converter=_methods)
    nth: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    times: int = attrs.field(default=1, validator=attrs.validators.ge(1))
    status: int | None = attrs.field(default=None, converter=_status)
    seconds: float = 0.0

    def __attrs_post_init__(self) -> None:
        re.compile(self.key)  # a bad pattern fails in the test that plans it, not the server

    def hits(self, count: int) -> bool:
        """Whether the ``count``-th matching request is one this fault hits."""
        return self.nth <= count < self.nth + self.times

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Fault:
        return cls(**data)


@attrs.frozen
class FaultCount:
    """How many requests one fault of the plan has seen (matched) and hit so far."""

    fault: Fault
    seen: int
    fired: int

    def to_json(self) -> dict[str, Any]:
        return {"fault": self.fault.to_json(), "seen": self.seen, "fired": self.fired}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FaultCount:
        return cls(Fault.from_json(data["fault"]), data["seen"], data["fired"])


@attrs.frozen
class FiredFault:
    """One fault that hit one request: which fault of the plan (``rule``, its index), the
    request (``method``, ``bucket``, ``key``), and for a lost reply the status the store had
    answered (``landed``: 200 when the write took effect, 412 when its condition failed)."""

    rule: int
    kind: str
    method: str
    bucket: str
    key: str
    landed: int | None = None

    def to_json(self) -> dict[str, Any]:
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> FiredFault:
        return cls(**data)


def _bucket_and_key(environ: dict[str, Any]) -> tuple[str, str]:
    """The bucket and key of a path-style request (WSGI paths are latin-1 decoded bytes)."""
    path = environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8", "replace")
    bucket, _, key = path.lstrip("/").partition("/")
    return bucket, key


def _s3_error(start_response: Callable[..., Any], status: int, key: str) -> list[bytes]:
    code, message = S3_ERRORS[status]
    body = (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f"<Error><Code>{code}</Code><Message>{message}</Message>"
        f"<Resource>{xml_escape(key)}</Resource><RequestId>eosink-fault</RequestId></Error>"
    ).encode()
    headers = [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))]
    start_response(f"{status} {HTTPStatus(status).phrase}", headers)
    return [body]


#: The WSGI environ key of a function that drops the request's connection (see ``serve``).
DROP_CONNECTION = "eosink.drop_connection"


def _drop_connection(environ: dict[str, Any]) -> NoReturn:
    """Close the request's connection without an answer, and end the request as a dropped
    connection, which werkzeug ends quietly."""
    drop = environ.get(DROP_CONNECTION)
    if drop is not None:
        drop()
    raise ConnectionAbortedError("eosink fault: the connection is dropped")


class FaultInjector:
    """A WSGI middleware that injects the faults of a plan the tests set at run time.

    Tests talk to it on the server's own address, on :data:`FAULTS_PATH`: ``POST`` a plan
    (``{"faults": [...]}``, replacing the one before and its counts), ``GET`` the counts and
    the faults fired, ``DELETE`` to clear both. Every other request goes on to the app unless a
    fault hits it. Each request is counted by every fault it matches; the first of those that
    hits it (in plan order) applies. Every fault fired is written to stderr.
    """

    def __init__(self, app: Callable[..., Any]) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.faults: list[Fault] = []
        self.seen: list[int] = []
        self.fired: list[FiredFault] = []

    def plan(self, faults: list[Fault]) -> None:
        with self.lock:
            self.faults = list(faults)
            self.seen = [0] * len(faults)
            self.fired = []

    def state(self) -> dict[str, Any]:
        with self.lock:
            counts = [
                FaultCount(f, seen, sum(1 for x in self.fired if x.rule == i))
                for i, (f, seen) in enumerate(zip(self.faults, self.seen))
            ]
            return {
                "counts": [c.to_json() for c in counts],
                "fired": [f.to_json() for f in self.fired],
            }

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if path == FAULTS_PATH:
            return self.control(environ, start_response)
        method = environ.get("REQUEST_METHOD", "")
        bucket, key = _bucket_and_key(environ)
        hit = self.match(method, key)
        if hit is None:
            return self.app(environ, start_response)
        rule, fault = hit
        fired = FiredFault(rule, fault.kind, method, bucket, key)
        if fault.kind == "delay":
            self.record(fired, f"waits {fault.seconds}s")
            time.sleep(fault.seconds)
            return self.app(environ, start_response)
        if fault.kind == "error":
            status = fault.status or 503
            self.record(fired, f"answers {status} without handling it")
            return _s3_error(start_response, status, key)
        if fault.kind == "short_write":
            length = int(environ.get("CONTENT_LENGTH") or 0)
            environ["wsgi.input"].read(length // 2)
            self.record(fired, f"read {length // 2} of {length} bytes, then " + _end(fault))
            if fault.status is None:
                _drop_connection(environ)
            return _s3_error(start_response, fault.status, key)
        # lost_reply: the request lands (the whole answer is made, under the write lock for
        # writes), and the answer is thrown away
        answered: list[str] = []
        list(self.app(environ, lambda status, headers, exc_info=None: answered.append(status)))
        landed = int(answered[0].split()[0]) if answered else None
        self.record(attrs.evolve(fired, landed=landed), f"handled ({landed}), then " + _end(fault))
        if fault.status is None:
            _drop_connection(environ)
        return _s3_error(start_response, fault.status, key)

    def match(self, method: str, key: str) -> tuple[int, Fault] | None:
        """Count the request against every fault it matches; the first fault hit, if any."""
        hit = None
        with self.lock:
            for i, fault in enumerate(self.faults):
                if method in fault.methods and re.search(fault.key, key):
                    self.seen[i] += 1
                    if hit is None and fault.hits(self.seen[i]):
                        hit = (i, fault)
        return hit

    def record(self, fired: FiredFault, what: str) -> None:
        with self.lock:
            self.fired.append(fired)
        print(
            f"eosink.testing.s3: fault {fired.rule} ({fired.kind}) on {fired.method} "
            f"/{fired.bucket}/{fired.key}: {what}",
            file=sys.stderr,
            flush=True,
        )

    def control(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        method = environ.get("REQUEST_METHOD")
        try:
            if method == "POST":
                length = int(environ.get("CONTENT_LENGTH") or 0)
                plan = json.loads(environ["wsgi.input"].read(length) or b"{}")
                self.plan([Fault.from_json(f) for f in plan.get("faults", [])])
            elif method == "DELETE":
                self.plan([])
            elif method != "GET":
                return _json_answer(start_response, "405 Method Not Allowed", {"error": method})
        except (ValueError, TypeError, KeyError) as exc:  # a bad plan: the test hears why
            return _json_answer(start_response, "400 Bad Request", {"error": str(exc)})
        return _json_answer(start_response, "200 OK", self.state())


def _end(fault: Fault) -> str:
    return "drops the connection" if fault.status is None else f"answers {fault.status}"


def _json_answer(start_response: Callable[..., Any], status: str, data: Any) -> list[bytes]:
    body = json.dumps(data).encode()
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))]
    )
    return [body]


@attrs.frozen
class S3Faults:
    """The fault injector of a test S3 server, driven from the test (see :class:`Fault`).

    A plan stays until the next :meth:`plan` or :meth:`clear`, for every client of the server:
    on a shared server, clear it when the test ends (the ``s3_faults`` fixture does).
    """

    url: str

    def plan(self, faults: Iterable[Fault]) -> None:
        """Replace the plan (and zero its counts) with ``faults``."""
        self._call("POST", {"faults": [f.to_json() for f in faults]})

    def clear(self) -> None:
        """No faults from now on; counts and the faults fired are forgotten."""
        self._call("DELETE")

    def counts(self) -> list[FaultCount]:
        """For each fault of the plan, the requests it matched and those it hit."""
        return [FaultCount.from_json(c) for c in self._call("GET")["counts"]]

    def fired(self) -> list[FiredFault]:
        """The faults fired since the plan was set, in order."""
        return [FiredFault.from_json(f) for f in self._call("GET")["fired"]]

    def _call(self, method: str, data: Any = None) -> dict[str, Any]:
        body = None if data is None else json.dumps(data).encode()
        request = urllib.request.Request(
            self.url + FAULTS_PATH,
            body,
            headers={"Content-Type": "application/json"},
            method=method,
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as answer:  # noqa: S310 - loopback
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            raise ValueError(f"the test S3 server refused the fault plan: {exc.read()!r}") from None


#: How each request kind of :class:`eosink.testing.faultfs.StoreFault` (``ops``) reaches
#: the server: (method, whether the request names an object or only the bucket). Writes of
#: delta-rs' data files are multipart uploads (POST, PUT, POST on the object); a list is a GET
#: on the bucket with a prefix query; a delete of several objects is one POST on the bucket; a
#: copy is a PUT with a source header, which the server's faults cannot tell from a PUT.
S3_REQUESTS: dict[str, tuple[tuple[str, bool], ...]] = {
    "head": (("HEAD", True),),
    "get": (("GET", True),),
    "list": (("GET", False),),
    "put": (("PUT", True), ("POST", True)),
    "copy": (("PUT", True),),
    "delete": (("DELETE", True), ("POST", False)),
}


class S3FaultTarget:
    """The conformance kit's store faults (:class:`eosink.testing.faultfs.StoreFault`) on a
    loopback S3 server: a :class:`eosink.testing.faultfs.FaultTarget` for
    :class:`eosink.testing.simulation.SimTarget`'s ``store``, for sinks whose client is not
    fsspec (delta-rs' object store).

    A store fault becomes a :class:`Fault` on the requests of its ``ops``: ``error`` answers
    503, ``lost_reply`` and ``short_write`` drop the connection (the client's own retries then
    decide what the sink sees). A fault on every kind of request counts them all together; a
    fault on deletes counts the deletes of one object and those of several (one POST on the
    bucket) apart, ``after`` in each, since a POST on an object is a write. A ``path`` narrows
    the fault to requests on objects: the server sees no key in a list or a delete of several
    objects. The server's plan is shared by every client of the server: one target (and one
    history) at a time per server.
    """

    def __init__(self, faults: S3Faults) -> None:
        self.faults = faults
        self.armed: list[Fault] = []
        self.done: list[FiredFault] = []  # fired under plans that were replaced since

    @staticmethod
    def translate(fault: Any) -> list[Fault]:
        """The server's faults for one store fault (a ``StoreFault``)."""
        groups: dict[bool, set[str]] = {}
        for op in fault.ops:
            for method, on_object in S3_REQUESTS[op]:
                groups.setdefault(on_object, set()).add(method)
        if fault.path:
            groups.pop(False, None)
            if not groups:
                raise ValueError(
                    f"a store fault on {fault.ops} with a path cannot be injected on the S3 "
                    "server: it sees no key in a list or a delete of several objects; drop "
                    "the path"
                )
        keys = {True: fault.path or ".", False: "^$"}
        if len(groups) == 2 and groups[False] <= groups[True]:
            # one count over both; it adds only requests on the bucket that sinks never send
            # (HEAD, PUT, DELETE of the bucket itself)
            groups, keys = {True: groups[True]}, {True: ""}
        return [
            Fault(fault.kind, key=keys[on_object], methods=tuple(methods), nth=fault.after)
            for on_object, methods in sorted(groups.items())
        ]

    def arm(self, *faults: Any) -> None:
        """Add store faults to the server's plan (the plan's counts start again)."""
        self._keep_fired()
        self.armed += [f for fault in faults for f in self.translate(fault)]
        self.faults.plan(self.armed)

    def disarm(self) -> None:
        """Clear the server's plan; what fired stays in :attr:`fired`."""
        self._keep_fired()
        self.armed = []
        self.faults.clear()

    @property
    def fired(self) -> list[FiredFault]:
        """Every fault fired since this target was made."""
        return self.done + self.faults.fired()

    def _keep_fired(self) -> None:
        self.done += self.faults.fired()
