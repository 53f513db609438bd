"""Test support for sink authors: a local executor, fault injection, and the conformance kit.

``from eosink.testing.conformance import SinkConformance`` and subclass it with two fixtures
(``make_sink`` and ``read_rows``) to prove a sink exactly-once; see the class docstring.
"""

from eosink.testing.faults import FaultPlugin, InjectedCrash, RetryableTaskError
from eosink.testing.local import LocalRunner

__all__ = ["FaultPlugin", "InjectedCrash", "LocalRunner", "RetryableTaskError"]
