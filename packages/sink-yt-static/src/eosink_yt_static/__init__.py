"""eosink sink: YT static tables written inside one YT transaction tree per batch."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eosink-yt-static") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"
