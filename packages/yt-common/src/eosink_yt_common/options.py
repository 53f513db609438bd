"""The options every YT sink has: where the cluster is and how the client talks to it.

Both YT sinks derive their options class from :class:`YtClientOptions`, so ``proxy``,
``token``, ``proxy_discovery`` and ``client_config`` are spelled, parsed and documented once
and reach every process (driver and executors) the same way.
"""

from __future__ import annotations

from typing import Any

import attrs

from eosink_yt_common.client import YtConnection, client_config_option, masked_config


@attrs.frozen(kw_only=True)
class YtClientOptions:
    """Base class of a YT sink's options (Spark options are case and spelling insensitive)."""

    #: YT HTTP proxy, e.g. ``hahn`` or ``http://localhost:8000``.
    proxy: str
    #: Token; by default the client reads ``YT_TOKEN`` or ``~/.yt/token``. Never logged.
    token: str | None = attrs.field(default=None, repr=False)
    #: Proxy discovery; turn off for single-proxy setups and emulators.
    proxy_discovery: bool = True
    #: Extra YT client configuration (YT's config keys), a dict or its JSON text, merged over
    #: eosink's defaults, e.g. ``{"proxy": {"request_timeout": 60000}}``.
    #: Credentials in it (YT's ``token`` key) are masked in the repr.
    client_config: dict[str, Any] = attrs.field(
        factory=dict, converter=client_config_option, repr=lambda c: repr(masked_config(c))
    )

    def connection(self, **defaults: Any) -> YtConnection:
        """The picklable connection these options describe; ``defaults`` are client config
        keys the sink needs, under the user's ``client_config``."""
        return YtConnection(
            proxy=self.proxy,
            token=self.token,
            proxy_discovery=self.proxy_discovery,
            config={**defaults, **self.client_config},
        )
