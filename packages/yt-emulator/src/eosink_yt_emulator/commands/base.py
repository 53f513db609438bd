"""What every command module shares: result types, parameter helpers, the command registry.

A command is a method of ``Commands`` registered under its API name with ``@command``; the
modules of this package each hold the commands of one area as a mixin of ``Commands``.
"""

from __future__ import annotations

import copy as copymod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Never

from ..common import to_bool
from ..errors import RESOLVE_ERROR, YtError
from ..yson import Attributed, unwrap

if TYPE_CHECKING:
    from ..cypress import Cypress
    from ..state import EmulatorState
    from ..transactions import TransactionManager

#: A command's implementation: ``(commands, params, input) -> result``.
Handler = Callable[..., Any]

#: API command name -> the method that runs it (filled by ``@command`` at import).
REGISTRY: dict[str, Handler] = {}


def command(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated method as the implementation of the commands ``names``."""

    def register(fn: Handler) -> Handler:
        for name in names:
            if name in REGISTRY:
                raise ValueError(f"command {name!r} is registered twice")
            REGISTRY[name] = fn
        return fn

    return register


class Tabular:
    """A tabular command result: rows plus optional response parameters."""

    def __init__(
        self, rows: list[dict[str, Any] | None], response_parameters: dict | None = None
    ) -> None:
        self.rows = rows
        self.response_parameters = response_parameters


class Binary:
    """A binary command result (``read_file``): sent as it is."""

    def __init__(self, data: bytes) -> None:
        self.data = data


class CommandsBase:
    """The state every command area works on (the mixins of ``Commands`` share it)."""

    state: EmulatorState
    cypress: Cypress
    txm: TransactionManager

    def tx(self, params: dict[str, Any]) -> str | None:
        """The command's master transaction (``None`` outside one); an unknown id fails."""
        tx = self.txm.normalize(params.get("transaction_id"))
        if tx is not None:
            self.txm.get_master(tx)
        return tx


def _s(v: Any) -> Any:
    v = unwrap(v)[0]
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def _b(params: dict[str, Any], name: str, default: Any = False) -> bool:
    v = params.get(name, default)
    return to_bool(v) if v is not None else default


def _navigate(value: Any, keys: list[Any], text: str) -> Any:
    for k in keys:
        value = unwrap(value)[0]
        if isinstance(value, dict) and k in value:
            value = value[k]
        elif isinstance(value, list):
            try:
                value = value[int(k)]
            except (ValueError, IndexError):
                raise YtError(f"Cannot resolve {k!r} in {text}", RESOLVE_ERROR, {"path": text})
        else:
            raise YtError(f"Node has no child with key {k!r}", RESOLVE_ERROR, {"path": text})
    return value


def _set_in(value: Any, keys: list[Any], new: Any, text: str, remove: bool = False) -> Any:
    """Return a copy of ``value`` with ``keys`` set to ``new`` (or removed)."""
    value = copymod.deepcopy(value)
    if not keys:
        return new
    holder_val, attrs = unwrap(value)
    root = holder_val
    cur = root
    for k in keys[:-1]:
        c = unwrap(cur)[0]
        if isinstance(c, dict):
            if k not in c:
                raise YtError(f"Node has no child with key {k!r}", RESOLVE_ERROR, {"path": text})
            cur = c[k]
        elif isinstance(c, list):
            cur = c[int(k)]
        else:
            raise YtError(
                f"Cannot navigate into a scalar with key {k!r}", RESOLVE_ERROR, {"path": text}
            )
    last = keys[-1]
    c = unwrap(cur)[0]
    if isinstance(c, dict):
        if remove:
            if last not in c:
                raise YtError(f"Node has no child with key {last!r}", RESOLVE_ERROR, {"path": text})
            del c[last]
        else:
            c[last] = new
    elif isinstance(c, list):
        if remove:
            del c[int(last)]
        elif last == "end":
            c.append(new)
        else:
            c[int(last)] = new
    else:
        raise YtError("Cannot set a child of a scalar node", RESOLVE_ERROR, {"path": text})
    return Attributed(root, attrs) if attrs else root


def _raise() -> Never:
    raise YtError("Not found", RESOLVE_ERROR)
