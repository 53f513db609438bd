"""eosink: exactly-once sinks for PySpark.

The public API: the hook markers and specs sink authors implement (:mod:`eosink.hookspecs`),
the messages they exchange (:mod:`eosink.model`), rows grouped by partition text for sinks that
partition (:mod:`eosink.partitions`), sink discovery (:func:`sink`), and the
front doors (:func:`foreach_batch`, :func:`write_batch`, :func:`register_data_sources`).
"""

from importlib.metadata import PackageNotFoundError, version

from eosink.crash import crash_point
from eosink.errors import (
    AlreadyCommitted,
    CheckpointMismatchError,
    ConfigurationError,
    EosinkError,
    MissingWriterIdError,
    ReplayMismatchError,
    SinkError,
    UnknownSinkError,
)
from eosink.hookspecs import hookimpl, hookspec
from eosink.logs import PhaseLogger, configure_logging
from eosink.model import (
    BatchContext,
    BatchOutcome,
    Fingerprint,
    PartitionResult,
    Proof,
    Staged,
)
from eosink.options import options_from
from eosink.partitions import PartitionGroups, group_by_text, java_number_text
from eosink.protocol import WriteTask, run_batch
from eosink.registry import installed_sinks, sink, sink_from_options
from eosink.base import Sink
from eosink.spark import foreach_batch, write_batch
from eosink.spark import register as register_data_sources

try:
    __version__ = version("eosink") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "AlreadyCommitted",
    "BatchContext",
    "BatchOutcome",
    "CheckpointMismatchError",
    "ConfigurationError",
    "EosinkError",
    "Fingerprint",
    "MissingWriterIdError",
    "PartitionGroups",
    "PartitionResult",
    "PhaseLogger",
    "Proof",
    "ReplayMismatchError",
    "Sink",
    "SinkError",
    "Staged",
    "UnknownSinkError",
    "WriteTask",
    "configure_logging",
    "crash_point",
    "foreach_batch",
    "group_by_text",
    "hookimpl",
    "hookspec",
    "installed_sinks",
    "java_number_text",
    "options_from",
    "register_data_sources",
    "run_batch",
    "sink",
    "sink_from_options",
    "write_batch",
]
