"""The time sinks decide by, which the conformance kit's simulation controls.

A sink that decides by elapsed time (a log file old enough to delete, a view of the target
trusted for so long, a lease to renew) asks :func:`now` instead of ``time.time()``. In
production it is the wall clock. The kit's generated histories install a clock of their own
(:func:`set_clock`), so that a delay of ten minutes passes in a microsecond and a history
that depends on it replays exactly from its seed.

Only decisions go through here; durations that are only logged keep ``time.monotonic()``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

_clock: Callable[[], float] | None = None


def now() -> float:
    """Seconds since the epoch, as ``time.time()``, or as the installed test clock says."""
    return time.time() if _clock is None else _clock()


def now_ms() -> int:
    """:func:`now` in whole milliseconds (the unit of file modification times in manifests)."""
    return int(now() * 1000)


def set_clock(clock: Callable[[], float] | None) -> None:
    """Install a clock for the whole process (``None``: the wall clock again). Tests only."""
    global _clock
    _clock = clock
