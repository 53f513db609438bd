"""eosink sink: Apache Iceberg tables through pyiceberg, with a batch proof that survives
snapshot expiry (kept in the table's properties, updated in the same catalog commit)."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosink-iceberg") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"
