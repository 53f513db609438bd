"""The delta sink on S3 (delta-rs' own object store client against the loopback S3 server): the
conformance kit, two writers racing for one Delta version, stores that cannot arbitrate that
race, bad stores refused before any data is written, and secrets kept out of sight."""

from __future__ import annotations

import json
import threading

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.transaction import CommitProperties, Transaction
from delta_helpers import run
from eosink_delta.sink import DeltaSink, read_table
from eosink_delta.store import TableStore

import eosink
from eosink.plugin import BatchContext
from eosink import ConfigurationError
from eosink.testing.conformance import SinkConformance
from eosink.testing.object_store import ObjectStoreRefusals, ObjectStoreStorage
from eosink.testing.s3 import S3Bucket, S3Endpoint, s3_server
from eosink.testing.secrets import assert_masked, debug_logs


def s3_sink(bucket: S3Bucket, key: str = "table", storage=None, **options) -> DeltaSink:
    storage = {**bucket.endpoint.object_store_options(), **(storage or {})}
    return DeltaSink(path=bucket.uri(key), storage_options=storage, **options)


def keys(bucket: S3Bucket, prefix: str = "") -> list[str]:
    listing = bucket.endpoint.client().list_objects_v2(Bucket=bucket.name, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", [])]


def read_rows_of(bucket: S3Bucket, key: str = "table") -> list[dict]:
    if not keys(bucket, f"{key}/_delta_log/"):
        return []
    return read_table(bucket.uri(key), bucket.endpoint.object_store_options()).to_pylist()


class TestS3Conformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, s3_bucket):
        return lambda: s3_sink(s3_bucket)

    @pytest.fixture
    def read_rows(self, s3_bucket):
        return lambda: read_rows_of(s3_bucket)


def test_executors_write_the_data_files_into_the_bucket(s3_bucket):
    assert run(s3_sink(s3_bucket, partition_by=["name"]), 0).status == "committed"
    opts = s3_bucket.endpoint.object_store_options()
    table = DeltaTable(s3_bucket.uri("table"), storage_options=opts)
    uris = table.file_uris()
    assert uris and all(u.startswith(f"s3://{s3_bucket.name}/table/name=r") for u in uris)
    assert table.transaction_version("w") == 0  # the txn, as delta-rs reads it on S3
    assert len(read_rows_of(s3_bucket)) == 5
    assert not keys(s3_bucket, "table/_eosink_probe")  # the access probe left nothing


def commit(table: DeltaTable, app: str, version: int) -> None:
    table.create_write_transaction(
        [],
        "append",
        table.schema(),
        commit_properties=CommitProperties(app_transactions=[Transaction(app, version)]),
    )


#: The commit file of version 1, which both racing writers ask for.
VERSION_1 = r"/_delta_log/0{19}1\.json$"


def race(endpoint: S3Endpoint, apps: tuple[str, str]) -> tuple[list, DeltaTable]:
    """Two writers on one snapshot commit at once; the server holds the first commit file's
    PUT until the second one arrives, so both ask for the same Delta version."""
    bucket = S3Bucket(endpoint, endpoint.create_bucket())
    uri, opts = bucket.uri("t"), endpoint.object_store_options()
    DeltaTable.create(uri, pa.schema([("x", pa.int64())]), storage_options=opts)
    handles = [DeltaTable(uri, storage_options=opts) for _ in apps]
    outcomes: list = [None, None]

    def attempt(i: int) -> None:
        try:
            commit(handles[i], apps[i], 1)
            outcomes[i] = "committed"
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test checks
            outcomes[i] = type(exc).__name__

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return outcomes, DeltaTable(uri, storage_options=opts)


@pytest.fixture(scope="module")
def racing_endpoint():
    with s3_server(rendezvous=VERSION_1) as endpoint:
        yield endpoint


def test_two_writers_racing_for_one_version_one_wins(racing_endpoint):
    """S3 decides: one commit file PUT gets 412, delta-rs sees the winner's commit. The same
    writer's txn is a conflict (the sink reads it as already committed); another writer's
    commit moves on to the next version. Nothing is overwritten."""
    outcomes, table = race(racing_endpoint, ("w", "w"))
    assert sorted(outcomes) == ["CommitFailedError", "committed"]
    assert table.version() == 1 and table.transaction_version("w") == 1
    outcomes, table = race(racing_endpoint, ("a", "b"))
    assert outcomes == ["committed", "committed"]
    assert table.version() == 2
    assert (table.transaction_version("a"), table.transaction_version("b")) == (1, 1)


def test_without_conditional_create_a_racing_commit_is_lost():
    """What the sink refuses such a store for: both writers' PUTs of version 1 succeed, the
    second overwrites the first, and one writer's batch is gone though it was told committed."""
    with s3_server(rendezvous=VERSION_1, conditional_create=False) as endpoint:
        outcomes, table = race(endpoint, ("a", "b"))
        assert outcomes == ["committed", "committed"]
        assert table.version() == 1
        held = [table.transaction_version("a"), table.transaction_version("b")]
        assert sorted(held, key=str) == [1, None]


class TestS3Refusals(ObjectStoreStorage, ObjectStoreRefusals):
    """Bad stores refused before any data is written (the kit's tests, on delta-rs' client)."""

    folder = "table"
    credentials_match = "credentials"

    def make_sink(self, uri, storage_options, **options):
        return DeltaSink(path=uri, storage_options=storage_options, **options)


def test_unsafe_rename_is_refused_unless_single_writer(s3_bucket, monkeypatch):
    with pytest.raises(ConfigurationError, match="AWS_S3_ALLOW_UNSAFE_RENAME.*single_writer"):
        run(s3_sink(s3_bucket, storage={"aws_s3_allow_unsafe_rename": "true"}), 0)
    monkeypatch.setenv("AWS_S3_ALLOW_UNSAFE_RENAME", "true")
    with pytest.raises(ConfigurationError, match="AWS_S3_ALLOW_UNSAFE_RENAME.*single_writer"):
        run(s3_sink(s3_bucket), 0)
    assert keys(s3_bucket) == []
    assert run(s3_sink(s3_bucket, single_writer=True), 0).status == "committed"


def test_local_path_with_storage_options_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="storage_options.*local"):
        DeltaSink(path=str(tmp_path / "t"), storage_options={"AWS_REGION": "x"})


def test_spark_storage_options_reach_the_sink(s3_bucket):
    endpoint = s3_bucket.endpoint
    spark_options = {f"storage.{k.lower()}": v for k, v in endpoint.object_store_options().items()}
    sink = eosink.sink("delta", path=s3_bucket.uri("table"), **spark_options)
    assert sink.options.storage_options["aws_secret_access_key"] == endpoint.secret_key
    assert run(sink, 0).status == "committed"  # object_store reads the lower-cased names
    assert len(read_rows_of(s3_bucket)) == 5


def test_secrets_stay_out_of_logs_errors_proofs_and_reprs(s3_bucket, capsys, caplog):
    secret = s3_bucket.endpoint.secret_key
    with debug_logs(capsys, caplog) as logs:
        sink = s3_sink(s3_bucket)
        assert_masked(sink, secret)
        assert run(sink, 0).status == "committed"
        assert run(sink, 0).status == "skipped"
        bad = pa.record_batch({"id": pa.array(["x"]), "name": pa.array(["y"])})
        with pytest.raises(ConfigurationError) as info:
            run(s3_sink(s3_bucket), 1, [bad])
        assert secret not in str(info.value) and secret not in repr(info.value)
        proof = sink.is_committed(
            BatchContext(sink="delta", writer_id="w", batch_id=0, kind="stream")
        )
        assert proof is not None and secret not in repr(proof)
    assert "delta" in logs.text and secret not in logs.text
    client = s3_bucket.endpoint.client()
    for key in keys(s3_bucket, "table/_delta_log/"):
        body = client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read()
        assert secret.encode() not in body
        assert s3_bucket.endpoint.access_key.encode() not in body
    history = DeltaTable(
        s3_bucket.uri("table"), storage_options=s3_bucket.endpoint.object_store_options()
    ).history()
    assert secret not in json.dumps(history, default=str)


def test_two_writers_checking_the_store_at_once_do_not_disturb_each_other(s3_bucket, monkeypatch):
    """Another writer's whole store check runs between this one's probe and its conditional
    create: each removes only its own probe, so neither mistakes the store for one that
    ignores If-None-Match."""
    uri, options = s3_bucket.uri("table"), s3_bucket.endpoint.object_store_options()
    conditional = TableStore._check_conditional_create

    def another_writer_checks_meanwhile(self, probe):
        if not getattr(self, "inner", False):
            other = TableStore(uri, options, False)
            other.inner = True
            other.check()
        return conditional(self, probe)

    monkeypatch.setattr(TableStore, "_check_conditional_create", another_writer_checks_meanwhile)
    TableStore(uri, options, False).check()
    assert keys(s3_bucket) == []
