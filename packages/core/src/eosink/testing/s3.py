"""A real S3 endpoint on loopback for tests: moto's S3 server in a process of its own.

Sinks that publish to object stores win or lose exactly-once on the store's conditional create
(``PutObject`` with ``If-None-Match: *``). moto's server answers it with ``412
PreconditionFailed`` as S3 does, but it checks and then stores inside a threaded server, so two
racing creates could both pass the check. Real S3 decides conditional writes atomically; to stay
as faithful as that, this server lets one mutating request (PUT, POST, DELETE) run at a time,
while reads stay concurrent.

Use it from pytest (``pytest_plugins = ["eosink.testing.s3"]`` or import the fixtures)::

    def test_publish(s3_bucket):
        fs = s3fs.S3FileSystem(**s3_bucket.endpoint.fsspec_options())
        ...

or as a program (``python -m eosink.testing.s3 --port 0``), which prints ``port=<n>`` once it
listens. Two variants for tests of bad stores: ``s3_server(auth=True)`` checks credentials and
IAM policies (moto's IAM auth: the endpoint's keys are those of an all-powerful IAM user, and
:meth:`S3Endpoint.user` makes users with fewer rights); ``s3_server(conditional_create=False)``
ignores ``If-None-Match``, as S3-compatible stores without conditional writes do.
``s3_server(rendezvous=REGEX)`` makes races deterministic: the first PUT of a key matching the
pattern waits (a few seconds at most) for a second PUT of the same key, then both go on, so two
writers that read the same state both ask for the same object.

Faults, for clients that do not go through fsspec (delta-rs' object store): every server takes
a plan of :class:`Fault` from the test at run time, on its own address (``POST``, ``GET``,
``DELETE`` on ``/_eosink/faults``, a path no bucket can have, never taken for an S3 request)::

    def test_lost_commit_reply(s3_bucket, s3_faults):
        s3_faults.plan([Fault("lost_reply", key=r"^table/_delta_log/0{19}1[.]json$")])
        ...
        assert [f.landed for f in s3_faults.fired()] == [200]

A fault hits the ``nth`` (and ``times - 1`` more) of the requests with one of its ``methods``
(PUT by default) and an object key matching its ``key`` pattern, e.g. "the 3rd PUT under
table/_delta_log/". ``error`` answers 503 SlowDown or 500 InternalError and changes nothing;
``lost_reply`` lets the request land, then drops the connection (or answers 500);
``short_write`` reads half of the body and drops the connection (or answers 400
IncompleteBody): nothing lands; ``delay`` waits before the request is handled.
:meth:`S3Faults.counts` tells how many requests each fault saw and hit,
:meth:`S3Faults.fired` which; :meth:`S3Faults.clear` ends them (the ``s3_faults`` fixture clears
before and after a test). The server writes every fault fired to its stderr, the tests'.

Clients retry on their own, and so hide or change a fault: botocore (and s3fs over it) retries
5xx and dropped connections, aiohttp (under s3fs) sends a PUT once more when the connection
drops, and object_store (delta-rs) retries 5xx and dropped connections 10 times, with a random
backoff from 100 ms (at most 15 s a wait, 3 minutes in all); delta-rs' storage options
``max_retries``, ``retry_timeout``, ``backoff_config.init_backoff``, ``.max_backoff`` and
``.base`` set that. A retry of a conditional create whose reply was lost is refused (the first
one landed): the writer hears "already exists" of its own object.

Only 127.0.0.1 is ever bound. moto is needed in the server's environment only
(``pip install 'moto[server]'``); the client side uses boto3-compatible clients (s3fs,
delta-rs' object store).
"""

from __future__ import annotations

import argparse
import json
import os
import logging
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from http import HTTPStatus
from typing import Any, NoReturn
from xml.sax.saxutils import escape as xml_escape

import attrs

HOST = "127.0.0.1"
_MUTATING = frozenset({"PUT", "POST", "DELETE"})


@attrs.frozen
class S3Endpoint:
    """Where a test S3 server listens and the credentials it takes.

    moto accepts any credentials; they are fixed here so that tests can tell a secret that
    leaked into a log or a manifest from one that did not.
    """

    url: str
    access_key: str = "eosink-test-access-key"
    secret_key: str = attrs.field(default="eosink-test-secret-key", repr=False)
    region: str = "us-east-1"

    def fsspec_options(self) -> dict[str, Any]:
        """Options for ``s3fs.S3FileSystem`` / ``fsspec.filesystem("s3", ...)``."""
        return {
            "key": self.access_key,
            "secret": self.secret_key,
            "client_kwargs": {"endpoint_url": self.url, "region_name": self.region},
        }

    def object_store_options(self) -> dict[str, str]:
        """Options for delta-rs (``storage_options`` of ``deltalake``), object_store's names."""
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        """A boto3 S3 client for this endpoint (tests use it to inspect the store directly)."""
        return self._boto("s3")

    def faults(self) -> S3Faults:
        """The server's fault injector: plan faults, clear them, read what fired."""
        return S3Faults(self.url)

    def user(self, name: str, actions: tuple[str, ...] = ("s3:*",)) -> S3Endpoint:
        """This endpoint with the keys of a new IAM user allowed only ``actions`` (on ``*``).

        Rights matter only on a server started with ``auth=True``.
        """
        iam = self._boto("iam")
        iam.create_user(UserName=name)
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": list(actions), "Resource": "*"}],
        }
        iam.put_user_policy(UserName=name, PolicyName="eosink", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=name)["AccessKey"]
        return attrs.evolve(self, access_key=key["AccessKeyId"], secret_key=key["SecretAccessKey"])

    def _boto(self, service: str) -> Any:
        import boto3  # pants: no-infer-dep (the "testing" extra)

        return boto3.client(
            service,
            endpoint_url=self.url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name by default) and return its name."""
        name = name or f"eosink-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name


@attrs.frozen
class S3Bucket:
    """One bucket of a test endpoint."""

    endpoint: S3Endpoint
    name: str

    def uri(self, key: str = "", scheme: str = "s3") -> str:
        return f"{scheme}://{self.name}/{key.lstrip('/')}"


def serialize_writes(app: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a WSGI app so that mutating requests run one at a time (atomic conditional writes).

    The whole response is produced under the lock: moto builds its body eagerly, so the
    check and the store of a conditional ``PutObject`` happen inside it.
    """
    lock = threading.Lock()

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("REQUEST_METHOD") not in _MUTATING:
            return app(environ, start_response)
        with lock:
            return list(app(environ, start_response))

    return wrapped


def ignore_conditional_create(app: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a WSGI app so that it never sees ``If-None-Match``: every create overwrites."""

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        environ.pop("HTTP_IF_NONE_MATCH", None)
        return app(environ, start_response)

    return wrapped


def rendezvous_puts(
    app: Callable[..., Any], pattern: str, wait_s: float = 10.0
) -> Callable[..., Any]:
    """Wrap a WSGI app so that the first PUT of a path matching ``pattern`` waits for a second
    PUT of that path (at most ``wait_s``); then both go on (one at a time, as every write)."""
    regex = re.compile(pattern)
    lock = threading.Lock()
    waiting: dict[str, threading.Event] = {}

    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        path = environ.get("PATH_INFO", "")
        if environ.get("REQUEST_METHOD") == "PUT" and regex.search(path):
            with lock:
                partner = waiting.pop(path, None)
                if partner is None:
                    mine = waiting[path] = threading.Event()
            if partner is not None:
                partner.set()
            else:
                mine.wait(wait_s)
                with lock:
                    if waiting.get(path) is mine:
                        del waiting[path]
        return app(environ, start_response)

    return wrapped


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
    bucket) apart, ``after`` in each, since a POST on an object is a write. A ``path`` narrows the fault to requests on objects: the server
    sees no key in a list or a delete of several objects. The server's plan is shared by every
    client of the server: one target (and one history) at a time per server.
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


def serve(
    port: int = 0,
    ready: Callable[[int], None] | None = None,
    conditional_create: bool = True,
    rendezvous: str | None = None,
) -> None:
    """Run moto's S3 server on 127.0.0.1:port until the process ends."""
    # moto comes with eosink's "testing" extra; the library itself never needs it.
    from moto.moto_server.werkzeug_app import (  # pants: no-infer-dep
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server  # pants: no-infer-dep

    app = serialize_writes(DomainDispatcherApplication(create_backend_app))
    if not conditional_create:
        app = ignore_conditional_create(app)
    # inside the rendezvous: two PUTs meet first, then a fault may hit one of them
    app = FaultInjector(app)
    if rendezvous:
        app = rendezvous_puts(app, rendezvous)
    # stderr is the tests' (faults fired, errors); a line for every request would drown them
    logging.getLogger("werkzeug").setLevel(logging.WARNING)

    class RequestHandler(MotoRequestHandler):
        """moto's, with a way for a fault to drop the connection: shut the socket (the client
        sees the connection closed, or reset) and read no further request from it (the rest
        of a body cut short is not one)."""

        def make_environ(self) -> dict[str, Any]:
            environ = super().make_environ()
            environ[DROP_CONNECTION] = self.drop_connection
            return environ

        def drop_connection(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # the client left already

    server = make_server(HOST, port, app, threaded=True, request_handler=RequestHandler)
    (ready or _print_port)(server.server_address[1])
    server.serve_forever()


def _print_port(port: int) -> None:
    print(f"port={port}", flush=True)


@contextmanager
def s3_server(
    timeout_s: float = 60.0,
    *,
    auth: bool = False,
    conditional_create: bool = True,
    rendezvous: str | None = None,
) -> Iterator[S3Endpoint]:
    """Start the S3 server in a child process, yield its endpoint, stop it (and wait) after.

    The child gets this process's ``sys.path``, so it finds moto wherever the tests found it
    (a venv, a pex). ``auth``: requests must be signed with an IAM user's keys and its policy
    must allow the action; the endpoint yielded carries the keys of a user allowed everything.
    ``conditional_create=False``: the server ignores ``If-None-Match`` (overwrites).
    ``rendezvous``: a pattern of paths whose first PUT waits for a second (see the module).
    The server's stderr is this process's: faults fired and server errors show in the tests'.
    """
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    args = ["--port", "0"] + ([] if conditional_create else ["--ignore-if-none-match"])
    args += ["--rendezvous", rendezvous] if rendezvous else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "eosink.testing.s3", *args],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line.startswith("port="):
            raise RuntimeError(
                f"the test S3 server did not start (exit code {proc.poll()}); "
                "is moto[server] installed in this environment?"
            )
        endpoint = S3Endpoint(url=f"http://{HOST}:{int(line.strip().split('=')[1])}")
        _wait_until_up(endpoint.url, timeout_s)
        if auth:
            endpoint = _enable_auth(endpoint)
        yield endpoint
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _enable_auth(endpoint: S3Endpoint) -> S3Endpoint:
    """Make an all-powerful IAM user, then turn moto's IAM auth on; its keys from now on."""
    admin = endpoint.user("eosink-admin", ("*",))
    request = urllib.request.Request(
        f"{endpoint.url}/moto-api/reset-auth",
        b"0",  # moto reads the raw body: not a form
        headers={"Content-Type": "text/plain"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10):  # noqa: S310 - loopback only
        pass
    return admin


def _wait_until_up(url: str, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):  # noqa: S310 - loopback only
                return
        except OSError as exc:
            if getattr(exc, "code", None):  # an HTTP error answer: it is up
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test S3 server at {url} did not answer") from exc
            time.sleep(0.1)


try:
    import pytest
except ImportError:  # pragma: no cover - used as a program without pytest
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    @pytest.fixture(scope="session")
    def s3_endpoint() -> Iterator[S3Endpoint]:
        """One loopback S3 server for the whole test session."""
        with s3_server() as endpoint:
            yield endpoint

    @pytest.fixture
    def s3_bucket(s3_endpoint: S3Endpoint) -> S3Bucket:
        """A fresh, empty bucket on the session's S3 server."""
        return S3Bucket(s3_endpoint, s3_endpoint.create_bucket())

    @pytest.fixture
    def s3_faults(s3_endpoint: S3Endpoint) -> Iterator[S3Faults]:
        """The session server's fault injector, without faults before and after the test."""
        faults = s3_endpoint.faults()
        faults.clear()
        yield faults
        faults.clear()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="moto's S3 server on 127.0.0.1, for tests")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--ignore-if-none-match", action="store_true", help="overwrite on conditional creates"
    )
    parser.add_argument(
        "--rendezvous", default=None, help="regex: the first PUT of such a path waits for a second"
    )
    args = parser.parse_args(argv)
    serve(args.port, conditional_create=not args.ignore_if_none_match, rendezvous=args.rendezvous)


if __name__ == "__main__":
    main()
