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
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs

# The fault injector and its client (re-exported: tests plan faults through this module).
from eosink.testing.s3_faults import (
    DROP_CONNECTION,
    FAULT_KINDS,
    FAULTS_PATH,
    S3_ERRORS,
    Fault,
    FaultCount,
    FaultInjector,
    FiredFault,
    S3Faults,
    S3FaultTarget,
)

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

    def spark_s3a_settings(self) -> dict[str, str]:
        """Spark settings by which Hadoop's S3A (``s3a://``) reaches this server, and nothing
        else (no credentials from the environment, no instance metadata)."""
        return {
            "spark.hadoop.fs.s3a.endpoint": self.url,
            "spark.hadoop.fs.s3a.endpoint.region": self.region,
            "spark.hadoop.fs.s3a.access.key": self.access_key,
            "spark.hadoop.fs.s3a.secret.key": self.secret_key,
            "spark.hadoop.fs.s3a.aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
            "spark.hadoop.fs.s3a.path.style.access": "true",
            "spark.hadoop.fs.s3a.connection.ssl.enabled": "false",
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


__all__ = [
    "DROP_CONNECTION",
    "FAULTS_PATH",
    "FAULT_KINDS",
    "S3_ERRORS",
    "Fault",
    "FaultCount",
    "FaultInjector",
    "FiredFault",
    "S3Bucket",
    "S3Endpoint",
    "S3FaultTarget",
    "S3Faults",
    "s3_server",
    "serve",
]


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


#: The environment variables through which boto3-compatible clients find AWS settings.
AWS_ENVIRONMENT = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_PROFILE",
)


def forget_default_credentials(monkeypatch: Any, tmp_path: Any) -> None:
    """Through pytest's ``monkeypatch``: no AWS settings from the environment, ``~/.aws`` or the
    instance metadata, so that a client finds only what eosink passes it."""
    for name in AWS_ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


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
