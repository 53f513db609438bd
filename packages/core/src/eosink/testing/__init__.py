"""Test support for sink authors: a batch without Spark, fault injection, the conformance kit.

``run_batch(sink, ctx, schema, LocalRunner(partitions))`` runs one batch through the whole
protocol in this process, each partition a list of Arrow record batches; it returns the
:class:`~eosink.BatchOutcome` the front doors see. ``from eosink.testing.conformance import
SinkConformance`` and subclass it with two fixtures (``make_sink`` and ``read_rows``) to prove a
sink exactly-once; see the class docstring. ``run_batch`` and ``LocalRunner`` need nothing
more than eosink; the conformance kit and the kit's other modules need its ``testing`` extra.
"""

from eosink.protocol import run_batch
from eosink.testing.faults import FaultPlugin, InjectedCrash, RetryableTaskError
from eosink.testing.local import LocalRunner

__all__ = ["FaultPlugin", "InjectedCrash", "LocalRunner", "RetryableTaskError", "run_batch"]
