"""What delta-rs does when the S3 store fails under a commit: the faults the delta sink must
survive, as delta-rs' own client (object_store) meets them on the loopback S3 server.

object_store retries by itself what it takes for transient: 5xx answers and dropped
connections (also a dropped PUT, which it deems not sent), 10 times by default with a random
backoff from 100 ms (at most 15 s a wait, 3 minutes in all; ~2 s for 10 retries of an
immediate 503 here). delta-rs' storage options ``max_retries``, ``retry_timeout`` and
``backoff_config.init_backoff`` / ``max_backoff`` / ``base`` set it (``max_retries=0``: no
retry). Other 4xx are not retried. delta-rs itself does not retry a commit that failed with a
store error: the write raises ``OSError`` ("Generic S3 error").
"""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import CommitProperties, Transaction

from eosink.testing.s3 import Fault, S3Bucket, S3Faults

#: The commit file of version 1, the second write's.
VERSION_1 = r"^table/_delta_log/0{19}1\.json$"
#: A short backoff, so that a test of retries takes milliseconds.
FAST_RETRIES = {"backoff_config.init_backoff": "10ms", "backoff_config.max_backoff": "50ms"}


def append(bucket: S3Bucket, version: int | None, **storage: str) -> None:
    """Append two rows to ``table``; with a ``version``, as the delta sink commits: with the
    txn (app id "w") of that batch."""
    properties = None
    if version is not None:
        properties = CommitProperties(app_transactions=[Transaction("w", version)])
    write_deltalake(
        bucket.uri("table"),
        pa.table({"x": [1, 2]}),
        mode="append",
        storage_options={**bucket.endpoint.object_store_options(), **storage},
        commit_properties=properties,
    )


def table(bucket: S3Bucket) -> DeltaTable:
    return DeltaTable(bucket.uri("table"), storage_options=bucket.endpoint.object_store_options())


@pytest.mark.parametrize("status", [None, 500], ids=["dropped", "answered-500"])
def test_a_lost_reply_to_a_commit_is_a_conflict_with_itself(
    s3_bucket: S3Bucket, s3_faults: S3Faults, status: int | None
) -> None:
    """The commit file of version 1 lands, its reply is lost (the connection dropped, or a 500).
    object_store sends the conditional PUT again by itself; the store refuses it (412: the
    first one landed), which delta-rs reads as another writer having taken version 1. It reads
    that commit, finds in it a txn of the same app id, and gives up with ``CommitFailedError``
    ("Concurrent transaction failed"), with no attempt at version 2. The table holds the commit
    (version 1, txn 1, the rows once): the sink must read this error as "maybe committed" and
    look at the txn, as it does after losing a race.
    """
    append(s3_bucket, 0)
    s3_faults.plan([Fault("lost_reply", key=VERSION_1, status=status)])
    with pytest.raises(CommitFailedError, match="Concurrent transaction"):
        append(s3_bucket, 1)
    [count] = s3_faults.counts()
    assert (count.seen, count.fired) == (2, 1)  # the lost PUT and object_store's own retry
    assert [f.landed for f in s3_faults.fired()] == [200]
    after = table(s3_bucket)
    assert (after.version(), after.transaction_version("w")) == (1, 1)
    assert after.to_pyarrow_table().num_rows == 4


def test_without_a_txn_delta_rs_commits_a_lost_commit_again(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """Without a txn nothing tells delta-rs that version 1 is its own: a blind append does not
    conflict with it, so delta-rs commits the same actions again as version 2 and the write
    succeeds. The rows are not doubled (the second commit adds the same files, which a
    snapshot counts once), but the history has the batch twice."""
    append(s3_bucket, None)
    s3_faults.plan([Fault("lost_reply", key=VERSION_1)])
    append(s3_bucket, None)
    after = table(s3_bucket)
    assert after.version() == 2
    assert after.to_pyarrow_table().num_rows == 4
    assert len(after.history()) == 3


def test_without_retries_a_lost_reply_fails_a_commit_that_landed(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """With ``max_retries=0`` the lost reply reaches delta-rs as a store error: the write raises
    ``OSError`` ("connection closed before message completed"), although version 1 is in the
    table with its txn."""
    append(s3_bucket, 0)
    s3_faults.plan([Fault("lost_reply", key=VERSION_1)])
    with pytest.raises(OSError, match="connection closed"):
        append(s3_bucket, 1, max_retries="0")
    after = table(s3_bucket)
    assert (after.version(), after.transaction_version("w")) == (1, 1)


def test_store_errors_are_retried_and_the_retries_can_be_cut_short(
    s3_bucket: S3Bucket, s3_faults: S3Faults
) -> None:
    """One 503 on the commit file: object_store retries and the commit goes through. A store
    that keeps answering 503: with ``max_retries=2`` the write raises ``OSError`` after three
    attempts, in milliseconds, and nothing is committed."""
    append(s3_bucket, 0)
    s3_faults.plan([Fault("error", key=VERSION_1)])
    append(s3_bucket, 1, **FAST_RETRIES)
    assert s3_faults.counts()[0].seen == 2
    assert table(s3_bucket).version() == 1

    s3_faults.plan([Fault("error", key=r"^table/_delta_log/0{19}2\.json$", times=100)])
    started = time.monotonic()
    with pytest.raises(OSError, match="503"):
        append(s3_bucket, 2, max_retries="2", **FAST_RETRIES)
    assert time.monotonic() - started < 5
    assert s3_faults.counts()[0].seen == 3
    after = table(s3_bucket)
    assert (after.version(), after.transaction_version("w")) == (1, 1)


def test_a_commit_cut_short_is_sent_again_whole(s3_bucket: S3Bucket, s3_faults: S3Faults) -> None:
    """The commit file's body is cut short and the connection dropped: nothing landed, and
    object_store sends it again, so the commit goes through. Answered with 400 IncompleteBody
    instead, it is not retried: the write raises ``OSError`` and nothing is committed."""
    append(s3_bucket, 0)
    s3_faults.plan([Fault("short_write", key=VERSION_1)])
    append(s3_bucket, 1)
    assert s3_faults.counts()[0].seen == 2
    assert table(s3_bucket).version() == 1

    s3_faults.plan([Fault("short_write", key=r"^table/_delta_log/0{19}2\.json$", status=400)])
    with pytest.raises(OSError, match="IncompleteBody"):
        append(s3_bucket, 2)
    assert table(s3_bucket).version() == 1
