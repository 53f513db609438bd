"""eosink sink: Delta Lake tables through delta-rs, with app transactions as the batch proof."""

from importlib.metadata import PackageNotFoundError, version

from eosink_delta.cleanup import CleanupReport, cleanup, vacuum
from eosink_delta.spark_file_writer import remove_stale_staging

try:
    __version__ = version("eosink-delta") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = ["CleanupReport", "cleanup", "remove_stale_staging", "vacuum"]
