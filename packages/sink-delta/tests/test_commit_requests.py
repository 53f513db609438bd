"""What a batch asks of S3, counted by the loopback server: bounded, and the same on a table
with a long history as on a new one.

A stream commits once per batch for months, so the driver's per-batch work must not grow with
the table's files or its log. On an object store that shows in requests, which do not depend on
the machine's load: after the first batch (which opens the table), ``is_committed`` + ``commit``
of a one-file batch ask for at most 5 things (a HEAD of the view's commit, a GET of the next,
a HEAD of the batch's file, a HEAD of the view's commit again right before the commit: log
cleanup may have freed version numbers below a new checkpoint while the batch ran; the
conditional PUT of the commit), and never list ``_delta_log``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Generator
from typing import Any

import pytest
from delta_helpers import rows, run
from delta_history import synthesize
from eosink_delta.sink import DeltaSink

from eosink.plugin import hookimpl
from eosink.testing.s3 import Fault, S3Bucket, S3Faults

#: Never fires (a ``delay`` of nothing from the billionth request on): it only counts.
NEVER = 10**9
METHODS = ("GET", "HEAD", "PUT", "POST", "DELETE")


def counting_plan() -> list[Fault]:
    """One counter per method on the table's objects, and one of listings (bucket GETs)."""
    faults = [Fault("delay", key=r"^table/", methods=(m,), nth=NEVER) for m in METHODS]
    return [*faults, Fault("delay", key=r"^$", methods=("GET",), nth=NEVER)]


NAMES = [*METHODS, "LIST"]


class RequestCounter:
    """The requests each driver hook of a batch sends, by method (``LIST``: a listing)."""

    def __init__(self, faults: S3Faults) -> None:
        self.faults = faults
        self.hooks: dict[str, Counter] = {}

    def _now(self) -> Counter:
        return Counter(dict(zip(NAMES, (c.seen for c in self.faults.counts()))))

    def _counted(self, hook: str) -> Generator[None, Any, Any]:
        before = self._now()
        try:
            return (yield)
        finally:
            self.hooks[hook] = self._now() - before

    @hookimpl(wrapper=True)
    def is_committed(self) -> Generator[None, Any, Any]:
        return (yield from self._counted("is_committed"))

    @hookimpl(wrapper=True)
    def commit(self) -> Generator[None, Any, Any]:
        return (yield from self._counted("commit"))


def upload(folder: str, bucket: S3Bucket, prefix: str) -> None:
    client = bucket.endpoint.client()
    for root, _dirs, names in os.walk(folder):
        for name in names:
            local = os.path.join(root, name)
            key = f"{prefix}/{os.path.relpath(local, folder)}"
            with open(local, "rb") as f:
                client.put_object(Bucket=bucket.name, Key=key, Body=f.read())


def batch_requests(bucket: S3Bucket, faults: S3Faults, first: int, batches: int) -> list[Counter]:
    """Requests of is_committed + commit of each batch after the first (which opens)."""
    sink = DeltaSink(
        path=bucket.uri("table"), storage_options=bucket.endpoint.object_store_options()
    )
    assert run(sink, first, [rows(first, 2)]).status == "committed"
    faults.plan(counting_plan())
    out = []
    for batch in range(first + 1, first + 1 + batches):
        counter = RequestCounter(faults)
        assert run(sink, batch, [rows(batch, 2)], plugins=(counter,)).status == "committed"
        out.append(counter.hooks["is_committed"] + counter.hooks["commit"])
    return out


@pytest.fixture
def long_history(s3_bucket: S3Bucket, tmp_path) -> int:
    """A table of 150 commits (a checkpoint at 99, then 50 commits), the writer at batch 149."""
    folder = str(tmp_path / "history")
    synthesize(folder, commits=150)
    upload(folder, s3_bucket, "table")
    return 150


def test_a_batch_asks_s3_for_at_most_five_things_and_never_lists(s3_bucket, s3_faults):
    for requests in batch_requests(s3_bucket, s3_faults, 0, 4):
        assert sum(requests.values()) <= 5, requests
        assert requests["LIST"] == 0, requests


def test_a_long_history_costs_a_batch_no_more_requests(s3_bucket, s3_faults, long_history):
    """The same batch on a table with 150 commits and 150 files as on a new table: the txn
    check reads no commit it read before, and nothing lists the log."""
    long = batch_requests(s3_bucket, s3_faults, long_history, 4)
    for requests in long:
        assert sum(requests.values()) <= 5, requests
        assert requests["LIST"] == 0, requests
    new_bucket = S3Bucket(s3_bucket.endpoint, s3_bucket.endpoint.create_bucket())
    assert long == batch_requests(new_bucket, s3_faults, 0, 4)
