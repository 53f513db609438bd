"""Command implementations (the driver layer behind the HTTP proxy).

Parameter names and v4 result shapes follow https://ytsaurus.tech/docs/en/api/commands
and the shared notes on what the real client sends: ``get`` with
``return_only_value=%true`` returns the bare value, ``list``/``exists`` wrap it in
``{"value": ...}`` otherwise; ``create``/``copy``/``move`` return ``{"node_id"}``,
``start_transaction`` ``{"transaction_id"}``, ``lock`` ``{"lock_id","node_id","revision"}``,
``start_operation`` ``{"operation_id"}``, ``execute_batch`` ``{"results": [...]}``.

The commands of each area are in a module of this package (``reads``, ``writes``, ``create``,
``attributes``, ``transactions``, ``tables``, ``dynamic``, ``operations``), registered by name
in ``base.REGISTRY``; ``Commands`` combines them and runs one command atomically.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..cypress import VIRTUAL_MAP_TYPES
from ..errors import YtError, not_supported_by_virtual_node
from .attributes import AttributeReads
from .base import REGISTRY, Binary, Tabular
from .create import NodeCreation
from .dynamic import DynamicCommands
from .operations import OperationCommands
from .reads import NodeReads
from .tables import TableCommands
from .transactions import TransactionCommands
from .writes import NodeWrites

if TYPE_CHECKING:
    from ..state import EmulatorState

__all__ = ["Binary", "Commands", "REGISTRY", "Tabular"]

# The commands that read virtual map nodes (``//sys/transactions``); every other command that
# names a virtual node or something below it is refused (see ``_refuse_virtual_targets``).
VIRTUAL_READS = ("get", "list", "exists")
# Parameters of the other commands that name Cypress paths.
PATH_PARAMS = ("path", "source_path", "destination_path")


class Commands(
    NodeReads,
    NodeWrites,
    NodeCreation,
    AttributeReads,
    TransactionCommands,
    TableCommands,
    DynamicCommands,
    OperationCommands,
):
    """The driver layer: runs a command by its API name (see ``base.REGISTRY``)."""

    def __init__(self, state: EmulatorState) -> None:
        self.state = state
        self.cypress = state.cypress
        self.txm = state.txm

    def run(self, command: str, params: dict[str, Any], input_data: Any = None) -> Any:
        """Run one command atomically: on error, every Cypress change it made is rolled back."""
        handler = REGISTRY.get(command)
        if handler is None:
            raise YtError(
                f"Command {command!r} is not supported by the emulator", 1, {"command": command}
            )
        self._refuse_virtual_targets(command, params)
        self.cypress.begin()
        try:
            result = handler(self, params, input_data)
        except BaseException:
            self.cypress.rollback()
            raise
        self.cypress.commit_journal()
        return result

    def _refuse_virtual_targets(self, command: str, params: dict[str, Any]) -> None:
        """Virtual maps are views of live state, read-only: a command other than a read that
        names one of them (or a path below one) fails before it touches anything."""
        if command in VIRTUAL_READS or command == "execute_batch":
            return  # a batch runs each of its requests through ``run``
        paths = [params[k] for k in PATH_PARAMS if params.get(k) is not None]
        source_paths = params.get("source_paths")
        if isinstance(source_paths, list):
            paths += source_paths
        if not paths:
            return
        tx = self.txm.normalize(params.get("transaction_id"))
        if self.txm.find_master(tx) is None:
            tx = None  # tablet or unknown transactions: the command reports them itself
        for path in paths:
            try:
                node, _, _, text = self.cypress.resolve(path, tx, missing_ok=True, virtual_ok=True)
            except YtError:
                continue  # the command reports its own resolve error
            if node.type in VIRTUAL_MAP_TYPES:
                raise not_supported_by_virtual_node(self.cypress.path_of(node, tx), text)
