"""Example third-party eosink sink: SQLite tables, batch proof in the same transaction."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosink-sqlite") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"
