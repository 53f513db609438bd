"""Named crash points inside a sink's steps, for crash tests.

The core can crash a batch between phases on its own (a wrapper around a hook), but a crash
*inside* ``commit`` (after the data is in, before the proof is) needs the sink's help: a sink
calls ``crash_point("commit:data-written")`` between its internal steps. In production the call
does nothing; the conformance kit installs a handler that records the points a commit passes
and then raises at each one in turn, so a non-atomic commit shows up as duplicates or losses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

_local = threading.local()


def crash_point(name: str) -> None:
    """Mark a point where a crash must leave the target consistent. A no-op in production."""
    handler: Callable[[str], None] | None = getattr(_local, "handler", None)
    if handler is not None:
        handler(name)


def set_crash_handler(handler: Callable[[str], None] | None) -> None:
    """Install (or remove, with ``None``) the handler called at every crash point of this thread."""
    _local.handler = handler
