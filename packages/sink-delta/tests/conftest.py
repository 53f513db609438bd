"""Shared fixtures of the eosink-delta tests."""

# The loopback S3 server's fixtures (s3_endpoint, s3_bucket, s3_faults): one server for the
# session.
from eosink.testing.s3 import s3_bucket, s3_endpoint, s3_faults  # noqa: F401
