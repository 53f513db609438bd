"""Code the eosink YT sinks share: client options and configuration, Spark to YT schema mapping,
retries."""

from importlib.metadata import PackageNotFoundError, version

from eosink_yt_common.client import YtConnection, client_config_option
from eosink_yt_common.options import YtClientOptions
from eosink_yt_common.retry import client_retry_config, is_retriable, retry_unit
from eosink_yt_common.schema import key_columns, yt_rows, yt_schema, yt_type

try:
    __version__ = version("eosink-yt-common") or "0+unknown"
except PackageNotFoundError:  # not installed: running from the source tree
    __version__ = "0+unknown"

__all__ = [
    "YtClientOptions",
    "YtConnection",
    "client_config_option",
    "client_retry_config",
    "is_retriable",
    "key_columns",
    "retry_unit",
    "yt_rows",
    "yt_schema",
    "yt_type",
]
