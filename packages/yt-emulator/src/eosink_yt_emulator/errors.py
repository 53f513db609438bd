"""YT errors as the HTTP proxy reports them.

Error codes follow the codes the client itself tests for (``yt/common.py`` of
``ytsaurus-client``: ``is_resolve_error`` = 500, ``is_already_exists`` = 501,
``is_concurrent_transaction_lock_conflict`` = 402, ``is_tablet_transaction_lock_conflict``
= 1700, ``is_no_such_transaction`` = 11000, ``is_tablet_not_mounted`` = 1702,
``is_sorting_order_violated`` = 301, ``is_no_such_operation`` = 1915) and the error
model of https://ytsaurus.tech/docs/en/user-guide/proxy/http-reference
(``X-YT-Error``, ``X-YT-Response-Code``, ``X-YT-Response-Message``).
"""

from __future__ import annotations

import datetime
import os
import socket
from typing import Any

GENERIC = 1
TIMEOUT = 3
SORT_ORDER_VIOLATION = 301
UNIQUE_KEY_VIOLATION = 306
SCHEMA_VIOLATION = 307
INCOMPATIBLE_SCHEMAS = 314
NO_SUCH_METHOD = 103
CONCURRENT_TRANSACTION_LOCK_CONFLICT = 402
RESOLVE_ERROR = 500
ALREADY_EXISTS = 501
TABLET_TRANSACTION_LOCK_CONFLICT = 1700
NO_SUCH_TABLET = 1701
TOO_MANY_ROWS_IN_TRANSACTION = 1717
TABLET_NOT_MOUNTED = 1702
INVALID_TABLET_STATE = 1707
NO_SUCH_OPERATION = 1915
NO_SUCH_TRANSACTION = 11000
INVALID_TRANSACTION_STATE = 11003
QUERY_ERROR = 1  # the query engine reports parse/type errors with the generic code


class YtError(Exception):
    """An error with the YT error model: code, message, attributes, inner errors."""

    def __init__(
        self,
        message: str,
        code: int = GENERIC,
        attributes: Any = None,
        inner_errors: list[YtError | dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.attributes = dict(attributes or {})
        self.inner_errors = list(inner_errors or [])

    def to_dict(self) -> dict[str, Any]:
        attrs = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "datetime": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%dT%H:%M:%S.%fZ"
            ),
        }
        attrs.update(self.attributes)
        return {
            "code": self.code,
            "message": self.message,
            "attributes": attrs,
            "inner_errors": [
                e.to_dict() if isinstance(e, YtError) else e for e in self.inner_errors
            ],
        }

    def __str__(self) -> str:
        return f"{self.message} (code {int(self.code)})"


def no_such_transaction(tx_id: str | None) -> YtError:
    return YtError(f"No such transaction {tx_id}", NO_SUCH_TRANSACTION, {"transaction_id": tx_id})


def sticky_transaction_not_found(tx_id: str) -> YtError:
    """A tablet transaction asked of a proxy other than the one holding it (the HTTP proxy's
    sticky transaction pool, ``IStickyTransactionPool::GetTransactionAndRenewLeaseOrThrow``)."""
    return YtError(
        f"Sticky transaction {tx_id} is not found, this usually means that you use tablet "
        "transactions within HTTP API; consider using RPC API instead",
        NO_SUCH_TRANSACTION,
        {"transaction_id": tx_id},
    )


def not_supported_by_virtual_node(node_path: str, path: str) -> YtError:
    """A command a virtual map node (``//sys/transactions``) does not serve.

    YT's YPath services reject a verb they do not implement with the RPC error
    ``NoSuchMethod`` (103, "Method ... is not supported"; ``ThrowMethodNotSupported`` in
    ytsaurus ``yt/yt/core/ytree/exception_helpers.cpp``).  Which verbs real YT serves below
    a transaction (it lets ``@timeout`` and custom attributes be set, for one) is only partly
    known, so the emulator serves reads only and refuses every write (README, gaps).
    """
    return YtError(
        f"Method is not supported: {node_path} is a virtual node; only get, list and exists are "
        "served",
        NO_SUCH_METHOD,
        {"path": path},
    )
