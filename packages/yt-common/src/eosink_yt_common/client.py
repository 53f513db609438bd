"""Connecting to YT the same way from the driver and from every executor.

Sinks keep a picklable :class:`YtConnection` in their options and build a ``YtClient`` from it
where they run (clients do not pickle). The token comes from the usual YT sources: the
``token`` option, else ``YT_TOKEN``, else ``~/.yt/token`` (the client reads the last two
itself); it is never part of a ``repr`` and never logged.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from eosink.plugin import ConfigurationError

from eosink_yt_common.retry import client_retry_config


@attrs.frozen
class YtConnection:
    """Where the cluster is and how to talk to it."""

    proxy: str
    token: str | None = attrs.field(default=None, repr=False)
    #: Proxy discovery (``GET /hosts``) balances heavy requests across proxies on real
    #: clusters; emulators and single-proxy setups turn it off.
    proxy_discovery: bool = True
    #: Extra client configuration, merged over eosink's defaults (YT's config keys).
    config: dict[str, Any] = attrs.field(factory=dict)

    def client(self) -> Any:
        """A new ``yt.wrapper.YtClient`` (not thread-safe: one per thread or task)."""
        from yt.wrapper import YtClient
        from yt.wrapper.common import update

        config = update(
            client_retry_config(),
            {
                "proxy": {"enable_proxy_discovery": self.proxy_discovery},
                "apply_remote_patch_at_start": None,
            },
        )
        config = update(config, dict(self.config))
        return YtClient(proxy=self.proxy, token=self.token, config=config)


def client_config_option(value: Any) -> dict[str, Any]:
    """The ``client_config`` option of a YT sink: a dict, or a JSON object from Spark options."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            raise ConfigurationError(
                f"option client_config: {value[:80]!r} is not JSON; give a JSON object such as "
                '{"proxy": {"request_timeout": 20000}}'
            ) from None
    if not isinstance(value, dict):
        raise ConfigurationError("option client_config: give a dict (or a JSON object)")
    return value
