"""Abstract pytest tests of a sink on an object store: bad stores are refused before any data
is written, and no error names a secret.

A sink on S3 (or a store speaking its API) wins or loses exactly-once on the store's conditional
create and on being told early that it cannot write at all. Every such sink owes its users the
same refusals; subclass :class:`ObjectStoreRefusals` in the sink's tests, with one of the
storage-option mixins (:class:`FsspecStorage` for s3fs, :class:`ObjectStoreStorage` for the
``object_store`` crate under delta-rs) or your own, and the sink's factory::

    class TestS3Refusals(FsspecStorage, ObjectStoreRefusals):
        def make_sink(self, uri, storage_options, **options):
            return MySink(path=uri, storage_options=storage_options, **options)

The tests run on the loopback S3 server of :mod:`eosink.testing.s3` (its ``s3_endpoint``
fixture must be visible: ``pytest_plugins = ["eosink.testing.s3"]`` in the conftest). Override
:meth:`ObjectStoreRefusals.committed_keys` when the sink writes objects a reader does not take
for committed data (markers, probes), and the ``*_match`` patterns when its messages differ.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

from eosink.errors import ConfigurationError
from eosink.model import BatchContext, BatchOutcome
from eosink.protocol import run_batch
from eosink.testing.local import LocalRunner
from eosink.testing.s3 import S3Bucket, S3Endpoint, s3_server


class FsspecStorage:
    """Storage options of s3fs (``fsspec.filesystem("s3", ...)``)."""

    def storage_options(self, endpoint: S3Endpoint) -> dict[str, Any]:
        return endpoint.fsspec_options()

    def with_keys(
        self, options: dict[str, Any], *, access_key: str | None = None, secret: str | None = None
    ) -> dict[str, Any]:
        changed = dict(options)
        if access_key is not None:
            changed["key"] = access_key
        if secret is not None:
            changed["secret"] = secret
        return changed

    def with_endpoint_url(self, options: dict[str, Any], url: str) -> dict[str, Any]:
        # one attempt: botocore would retry the refused connection for a while. (s3fs hands
        # keys it does not know, such as a bare ``retries``, to aiobotocore's session, which
        # fails with a TypeError: a refusal of that said nothing of the endpoint.)
        return {
            **options,
            "client_kwargs": {"endpoint_url": url},
            "config_kwargs": {"retries": {"max_attempts": 1}},
        }


class ObjectStoreStorage:
    """Storage options of the ``object_store`` crate (delta-rs' ``storage_options``)."""

    def storage_options(self, endpoint: S3Endpoint) -> dict[str, Any]:
        return endpoint.object_store_options()

    def with_keys(
        self, options: dict[str, Any], *, access_key: str | None = None, secret: str | None = None
    ) -> dict[str, Any]:
        changed = dict(options)
        if access_key is not None:
            changed["AWS_ACCESS_KEY_ID"] = access_key
        if secret is not None:
            changed["AWS_SECRET_ACCESS_KEY"] = secret
        return changed

    def with_endpoint_url(self, options: dict[str, Any], url: str) -> dict[str, Any]:
        return {**options, "AWS_ENDPOINT_URL": url}


class ObjectStoreRefusals:
    """The refusals every sink on an object store makes, as pytest tests to inherit."""

    #: The sink's folder (its table, its output) under the bucket.
    folder = "out"
    #: What each refusal's error says (regular expressions, searched in the message).
    conditional_create_match = "conditional create.*single_writer"
    credentials_match = "refused.*credentials"
    no_write_match = "refused to let these credentials write"
    missing_bucket_match = "bucket.*does not exist"
    unreachable_match = "could not reach"
    #: What every refusal adds: the user must know their data is safe.
    nothing_written = "Nothing was written"

    # -- what a subclass provides --------------------------------------------------------------
    def make_sink(self, uri: str, storage_options: dict[str, Any], **options: Any) -> Any:
        """The sink writing into ``uri`` with these storage options (and sink options)."""
        raise NotImplementedError

    def storage_options(self, endpoint: S3Endpoint) -> dict[str, Any]:
        """The sink's storage options for ``endpoint`` (see the mixins)."""
        raise NotImplementedError

    def with_keys(
        self, options: dict[str, Any], *, access_key: str | None = None, secret: str | None = None
    ) -> dict[str, Any]:
        """``options`` with another access key or secret."""
        raise NotImplementedError

    def with_endpoint_url(self, options: dict[str, Any], url: str) -> dict[str, Any]:
        """``options`` pointing at another endpoint."""
        raise NotImplementedError

    def committed_keys(self, bucket: S3Bucket) -> list[str]:
        """The keys a reader could take for committed data; every key by default."""
        listing = bucket.endpoint.client().list_objects_v2(Bucket=bucket.name)
        return [o["Key"] for o in listing.get("Contents", [])]

    def run(self, sink: Any, batch_id: int) -> BatchOutcome:
        """One streaming batch of two partitions of a few rows through the real protocol."""
        parts = [
            [pa.record_batch({"id": [batch_id * 10 + p], "name": [f"r{batch_id}-{p}"]})]
            for p in range(2)
        ]
        ctx = BatchContext(
            sink=sink.name,
            writer_id="w",
            batch_id=batch_id,
            kind="stream",
            query_id="q1",
            checkpoint="/checkpoints/q1",
        )
        return run_batch(sink, ctx, parts[0][0].schema, LocalRunner(parts))

    # -- fixtures ------------------------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def auth_endpoint(cls) -> Iterator[S3Endpoint]:
        """A server that checks credentials and IAM policies."""
        with s3_server(auth=True) as endpoint:
            yield endpoint

    # -- the tests -----------------------------------------------------------------------------
    def sink_on(self, endpoint: S3Endpoint, bucket: str, options: dict[str, Any] | None = None):
        options = self.storage_options(endpoint) if options is None else options
        return self.make_sink(f"s3://{bucket}/{self.folder}", options)

    def refused_at_init(
        self, endpoint: S3Endpoint, bucket: str, match: str, options: dict[str, Any] | None = None
    ) -> str:
        with pytest.raises(ConfigurationError, match=match) as info:
            self.run(self.sink_on(endpoint, bucket, options), 0)
        text = str(info.value)
        assert endpoint.secret_key not in text
        assert self.nothing_written in text
        return text

    def test_store_without_conditional_create_is_refused(self):
        with s3_server(conditional_create=False) as endpoint:
            bucket = S3Bucket(endpoint, endpoint.create_bucket())
            with pytest.raises(ConfigurationError, match=self.conditional_create_match):
                self.run(self.sink_on(endpoint, bucket.name), 0)
            assert self.committed_keys(bucket) == []
            uri, options = bucket.uri(self.folder), self.storage_options(endpoint)
            single = self.make_sink(uri, options, single_writer=True)
            assert self.run(single, 0).status == "committed"

    def test_wrong_credentials_are_refused_at_init(self, auth_endpoint):
        bucket = auth_endpoint.create_bucket()
        options = self.storage_options(auth_endpoint)
        wrong = self.with_keys(options, secret="wrong-secret-value")
        text = self.refused_at_init(auth_endpoint, bucket, self.credentials_match, wrong)
        assert "wrong-secret-value" not in text
        unknown = self.with_keys(options, access_key="AKIANOBODY")
        self.refused_at_init(auth_endpoint, bucket, self.credentials_match, unknown)
        assert auth_endpoint.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0

    def test_bucket_without_write_permission_is_refused_at_init(self, auth_endpoint):
        bucket = auth_endpoint.create_bucket()
        reader = auth_endpoint.user("eosink-reader", ("s3:GetObject", "s3:ListBucket"))
        self.refused_at_init(reader, bucket, self.no_write_match)
        assert auth_endpoint.client().list_objects_v2(Bucket=bucket).get("KeyCount") == 0

    def test_missing_bucket_is_refused_at_init(self, s3_endpoint):
        self.refused_at_init(s3_endpoint, "eosink-no-such-bucket", self.missing_bucket_match)

    def test_endpoint_that_refuses_connections_is_refused_at_init(self, s3_endpoint):
        with socket.socket() as s:  # a port nothing listens on
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        options = self.with_endpoint_url(
            self.storage_options(s3_endpoint), f"http://127.0.0.1:{port}"
        )
        self.refused_at_init(s3_endpoint, "any-bucket", self.unreachable_match, options)
