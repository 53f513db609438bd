"""The retry policy both YT sinks use.

Single requests are retried by the client's own machinery (it resends mutating commands with
the same mutation id and ``retry=%true``, so a lost reply is answered by the proxy's response
keeper instead of being applied twice). Units of work that span several requests (a sub
transaction, a part transaction) are retried as a unit by :func:`retry_unit`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from eosink.logs import get_logger

T = TypeVar("T")

log = get_logger("eosink.yt")

#: Attempts of one unit of work (sub transaction, part transaction, tablet transaction).
UNIT_ATTEMPTS = 5


def client_retry_config() -> dict[str, Any]:
    """Client configuration: request retries with backoff, for HTTP and dynamic tables."""
    backoff = {
        "policy": "exponential",
        "exponential_policy": {
            "start_timeout": 200,
            "base": 2,
            "max_timeout": 5000,
            "decay_factor_bound": 0.3,
        },
    }
    return {
        "proxy": {"retries": {"enable": True, "count": 6, "backoff": backoff}},
        "dynamic_table_retries": {"enable": True, "count": 6, "backoff": backoff},
    }


def is_retriable(error: BaseException) -> bool:
    """Errors after which running the whole unit again is safe and may succeed.

    Besides YT's own retriable errors, the transport errors the client retries for single
    requests: inside a transaction the client does not resend (a resent write could apply twice
    in it), so they reach the sink, and a new transaction for the whole unit is then safe.
    """
    from yt.wrapper.errors import YtError
    from yt.wrapper.http_helpers import get_retriable_errors

    if isinstance(error, (*get_retriable_errors(), ConnectionError, TimeoutError)):
        return True
    if not isinstance(error, YtError):
        return False
    return any(
        check()
        for check in (
            error.is_concurrent_transaction_lock_conflict,
            error.is_tablet_transaction_lock_conflict,
            error.is_request_timed_out,
            error.is_proxy_banned,
            error.is_transport_error,
            error.is_rpc_unavailable,
            error.is_no_such_transaction,
            error.is_tablet_in_intermediate_state,
        )
    )


def retry_unit(
    action: Callable[[], T],
    *,
    what: str,
    attempts: int = UNIT_ATTEMPTS,
    retriable: Callable[[BaseException], bool] = is_retriable,
    pause_s: float = 0.2,
) -> T:
    """Run ``action`` until it succeeds, up to ``attempts`` times when its error is retriable."""
    for attempt in range(1, attempts + 1):
        try:
            return action()
        except Exception as exc:
            if attempt == attempts or not retriable(exc):
                raise
            log.info("yt.retry", what=what, attempt=attempt, error=type(exc).__name__)
            time.sleep(pause_s * 2 ** (attempt - 1))
    raise AssertionError("unreachable")
