"""Test support for sink authors: a local executor, fault injection, and the conformance kit.

``from eosink.testing.conformance import SinkConformance`` and subclass it with two fixtures
(``make_sink`` and ``read_rows``) to prove a sink exactly-once; see the class docstring. The
other shared pieces of a sink's tests: ``simulation`` (generated histories), ``object_store``
(bad object stores refused), ``replay`` (a Spark query crashed mid-batch and replayed),
``killed_query`` (a Spark query in its own process, SIGKILLed mid-batch and restarted),
``s3`` (a loopback S3 server, with ``s3_faults``), ``postgres`` and ``cluster``.
"""

from eosink.testing.faults import FaultPlugin, InjectedCrash, RetryableTaskError
from eosink.testing.local import LocalRunner

__all__ = ["FaultPlugin", "InjectedCrash", "LocalRunner", "RetryableTaskError"]
