"""The files sink on S3 (s3fs against the loopback S3 server): the conformance kit, racing
drivers, a store without conditional create, bad stores, and secrets kept out of sight."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from eosink_files import committed_files, read_log, read_table
from eosink_files.log import LOG_DIR
from eosink_files.sink import FilesSink
from eosink_files.fsspec_store import FsspecStore
from files_helpers import commit_elsewhere, run, run_elsewhere

import eosink
from eosink import ConfigurationError
from eosink.testing.conformance import SinkConformance
from eosink.testing.object_store import FsspecStorage, ObjectStoreRefusals
from eosink.testing.s3 import Fault, S3Bucket
from eosink.testing.secrets import assert_masked, debug_logs


def s3_sink(bucket: S3Bucket, **options) -> FilesSink:
    return FilesSink(
        path=bucket.uri("out"), storage_options=bucket.endpoint.fsspec_options(), **options
    )


def published(bucket: S3Bucket) -> list[str]:
    """Every log file under the sink folder's log (what a reader could see as committed); the
    marker that makes the log folder exist before the first commit is not one."""
    listing = bucket.endpoint.client().list_objects_v2(Bucket=bucket.name, Prefix=f"out/{LOG_DIR}")
    keys = [o["Key"] for o in listing.get("Contents", [])]
    return [k for k in keys if k.rsplit("/", 1)[-1][:1].isdigit()]


class TestS3Conformance(SinkConformance):
    @pytest.fixture
    def make_sink(self, s3_bucket):
        return lambda: s3_sink(s3_bucket, compact_interval=3)

    @pytest.fixture
    def read_rows(self, s3_bucket):
        def read():
            if not published(s3_bucket):
                return []
            return read_table(
                s3_bucket.uri("out"),
                compact_interval=3,
                storage_options=s3_bucket.endpoint.fsspec_options(),
            ).to_pylist()

        return read


class TestS3Refusals(FsspecStorage, ObjectStoreRefusals):
    """Bad stores refused before any data is written (the kit's tests, on s3fs)."""

    def make_sink(self, uri, storage_options, **options):
        return FilesSink(path=uri, storage_options=storage_options, **options)

    def committed_keys(self, bucket):
        return published(bucket)


def test_manifest_lists_s3a_uris(s3_bucket):
    assert run(s3_sink(s3_bucket), 0).status == "committed"
    opts = s3_bucket.endpoint.fsspec_options()
    uris = [f.uri for f in committed_files(s3_bucket.uri("out"), storage_options=opts)]
    assert uris and all(u.startswith(f"s3a://{s3_bucket.name}/out/part-") for u in uris)


def test_racing_drivers_publish_a_batch_once(s3_bucket, monkeypatch):
    """Another driver publishes the same batch between this one's log read and its publish:
    S3's conditional create refuses this one's log file, which then skips the batch."""
    out, opts = s3_bucket.uri("out"), s3_bucket.endpoint.fsspec_options()
    assert run(s3_sink(s3_bucket), 0).status == "committed"
    publish, raced = FsspecStore.publish, []

    def racing(self, relpath, data, crash=None, overwrite=False):
        if relpath.startswith(f"{LOG_DIR}/") and not raced:
            raced.append(relpath)
            assert commit_elsewhere(out, "w", 1, storage_options=opts) == "committed"
        return publish(self, relpath, data, crash, overwrite)

    monkeypatch.setattr(FsspecStore, "publish", racing)
    assert run(s3_sink(s3_bucket), 1).status == "skipped"
    assert raced == [f"{LOG_DIR}/1"]
    assert published(s3_bucket) == [f"out/{LOG_DIR}/0", f"out/{LOG_DIR}/1"]
    ids = read_table(out, storage_options=opts).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 16  # two batches of 2 x 4 rows, none twice
    parts = s3_bucket.endpoint.client().list_objects_v2(Bucket=s3_bucket.name, Prefix="out/part-")
    assert len(parts["Contents"]) == 4  # the loser's files were removed by its abort


def test_secrets_stay_out_of_logs_errors_manifests_and_reprs(s3_bucket, caplog, capsys):
    secret = s3_bucket.endpoint.secret_key
    with debug_logs(capsys, caplog) as logs:
        sink = s3_sink(s3_bucket)
        assert_masked(sink, secret)
        from_spark = eosink.sink(
            "files",
            path=s3_bucket.uri("out"),
            **{"storage.secret": secret, "storage.key": s3_bucket.endpoint.access_key},
        )
        assert from_spark.options.storage_options["secret"] == secret
        assert secret not in repr(from_spark)
        assert run(sink, 0).status == "committed"
        bad = FilesSink(
            path=s3_bucket.uri("out"),
            storage_options=s3_bucket.endpoint.fsspec_options(),
            format="json",
        )
        with pytest.raises(ConfigurationError) as info:
            run(bad, 1)
        assert secret not in str(info.value) and secret not in repr(info.value)
    assert "files" in logs.text  # the batch was logged
    assert secret not in logs.text
    client = s3_bucket.endpoint.client()
    for key in published(s3_bucket):
        body = client.get_object(Bucket=s3_bucket.name, Key=key)["Body"].read().decode()
        assert secret not in body and s3_bucket.endpoint.access_key not in body
    state = read_log(s3_bucket.uri("out"), storage_options=s3_bucket.endpoint.fsspec_options())
    assert secret not in repr(state.proofs)


def commit_elsewhere_many(bucket: S3Bucket, batch_ids: range) -> list[str]:
    """Commit these batches from another Python process (a commit worker of Spark's driver)."""
    options = bucket.endpoint.fsspec_options()
    sink = f"FilesSink(path={bucket.uri('out')!r}, storage_options={options!r}, compact_interval=3)"
    return run_elsewhere(
        "from files_helpers import run; from eosink_files.sink import FilesSink; "
        f"print(' '.join(run({sink}, b).status for b in {list(batch_ids)!r}))"
    ).split()


def test_a_reused_process_sees_log_files_another_process_published(s3_bucket):
    """Spark reuses its Python workers: a process that listed the log folder before (a planning
    worker: it decides, another process commits) must decide from the store, not from fsspec's
    listings cache, after other processes committed.

    fsspec keeps one s3fs instance per process and s3fs caches listings without expiry (only
    this process's own writes invalidate them): a cached listing of ``_spark_metadata`` made a
    newer log file read as missing ("_spark_metadata/2 disappeared while being read").
    """
    out, opts = s3_bucket.uri("out"), s3_bucket.endpoint.fsspec_options()
    assert commit_elsewhere_many(s3_bucket, range(0, 1)) == ["committed"]
    assert run(s3_sink(s3_bucket, compact_interval=3), 0).status == "skipped"  # lists the log
    # more batches than compact_interval: a compact (2) and deltas after it
    assert commit_elsewhere_many(s3_bucket, range(1, 5)) == ["committed"] * 4
    assert run(s3_sink(s3_bucket, compact_interval=3), 4).status == "skipped"
    assert run(s3_sink(s3_bucket, compact_interval=3), 5).status == "committed"
    ids = read_table(out, compact_interval=3, storage_options=opts).column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 6 * 8


def test_the_commit_check_costs_the_batch_not_the_table(s3_bucket, s3_faults):
    """Before publishing, the driver checks that every file of the batch is there with its
    size. Listing the table's folder for that costs a request per 1,000 files the table holds
    (O(table) per batch: a stream runs for months); one HEAD per file of the batch does not.

    The server counts requests (a plan of faults that never fire): bucket-level GETs are
    listings, HEADs on part files the per-file checks.
    """
    never = 10**9
    s3_faults.plan(
        [
            Fault("delay", key=r"^$", methods=("GET",), nth=never),
            Fault("delay", key=r"^out/part-", methods=("HEAD",), nth=never),
        ]
    )

    def requests_of_batch(batch_id: int) -> tuple[int, int]:
        before = [c.seen for c in s3_faults.counts()]
        assert run(s3_sink(s3_bucket), batch_id).status == "committed"
        listings, heads = (c.seen - b for c, b in zip(s3_faults.counts(), before))
        return listings, heads

    assert run(s3_sink(s3_bucket), 0).status == "committed"
    small_table = requests_of_batch(1)
    client = s3_bucket.endpoint.client()
    with ThreadPoolExecutor(8) as pool:  # the table grows: files of past batches
        list(
            pool.map(
                lambda n: client.put_object(
                    Bucket=s3_bucket.name, Key=f"out/part-old-{n:05d}.parquet", Body=b"old"
                ),
                range(2100),
            )
        )
    big_table = requests_of_batch(2)
    assert big_table == small_table, (small_table, big_table)
    listings, _ = big_table
    assert listings == 0  # the batch's files are checked one by one, never by a listing


def test_the_access_probe_runs_once_per_process_and_never_in_is_committed(s3_bucket, monkeypatch):
    """The data-source front door builds a new sink for every batch: the probe object is
    written once per process, in init, never in is_committed (which must not write)."""
    from eosink.plugin import BatchContext
    from eosink.process import forget_process, simulated_process
    from eosink.registry import plugin_manager

    probes, check_access = [], FsspecStore.check_access

    def counted(self, conditional):
        if not self.access_checked:
            probes.append(self.location)
        return check_access(self, conditional)

    monkeypatch.setattr(FsspecStore, "check_access", counted)
    try:
        with simulated_process("fresh"):
            ctx = BatchContext("files", "w", 0, query_id="q1")
            assert plugin_manager(s3_sink(s3_bucket)).hook.is_committed(ctx=ctx) is None
            assert probes == []
            for b in range(3):
                assert run(s3_sink(s3_bucket), b).status == "committed"
            assert len(probes) == 1
    finally:
        forget_process()
