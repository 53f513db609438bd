"""Test support for sink authors: a batch without Spark, fault injection, the conformance kit.

``run_batch(sink, ctx, schema, LocalRunner(partitions))`` runs one batch through the whole
protocol in this process, each partition a list of Arrow record batches; it returns the
:class:`~eosink.BatchOutcome` the front doors see. ``run_batch`` and ``LocalRunner`` need nothing
more than eosink; the conformance kit and the kit's other modules need its ``testing`` extra.

``from eosink.testing.conformance import SinkConformance`` and subclass it with two fixtures
(``make_sink`` and ``read_rows``) to prove a sink exactly-once; see the class docstring. The
other shared pieces of a sink's tests: ``simulation`` (generated histories), ``object_store``
(bad object stores refused), ``replay`` (a Spark query crashed mid-batch and replayed),
``e2e`` (the end-to-end Spark scenarios as an abstract test class), ``killed_query`` (a Spark
query in its own process, SIGKILLed mid-batch and restarted), ``partition_values`` (values
nobody partitions by on purpose), ``secrets`` (secrets kept out of reprs and logs), ``s3`` (a
loopback S3 server, with ``s3_faults``), ``postgres`` and ``cluster``. The benchmarks':
``hook_timer`` (the time of a batch's driver hooks) and ``stream_input`` (the throughput
benchmarks' Parquet input, a sink's queries through both doors, a bare loop in Spark's tasks).
"""

from eosink.protocol import run_batch
from eosink.testing.faults import FaultPlugin, InjectedCrash, RetryableTaskError
from eosink.testing.local import LocalRunner

__all__ = ["FaultPlugin", "InjectedCrash", "LocalRunner", "RetryableTaskError", "run_batch"]
