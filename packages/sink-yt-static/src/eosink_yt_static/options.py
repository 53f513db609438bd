"""The options of the ``yt-static`` sink.

The connection options (``proxy``, ``token``, ``proxy_discovery``, ``client_config``) are the
ones every YT sink shares, from :class:`eosink_yt_common.YtClientOptions`.
"""

from __future__ import annotations

from typing import Any

import attrs

from eosink.plugin import ConfigurationError
from eosink_yt_common import YtClientOptions, YtConnection

CLEANUPS = ("disabled", "truncate", "drop")


def _cleanup(value: str) -> str:
    lowered = str(value).strip().lower()
    if lowered == "append":
        lowered = "disabled"
    if lowered not in CLEANUPS:
        raise ConfigurationError(
            f"option cleanup={value!r}: use 'disabled' (append to the table), 'truncate' "
            "(replace the rows, keep the table and its schema) or 'drop' (replace the table)"
        )
    return lowered


@attrs.frozen(kw_only=True)
class YtStaticOptions(YtClientOptions):
    """Options of the ``yt-static`` sink (Spark options are case and spelling insensitive)."""

    #: The target static table, e.g. ``//home/project/orders``.
    path: str
    #: What a batch does with the table's rows: disabled (append), truncate, drop.
    cleanup: str = attrs.field(default="disabled", converter=_cleanup)
    #: Key columns (sorted ascending) of a table the sink creates; an existing table's own
    #: key columns always win.
    key_columns: tuple[str, ...] = ()
    #: Cypress directory of the state store (one document per target table and writer id
    #: holding its open MainTx); default ``<path>_eosink_state``.
    state_path: str | None = None
    #: Lifetime of MainTx without a ping. The driver pings it (and every transaction nested
    #: in it) for the whole batch; the timeout only matters once the driver is gone.
    main_tx_timeout_s: float = 600.0
    #: Lifetime of a PartTx without a ping (pinged by its task while it writes, and by the
    #: driver until the commit).
    part_tx_timeout_s: float = 600.0
    #: Lifetime of the Init and Commit sub transactions without a ping.
    sub_tx_timeout_s: float = 120.0
    #: How long a commit waits for the table's locks while another writer commits into it.
    lock_wait_timeout_s: float = 900.0
    #: The longest a batch is kept alive from outside the process that runs it: through the
    #: data-source door, from ``init`` in Spark's planning worker until ``commit``. A batch
    #: running longer fails (MainTx expires ``main_tx_timeout_s`` later) and is retried; it
    #: also bounds how long a dead query's MainTx can be kept alive.
    keepalive_max_s: float = 6 * 3600.0
    #: Combine the batch's chunks when it is appended (one merge of the batch's rows).
    combine_chunks: bool = True
    #: Rows per ``write_table`` request of a PartTx.
    rows_per_request: int = 100_000

    def __attrs_post_init__(self) -> None:
        if not self.path.startswith("//"):
            raise ConfigurationError(
                f"option path={self.path!r}: give an absolute Cypress path, e.g. //home/me/table"
            )
        for name in (
            "main_tx_timeout_s",
            "part_tx_timeout_s",
            "sub_tx_timeout_s",
            "lock_wait_timeout_s",
            "keepalive_max_s",
        ):
            if getattr(self, name) <= 0:
                raise ConfigurationError(f"option {name}: give a positive number of seconds")
        if self.rows_per_request <= 0:
            raise ConfigurationError("option rows_per_request: give a positive number of rows")

    @property
    def state_dir(self) -> str:
        return self.state_path or f"{self.path}_eosink_state"

    @property
    def ping_period_s(self) -> float:
        """How often the batch's transactions are pinged: well inside the shortest timeout."""
        return min(self.main_tx_timeout_s, self.part_tx_timeout_s, self.sub_tx_timeout_s) / 3

    def connection(self, **defaults: Any) -> YtConnection:
        # A failed background ping must not interrupt a Spark worker's main thread; the
        # transaction's own next request reports it.
        return super().connection(ping_failed_mode="pass", **defaults)
