"""The loopback S3 server's faults do to clients what the plan says, and nothing else: an error
changes nothing, a lost reply lands, a short write does not; they hit the nth request of their
methods and keys only, and they go away when cleared.

The clients' own retries are off (boto3's, s3fs'), so that each fault reaches the test as the
client sees it; one test shows what a retrying client makes of a lost reply.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

import boto3
import pytest
import s3fs
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError

from eosink.testing.faultfs import StoreFault
from eosink.testing.s3 import (
    FAULTS_PATH,
    Fault,
    S3Bucket,
    S3Endpoint,
    S3Faults,
    S3FaultTarget,
    s3_server,
)

pytest_plugins = ["eosink.testing.s3"]


def boto(endpoint: S3Endpoint, retries: bool = False) -> Any:
    """A boto3 client that tries once (or retries as boto3 does by default)."""
    config = None if retries else Config(retries={"mode": "standard", "total_max_attempts": 1})
    return boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        region_name=endpoint.region,
        config=config,
    )


def fs(endpoint: S3Endpoint) -> s3fs.S3FileSystem:
    """An s3fs file system that tries once (s3fs retries on its own, over botocore's)."""
    filesystem = s3fs.S3FileSystem(
        skip_instance_cache=True,
        config_kwargs={"retries": {"mode": "standard", "total_max_attempts": 1}},
        **endpoint.fsspec_options(),
    )
    filesystem.retries = 1  # a class attribute, not an option
    return filesystem


def exists(bucket: S3Bucket, key: str) -> bool:
    listing = bucket.endpoint.client().list_objects_v2(Bucket=bucket.name, Prefix=key)
    return any(o["Key"] == key for o in listing.get("Contents", []))


def body(bucket: S3Bucket, key: str) -> bytes:
    return bucket.endpoint.client().get_object(Bucket=bucket.name, Key=key)["Body"].read()


@pytest.mark.parametrize(("status", "code"), [(None, "SlowDown"), (500, "InternalError")])
def test_an_error_answers_without_handling_the_request(
    s3_bucket: S3Bucket, s3_faults: S3Faults, status: int | None, code: str
) -> None:
    s3_faults.plan([Fault("error", key=r"^k$", status=status)])
    with pytest.raises(ClientError) as info:
        boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="k", Body=b"x")
    assert info.value.response["Error"]["Code"] == code
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == (status or 503)
    assert not exists(s3_bucket, "k")
    assert [(f.kind, f.method, f.bucket, f.key) for f in s3_faults.fired()] == [
        ("error", "PUT", s3_bucket.name, "k")
    ]


def test_an_error_reaches_s3fs_and_nothing_is_written(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    s3_faults.plan([Fault("error", key=r"^k$", status=500)])
    with pytest.raises(OSError, match="InternalError|internal error"):
        fs(s3_bucket.endpoint).pipe(f"{s3_bucket.name}/k", b"x")
    assert not exists(s3_bucket, "k")
    assert len(s3_faults.fired()) == 1


@pytest.mark.parametrize("status", [None, 500], ids=["dropped", "answered-500"])
def test_a_lost_reply_fails_the_client_although_the_object_landed(
    s3_bucket: S3Bucket, s3_faults: S3Faults, status: int | None
) -> None:
    """A conditional create whose reply is lost: the create took effect (a second one is
    refused), the client heard of a failure."""
    client = boto(s3_bucket.endpoint)
    s3_faults.plan([Fault("lost_reply", key=r"^k$", status=status)])
    expected = ConnectionClosedError if status is None else ClientError
    with pytest.raises(expected):
        client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"first", IfNoneMatch="*")
    assert body(s3_bucket, "k") == b"first"
    with pytest.raises(ClientError) as again:
        client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"second", IfNoneMatch="*")
    assert again.value.response["Error"]["Code"] == "PreconditionFailed"
    assert [(f.kind, f.landed) for f in s3_faults.fired()] == [("lost_reply", 200)]


def test_a_lost_reply_of_a_refused_create_says_so(s3_bucket: S3Bucket, s3_faults: S3Faults) -> None:
    """The fault records what the store answered before the reply was lost: here 412, the
    create did not take effect."""
    client = boto(s3_bucket.endpoint)
    client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"first")
    s3_faults.plan([Fault("lost_reply", key=r"^k$")])
    with pytest.raises(ConnectionClosedError):
        client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"second", IfNoneMatch="*")
    assert body(s3_bucket, "k") == b"first"
    assert [f.landed for f in s3_faults.fired()] == [412]


def test_a_lost_reply_reaches_s3fs_and_the_file_is_there(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    s3_faults.plan([Fault("lost_reply", key=r"^k$", status=500)])
    path = f"{s3_bucket.name}/k"
    with pytest.raises(OSError) as info:
        with fs(s3_bucket.endpoint).open(path, "xb") as f:
            f.write(b"first")
    assert not isinstance(info.value, FileExistsError)
    assert body(s3_bucket, "k") == b"first"
    with pytest.raises(FileExistsError):  # it did land: an exclusive create is refused now
        with fs(s3_bucket.endpoint).open(path, "xb") as f:
            f.write(b"second")


def test_s3fs_resends_a_put_whose_connection_dropped(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """Below s3fs and botocore (retries off), aiohttp sends an idempotent request (PUT) once
    more when the server drops the connection: a dropped lost reply of an exclusive create
    reaches s3fs as "the file exists" (its own), and a dropped short write is written again.
    Faults meant to reach s3fs as such drop twice, or answer a status."""
    s3_faults.plan([Fault("lost_reply", key=r"^k$"), Fault("short_write", key=r"^s$")])
    with pytest.raises(FileExistsError):
        with fs(s3_bucket.endpoint).open(f"{s3_bucket.name}/k", "xb") as f:
            f.write(b"first")
    assert body(s3_bucket, "k") == b"first"
    fs(s3_bucket.endpoint).pipe(f"{s3_bucket.name}/s", b"x" * 100_000)
    assert body(s3_bucket, "s") == b"x" * 100_000
    assert [(c.seen, c.fired) for c in s3_faults.counts()] == [(2, 1), (2, 1)]


def test_a_retrying_client_sees_its_own_lost_create_as_someone_elses(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """boto3 retries the dropped conditional create by itself; the retry finds the object the
    first attempt created and is refused: the writer is told the key was taken."""
    s3_faults.plan([Fault("lost_reply", key=r"^k$")])
    with pytest.raises(ClientError) as info:
        boto(s3_bucket.endpoint, retries=True).put_object(
            Bucket=s3_bucket.name, Key="k", Body=b"mine", IfNoneMatch="*"
        )
    assert info.value.response["Error"]["Code"] == "PreconditionFailed"
    assert body(s3_bucket, "k") == b"mine"
    assert s3_faults.counts()[0].seen == 2  # the lost attempt and the refused retry


@pytest.mark.parametrize("status", [None, 400], ids=["dropped", "answered-400"])
def test_a_short_write_stores_nothing(
    s3_bucket: S3Bucket, s3_faults: S3Faults, status: int | None
) -> None:
    s3_faults.plan([Fault("short_write", key=r"^k$", status=status)])
    with pytest.raises((ClientError, ConnectionClosedError)):
        boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="k", Body=b"x" * 100_000)
    assert not exists(s3_bucket, "k")
    assert [f.kind for f in s3_faults.fired()] == ["short_write"]


@pytest.mark.parametrize(
    ("status", "times"), [(None, 2), (400, 1)], ids=["dropped-twice", "answered-400"]
)
def test_a_short_write_reaches_s3fs_and_nothing_is_written(
    s3_bucket: S3Bucket, s3_faults: S3Faults, status: int | None, times: int
) -> None:
    s3_faults.plan([Fault("short_write", key=r"^k$", status=status, times=times)])
    # s3fs turns S3's error answers into OSError, and lets botocore's connection errors through
    with pytest.raises((OSError, ConnectionClosedError)):
        fs(s3_bucket.endpoint).pipe(f"{s3_bucket.name}/k", b"x" * 100_000)
    assert not exists(s3_bucket, "k")
    assert len(s3_faults.fired()) == times


def test_a_delay_holds_the_request_then_handles_it(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    s3_faults.plan([Fault("delay", key=r"^k$", seconds=1.0)])
    started = time.monotonic()
    boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="k", Body=b"x")
    assert time.monotonic() - started >= 1.0
    assert body(s3_bucket, "k") == b"x"


def test_faults_count_only_the_requests_of_their_methods_and_keys(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """The 3rd and 4th PUT under t/_delta_log/, as a plan says it: other keys, and reads of the
    same keys, do not count."""
    client = boto(s3_bucket.endpoint)
    s3_faults.plan([Fault("error", key=r"^t/_delta_log/", methods=("put",), nth=3, times=2)])

    def put(key: str) -> bool:
        try:
            client.put_object(Bucket=s3_bucket.name, Key=key, Body=b"x")
        except ClientError:
            return False
        return True

    assert put("t/_delta_log/1.json") and put("t/part-1.parquet")
    client.get_object(Bucket=s3_bucket.name, Key="t/_delta_log/1.json")
    assert put("t/_delta_log/2.json")
    assert not put("t/_delta_log/3.json")  # the 3rd
    assert not put("t/_delta_log/4.json")  # the 4th (times=2)
    assert put("t/_delta_log/5.json")
    [count] = s3_faults.counts()
    assert (count.seen, count.fired) == (5, 2)
    assert [f.key for f in s3_faults.fired()] == ["t/_delta_log/3.json", "t/_delta_log/4.json"]


def test_each_fault_of_a_plan_counts_on_its_own(s3_bucket: S3Bucket, s3_faults: S3Faults) -> None:
    client = boto(s3_bucket.endpoint)
    s3_faults.plan(
        [Fault("error", key=r"^a", nth=2), Fault("error", key=r"", methods=("GET",), nth=1)]
    )
    client.put_object(Bucket=s3_bucket.name, Key="a1", Body=b"x")
    with pytest.raises(ClientError):
        client.get_object(Bucket=s3_bucket.name, Key="a1")
    with pytest.raises(ClientError):
        client.put_object(Bucket=s3_bucket.name, Key="a2", Body=b"x")
    assert client.get_object(Bucket=s3_bucket.name, Key="a1")["Body"].read() == b"x"
    assert [(c.seen, c.fired) for c in s3_faults.counts()] == [(2, 1), (2, 1)]
    assert [(f.rule, f.method) for f in s3_faults.fired()] == [(1, "GET"), (0, "PUT")]


def test_clear_ends_the_faults_and_forgets_the_counts(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    s3_faults.plan([Fault("error", times=100)])
    with pytest.raises(ClientError):
        boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="k", Body=b"x")
    s3_faults.clear()
    boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="k", Body=b"x")
    assert s3_faults.counts() == [] and s3_faults.fired() == []


def test_a_new_plan_replaces_the_old_one(s3_bucket: S3Bucket, s3_faults: S3Faults) -> None:
    s3_faults.plan([Fault("error", key=r"^a")])
    s3_faults.plan([Fault("error", key=r"^b")])
    boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="a", Body=b"x")
    with pytest.raises(ClientError):
        boto(s3_bucket.endpoint).put_object(Bucket=s3_bucket.name, Key="b", Body=b"x")
    assert [c.fault.key for c in s3_faults.counts()] == ["^b"]


def test_the_control_path_is_no_bucket(s3_bucket: S3Bucket, s3_faults: S3Faults) -> None:
    """Its requests reach the injector only (a plan of a bad fault is refused with the reason),
    and no S3 request is taken for one of its."""
    with urllib.request.urlopen(s3_bucket.endpoint.url + FAULTS_PATH, timeout=10) as answer:
        assert json.loads(answer.read()) == {"counts": [], "fired": []}
    request = urllib.request.Request(
        s3_bucket.endpoint.url + FAULTS_PATH,
        json.dumps({"faults": [{"kind": "nope"}]}).encode(),
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - loopback only
    assert info.value.code == 400 and b"nope" in info.value.read()
    names = [b["Name"] for b in s3_bucket.endpoint.client().list_buckets()["Buckets"]]
    assert "_eosink" not in names and s3_bucket.name in names
    s3_faults.plan([Fault("error", key="", methods=("GET", "POST", "DELETE"), times=100)])
    assert s3_faults.counts()[0].seen == 0  # the control requests are not counted...
    s3_faults.clear()  # ...nor hit


def test_faults_are_checked_in_the_test_that_plans_them() -> None:
    with pytest.raises(ValueError):
        Fault("nope")
    with pytest.raises(ValueError):
        Fault("error", status=404)
    with pytest.raises(ValueError):
        Fault("error", nth=0)
    with pytest.raises(Exception, match="unterminated|missing"):
        Fault("error", key="(")


def test_every_fault_fired_is_logged_by_the_server(capfd: pytest.CaptureFixture[str]) -> None:
    with s3_server() as endpoint:
        bucket = endpoint.create_bucket()
        endpoint.faults().plan([Fault("error", key=r"^k$")])
        with pytest.raises(ClientError):
            boto(endpoint).put_object(Bucket=bucket, Key="k", Body=b"x")
    err = capfd.readouterr().err
    assert f"fault 0 (error) on PUT /{bucket}/k: answers 503" in err


def test_the_kits_store_faults_hit_the_requests_of_their_kind(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """The simulation's store faults on the S3 server: a list is a GET on the bucket, a read a
    GET on an object; what fired stays in ``fired`` when the target is disarmed."""
    client = boto(s3_bucket.endpoint)
    client.put_object(Bucket=s3_bucket.name, Key="k", Body=b"x")
    target = S3FaultTarget(s3_faults)
    target.arm(StoreFault("error", after=1, ops=("list",)))
    client.get_object(Bucket=s3_bucket.name, Key="k")  # a read: not a list
    with pytest.raises(ClientError):
        client.list_objects_v2(Bucket=s3_bucket.name, Prefix="k")
    target.disarm()
    client.list_objects_v2(Bucket=s3_bucket.name, Prefix="k")
    target.arm(StoreFault("lost_reply", after=2, ops=("get", "head")))
    client.head_object(Bucket=s3_bucket.name, Key="k")
    with pytest.raises(ConnectionClosedError):
        client.get_object(Bucket=s3_bucket.name, Key="k")
    target.disarm()
    assert [(f.kind, f.method, f.key) for f in target.fired] == [
        ("error", "GET", ""),
        ("lost_reply", "GET", "k"),
    ]


def test_the_kits_store_faults_on_deletes_count_single_and_bulk_deletes_apart() -> None:
    """A POST on an object is a write, a POST on the bucket a delete of several objects."""
    assert S3FaultTarget.translate(StoreFault("error", after=3, ops=("delete",))) == [
        Fault("error", key="^$", methods=("POST",), nth=3),
        Fault("error", key=".", methods=("DELETE",), nth=3),
    ]
    assert S3FaultTarget.translate(StoreFault("error", ops=("put",), path="^t/")) == [
        Fault("error", key="^t/", methods=("POST", "PUT"))
    ]
    with pytest.raises(ValueError, match="drop the path"):
        S3FaultTarget.translate(StoreFault("error", ops=("list",), path="^t/"))
