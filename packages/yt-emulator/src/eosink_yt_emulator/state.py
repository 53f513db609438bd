"""The emulator's state: one object behind one lock.

A single re-entrant lock serializes every command (simple, correct, deadlock-free);
only fault-injected delays, ``on_next`` callbacks and network I/O happen outside it.
"""

from __future__ import annotations

import json
import threading
from importlib import resources
from typing import TYPE_CHECKING, Any

from .commands import Commands
from .common import Clock
from .consumers import QueueConsumers
from .cypress import Cypress
from .dynamic import DynamicTables
from .operations import Operations
from .tables import StaticTables
from .transactions import TransactionManager

if TYPE_CHECKING:
    from .http import Response

DEFAULT_CONFIG = {
    # Seconds a tablet stays in "mounting"/"unmounting"/... before the final state.
    "mount_delay": 0.05,
    # Row limit of one tablet transaction (docs: 100,000 by default).
    "max_rows_per_transaction": 100000,
    # How many mutation responses the response keeper remembers.
    "response_keeper_size": 100000,
}


def load_descriptors() -> dict[str, Any]:
    """The API v4 command descriptors the real driver publishes (``commands_v4.json``)."""
    text = resources.files(__package__).joinpath("commands_v4.json").read_text("utf-8")
    return {d["name"]: d for d in json.loads(text)}


def descriptor_list() -> list[dict[str, Any]]:
    """The descriptors as ``GET /api/v4`` lists them."""
    text = resources.files(__package__).joinpath("commands_v4.json").read_text("utf-8")
    return json.loads(text)


class ResponseKeeper:
    """Remembers the response to each mutation id (https://ytsaurus.tech/docs/en/api/commands,
    "mutation_id"/"retry"): a retry with ``retry=%true`` gets the stored answer, a retry that
    arrives while the original is still executing waits for it."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.done = {}
        self.pending = {}
        self.cond = threading.Condition()

    def begin(self, mutation_id: str, is_retry: bool, timeout: Any = 60.0) -> Response | None:
        """Returns a stored response, or None after registering the request as pending.

        Raises ``KeyError`` when a non-retry request reuses a known mutation id."""
        with self.cond:
            while mutation_id in self.pending:
                if not self.cond.wait(timeout):
                    break
            if mutation_id in self.done:
                if not is_retry:
                    raise KeyError(mutation_id)
                return self.done[mutation_id]
            self.pending[mutation_id] = True
            return None

    def end(self, mutation_id: str, response: Response | None) -> None:
        """Store the response of a mutation, or forget the mutation if it produced none."""
        with self.cond:
            self.pending.pop(mutation_id, None)
            if response is not None:
                self.done[mutation_id] = response
                if len(self.done) > self.size:
                    for k in list(self.done)[: len(self.done) // 2]:
                        del self.done[k]
            self.cond.notify_all()


class EmulatorState:
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = dict(DEFAULT_CONFIG)
        self.config.update(config or {})
        self.lock = threading.RLock()
        self.clock = Clock()
        self._revision = 0
        self.locks = {}
        self.address = ""
        #: The proxy (address) serving the current request, per request thread.
        self._serving = threading.local()
        self.txm = TransactionManager(self)
        self.cypress = Cypress(self)
        self.tables = StaticTables(self)
        self.dynamic = DynamicTables(self)
        self.consumers = QueueConsumers(self)
        self.operations = Operations(self)
        self.descriptors = load_descriptors()
        self.commands = Commands(self)
        self.keeper = ResponseKeeper(self.config["response_keeper_size"])

    def serving_proxy(self) -> str | None:
        """The address of the proxy serving this thread's request (``None`` outside one)."""
        return getattr(self._serving, "proxy", None)

    def serve_as(self, proxy: str | None) -> None:
        """Mark this thread's requests as served by ``proxy``."""
        self._serving.proxy = proxy

    def next_revision(self) -> int:
        """A new revision number for a changed node."""
        self._revision += 1
        return self._revision
