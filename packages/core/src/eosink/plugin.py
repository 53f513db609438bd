"""What a sink author implements against: the hook contract, its messages, errors and helpers.

A pipeline author needs only :mod:`eosink` (``eosink.sink``, ``eosink.foreach_batch``...).
Everything a sink (or a plugin that wraps a sink's phases) is written against is here, in one
namespace, so that what is a promise to sink authors is told apart from the core's internals::

    from eosink.plugin import BatchContext, Proof, Sink, hookimpl

    class MySink(Sink):
        name = "my-sink"            # its entry point name in the group ``eosink.sinks``
        Options = MyOptions         # an attrs class: the sink's options

        @hookimpl
        def is_committed(self, ctx: BatchContext) -> Proof | None: ...

The contract, in one place: the hook specs of :mod:`eosink.hookspecs`, whose docstrings say
for every hook where it runs, what it returns, what it guarantees and what it must never do
(``docs/hooks.md`` is generated from them). ``examples/sink-sqlite`` is a complete sink.

What is here:

- **The contract**: :data:`hookimpl` (mark a sink's hook implementations; also
  ``@hookimpl(wrapper=True)`` for plugins that wrap a phase) and :class:`Sink` (the base class:
  attrs options, ``from_options``, a no-op ``abort``).
- **Messages**: :class:`BatchContext` (which batch, which writer, how),
  :class:`Proof` (stored with the data, returned by ``is_committed``), :class:`Staged`
  (what ``write_dataframe`` returns).
- **Errors a sink raises**: :class:`ConfigurationError` (a misconfiguration, named with its
  fix, before anything is written), :class:`SinkError` (a store failure the sink can
  describe), :class:`AlreadyCommitted` (``commit`` found this batch's proof already there),
  :class:`EosinkError` (their base).
- **Helpers sinks call**: :func:`crash_point` (mark a step inside ``commit`` for the
  conformance kit's crash tests), :func:`options_from` and :func:`masked` (typed options from
  Spark's strings; credentials hidden in a ``repr``), :func:`group_by_text`,
  :class:`PartitionGroups` and :func:`java_number_text` (rows grouped by partition text),
  :func:`stage_dataframe` with :class:`StagedFile` and :class:`StagedFiles` (stage a batch
  with Spark's own writers), :func:`get_logger` (logs under the standard ``logging`` tree),
  :mod:`clock` (``clock.now()``: the time a sink decides by, which tests control) and
  :func:`process_state` (state a sink keeps per process, which the simulation splits).
- **Operator reports** (the optional hooks of the ``eosink`` command): :class:`TargetStatus`,
  :class:`Verification`, :class:`CleanupReport`, :class:`Leftover`.

Testing a sink: :mod:`eosink.testing` (``run_batch`` with ``LocalRunner`` runs a batch
without Spark) and its conformance kit, ``eosink.testing.conformance.SinkConformance``.

Everything else in the package (the protocol runner, the registry's plugin managers, the Spark
front doors' machinery) is the core's own and may change in any release.
"""

from eosink import clock
from eosink.base import Sink
from eosink.crash import crash_point
from eosink.errors import AlreadyCommitted, ConfigurationError, EosinkError, SinkError
from eosink.hookspecs import hookimpl
from eosink.logs import get_logger
from eosink.model import BatchContext, Proof, Staged
from eosink.options import masked, options_from
from eosink.partitions import PartitionGroups, group_by_text, java_number_text
from eosink.process import process_state
from eosink.reports import CleanupReport, Leftover, TargetStatus, Verification
from eosink.spark.staging import StagedFile, StagedFiles, stage_dataframe

__all__ = [
    "AlreadyCommitted",
    "BatchContext",
    "CleanupReport",
    "ConfigurationError",
    "EosinkError",
    "Leftover",
    "PartitionGroups",
    "Proof",
    "Sink",
    "SinkError",
    "Staged",
    "StagedFile",
    "StagedFiles",
    "TargetStatus",
    "Verification",
    "clock",
    "crash_point",
    "get_logger",
    "group_by_text",
    "hookimpl",
    "java_number_text",
    "masked",
    "options_from",
    "process_state",
    "stage_dataframe",
]
