"""Connecting to YT the same way from the driver and from every executor.

Sinks keep a picklable :class:`YtConnection` in their options and build a ``YtClient`` from it
where they run (clients do not pickle). The token comes from the usual YT sources: the
``token`` option, else ``YT_TOKEN``, else ``~/.yt/token`` (the client reads the last two
itself); it is never part of a ``repr`` and never logged.
"""

from __future__ import annotations

import json
import re
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
    #: Extra client configuration, merged over eosink's defaults (YT's config keys); it may
    #: hold credentials (``token``), masked in the repr.
    config: dict[str, Any] = attrs.field(factory=dict, repr=lambda c: repr(masked_config(c)))

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


#: Config keys whose values are credentials (YT's ``token``, ``oauth_client_secret``,
#: ``tvm_auth``, ...): masked wherever the config is shown.
_SECRET_KEY = re.compile(r"token|secret|passw|auth|credential|cookie|private|cert", re.I)
MASK = "***"


def masked_config(value: Any) -> Any:
    """``value`` (a client config) with the values of credential keys replaced by ``***``; a
    flag or an unset value (``enable_token: false``, ``token: null``) stays as it is."""
    if isinstance(value, dict):
        return {
            key: (
                MASK
                if _SECRET_KEY.search(str(key)) and not isinstance(item, (bool, type(None)))
                else masked_config(item)
            )
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [masked_config(item) for item in value]
    return value


def client_config_option(value: Any) -> dict[str, Any]:
    """The ``client_config`` option of a YT sink: a dict, or a JSON object from Spark options.

    The text is never quoted in an error: it may hold a token.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError as exc:
            where = f" ({exc.msg} at character {exc.pos})" if hasattr(exc, "pos") else ""
            raise ConfigurationError(
                f"option client_config is not JSON{where}; give a JSON object such as "
                '{"proxy": {"request_timeout": 20000}}'
            ) from None
    if not isinstance(value, dict):
        raise ConfigurationError(
            f"option client_config: give a dict (or a JSON object), not a {type(value).__name__}"
        )
    return value
