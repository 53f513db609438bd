"""Connecting to YT the same way from the driver and from every executor.

Sinks keep a picklable :class:`YtConnection` in their options and build a ``YtClient`` from it
where they run (clients do not pickle). The token comes from the usual YT sources: the
``token`` option, else ``YT_TOKEN``, else ``~/.yt/token`` (the client reads the last two
itself); it is never part of a ``repr`` and never logged.
"""

from __future__ import annotations

from typing import Any

import attrs

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
