"""eosink sink: Delta Lake tables through delta-rs, with app transactions as the batch proof."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosink-delta") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"
