"""The loopback S3 server that object-store tests run against honours what exactly-once needs."""

from __future__ import annotations

import socket
import threading
import time
from urllib.parse import urlparse

import attrs
import pytest
import s3fs

from eosink.testing.s3 import S3Bucket, s3_server, serialize_writes

pytest_plugins = ["eosink.testing.s3"]


def test_conditional_create_is_refused_when_the_key_exists(s3_bucket: S3Bucket) -> None:
    client = s3_bucket.endpoint.client()
    client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"first", IfNoneMatch="*")
    with pytest.raises(client.exceptions.ClientError) as info:
        client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"second", IfNoneMatch="*")
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert client.get_object(Bucket=s3_bucket.name, Key="k")["Body"].read() == b"first"


@pytest.mark.parametrize("size", [100, 11 * 2**20], ids=["put", "multipart"])
def test_s3fs_exclusive_open_is_a_conditional_create(s3_bucket: S3Bucket, size: int) -> None:
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **s3_bucket.endpoint.fsspec_options())
    path = f"{s3_bucket.name}/x"
    with fs.open(path, "xb", block_size=5 * 2**20) as f:
        f.write(b"a" * size)
    with pytest.raises(FileExistsError):
        with fs.open(path, "xb", block_size=5 * 2**20) as f:
            f.write(b"b" * size)
    assert fs.cat(path)[:1] == b"a"


def test_racing_conditional_creates_have_one_winner(s3_bucket: S3Bucket) -> None:
    client = s3_bucket.endpoint.client()
    for race in range(20):
        winners: list[int] = []
        gate = threading.Barrier(4)

        def create(n: int, key: str = f"race/{race}") -> None:
            gate.wait()
            try:
                client.put_object(Bucket=s3_bucket.name, Key=key, Body=b"%d" % n, IfNoneMatch="*")
                winners.append(n)
            except client.exceptions.ClientError:
                pass

        threads = [threading.Thread(target=create, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(winners) == 1


def test_serialize_writes_makes_check_then_store_atomic() -> None:
    """moto checks If-None-Match and then stores; the wrapper closes that window."""
    store: dict[str, bytes] = {}

    def check_then_store(environ, start_response):  # a store with moto's window, widened
        key = environ["PATH_INFO"]
        if key in store:
            start_response("412 Precondition Failed", [])
            return [b""]
        time.sleep(0.01)
        store[key] = environ["body"]
        start_response("200 OK", [])
        return [b""]

    def race(app) -> list[str]:
        statuses: list[str] = []
        gate = threading.Barrier(4)

        def put(n: int) -> None:
            gate.wait()
            app(
                {"REQUEST_METHOD": "PUT", "PATH_INFO": "/k", "body": b"%d" % n},
                lambda status, headers: statuses.append(status),
            )

        threads = [threading.Thread(target=put, args=(n,)) for n in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        store.clear()
        return statuses

    assert sum(s.startswith("200") for s in race(check_then_store)) > 1  # the window is real
    assert sum(s.startswith("200") for s in race(serialize_writes(check_then_store))) == 1


def test_the_server_is_gone_after_the_context() -> None:
    with s3_server() as endpoint:
        address = urlparse(endpoint.url)
        assert address.hostname == "127.0.0.1"
        socket.create_connection((address.hostname, address.port), timeout=5).close()
    with pytest.raises(OSError):
        socket.create_connection((address.hostname, address.port), timeout=5).close()


def test_the_secret_key_is_not_in_the_endpoints_repr(s3_bucket: S3Bucket) -> None:
    assert s3_bucket.endpoint.secret_key not in repr(s3_bucket)


def test_auth_server_checks_keys_and_policies() -> None:
    with s3_server(auth=True) as admin:
        bucket = admin.create_bucket()
        admin.client().put_object(Bucket=bucket, Key="k", Body=b"x")
        reader = admin.user("reader", ("s3:GetObject", "s3:ListBucket"))
        assert reader.client().get_object(Bucket=bucket, Key="k")["Body"].read() == b"x"
        with pytest.raises(Exception, match="AccessDenied"):
            reader.client().put_object(Bucket=bucket, Key="k2", Body=b"y")
        wrong = attrs.evolve(admin, secret_key="not-the-secret")
        with pytest.raises(Exception, match="SignatureDoesNotMatch"):
            wrong.client().get_object(Bucket=bucket, Key="k")
        unknown = attrs.evolve(admin, access_key="AKIANOBODY")
        with pytest.raises(Exception, match="InvalidAccessKeyId"):
            unknown.client().get_object(Bucket=bucket, Key="k")


def test_server_without_conditional_create_overwrites() -> None:
    with s3_server(conditional_create=False) as endpoint:
        client, bucket = endpoint.client(), endpoint.create_bucket()
        client.put_object(Bucket=bucket, Key="k", Body=b"first", IfNoneMatch="*")
        client.put_object(Bucket=bucket, Key="k", Body=b"second", IfNoneMatch="*")
        assert client.get_object(Bucket=bucket, Key="k")["Body"].read() == b"second"
