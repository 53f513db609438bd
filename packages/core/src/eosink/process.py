"""State a sink keeps for the life of its process, which the kit's simulation can split.

Some sinks keep what they learnt about a target between batches (the files sink's view of its
manifest log, the delta sink's table snapshot), so a batch costs O(batch), not O(history). That
state belongs to one process: a restarted driver, a second query on the same output or a
zombie attempt each have their own, and the bugs worth finding are where they disagree.

The kit's simulation runs several such "processes" in one Python process. A sink gets its
per-process state from :func:`process_state` (never from a module-level dict), and the
simulation switches between processes with :func:`simulated_process` and restarts one with
:func:`forget_process`. Outside a simulation there is one process, the real one.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_current: contextvars.ContextVar[str] = contextvars.ContextVar("eosink_process", default="")
_states: dict[tuple[str, str], dict[Any, Any]] = {}
_lock = threading.Lock()


def process_state(name: str) -> dict[Any, Any]:
    """The dict named ``name`` of the running (possibly simulated) process, created empty.

    Name it after the owning module (``"eosink_files.views"``). Callers serialize access with
    their own locks, as they would a module-level dict.
    """
    key = (_current.get(), name)
    with _lock:
        state = _states.get(key)
        if state is None:
            state = _states[key] = {}
        return state


@contextmanager
def simulated_process(pid: str) -> Iterator[None]:
    """Run the block as process ``pid``: it sees that process's state only. Tests only."""
    token = _current.set(pid)
    try:
        yield
    finally:
        _current.reset(token)


def forget_process(pid: str | None = None) -> None:
    """Drop the state of process ``pid`` (``None``: of every process), as a restart does."""
    with _lock:
        for key in [k for k in _states if pid is None or k[0] == pid]:
            del _states[key]
