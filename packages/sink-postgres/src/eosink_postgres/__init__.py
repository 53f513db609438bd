"""eosink sink: PostgreSQL tables, staged binary COPY, the batch's rows and proof in one
transaction."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosink-postgres") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = ["__version__"]
