"""The emulator as the faulty store of the conformance kit's generated histories.

The kit (``eosink.testing.simulation``) arms *store faults* below the sink: a kind, the request
they hit (the ``after``-th from now) and the class of requests that count, in an object
store's words (``put``, ``get``, ``head``, ``list``, ``delete``, ``copy``). A YT sink's
``SimTarget.store`` is a :class:`KitStore`, which turns each into the emulator's own fault on
the YT commands of that class, so the sink meets it through the real client:

* ``error``: the proxy answers a YT error; the command is not applied;
* ``lost_reply``: the command is applied, then the connection closes unanswered (the client
  resends a mutation with its mutation id, answered by the response keeper; inside a tablet
  transaction nothing is resent);
* ``short_write``: the connection closes unanswered; nothing is applied.

Any object with ``kind``, ``after`` and ``ops`` attributes is a fault here (the kit's
``StoreFault``): the emulator needs nothing of eosink. :class:`YtSimulation` is what the YT
sinks' simulations share beside their ``SinkSimulation``: the emulator, YT's types and values.
"""

from __future__ import annotations

import datetime as dt
import itertools
from typing import Any

import pytest
from hypothesis import strategies as st

from .faults import FaultRule, Faults
from .state import descriptor_list

#: The YT commands of each class of object store requests; ``put`` is every other mutation.
_CLASSES = {
    "list": ("list",),
    "delete": ("remove", "abort_transaction", "delete_rows", "unmount_table", "trim_rows"),
    "copy": ("copy", "move", "concatenate", "start_operation"),
    "get": ("get", "read_table", "select_rows", "lookup_rows", "get_operation", "list_jobs"),
    "head": ("exists",),
}
_TAKEN = {name for names in _CLASSES.values() for name in names}
COMMANDS: dict[str, tuple[str, ...]] = {
    **_CLASSES,
    "put": tuple(
        d["name"] for d in descriptor_list() if d["is_volatile"] and d["name"] not in _TAKEN
    ),
}
#: kind -> (the emulator's fault kind, when it fires)
KINDS = {
    "error": ("error", "before"),
    "lost_reply": ("lost_reply", "after"),
    "short_write": ("lost_reply", "before"),
}


#: The kit's column types (``eosink.testing.arrow_data``) that the YT sinks map to YT types
#: (``eosink_yt_common.yt_type``): no decimals, lists or structs.
YT_TYPES = (
    "int8",
    "int16",
    "int32",
    "int64",
    "float32",
    "float64",
    "bool",
    "string",
    "binary",
    "date",
    "timestamp",
    "timestamp_utc",
)
EPOCH = dt.datetime(1970, 1, 1)
#: What YT's date and timestamp hold (1970-01-01 to 2105-12-31, YT's documentation): the
#: range a history's dates and times are drawn from.
FIRST, LAST = EPOCH, dt.datetime(2105, 12, 31, 23, 59, 59, 999999)
#: The kit's value strategies (``SinkSimulation.simulation_values``) for the types YT bounds:
#: dates and times drawn inside what YT holds (a YT sink refuses values outside with a clear
#: error, which its own tests check).
YT_VALUES = {
    "date": st.dates(FIRST.date(), LAST.date()),
    "timestamp": st.datetimes(FIRST, LAST),
    "timestamp_utc": st.datetimes(FIRST, LAST, timezones=st.just(dt.timezone.utc)),
}


def yt_value(value: Any) -> Any:
    """A source value as YT gives it back: dates in days, timestamps in microseconds (UTC)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    if isinstance(value, dt.date):
        return (value - EPOCH.date()).days
    return value


class KitStore:
    """Arms the kit's store faults on an emulator's :class:`~eosink_yt_emulator.faults.Faults`."""

    def __init__(self, faults: Faults) -> None:
        self.faults = faults
        self.rules: list[FaultRule] = []

    def arm(self, *faults: Any) -> None:
        for fault in faults:
            kind, when = KINDS[fault.kind]
            commands = sorted({c for op in fault.ops for c in COMMANDS.get(op, ())})
            rule = self.faults.fail_next(
                commands,
                when=when,
                kind=kind,
                skip=int(fault.after) - 1,
                message=f"injected store fault ({fault.kind}) for the kit's history",
            )
            self.rules.append(rule)

    def disarm(self) -> None:
        """Remove the armed faults that have not fired (fired ones stay counted)."""
        self.faults.clear()

    @property
    def fired(self) -> int:
        """How many armed faults fired so far."""
        return sum(rule.fired for rule in self.rules)


def sink_options(emulator: Any) -> dict[str, Any]:
    """The options a YT sink reaches ``emulator`` with (no proxy discovery: one proxy)."""
    return {
        "proxy": emulator.url,
        "proxy_discovery": False,
        "client_config": emulator.client_config(),
    }


_histories = itertools.count()


def history_path() -> str:
    """A fresh table path for one generated history."""
    return f"//home/sim/h{next(_histories)}/out"


class YtSimulation:
    """Mixed in before ``SinkSimulation`` by a YT sink's simulation: the histories draw YT's
    types and values (dates and times inside what YT holds), run against the test's emulator
    (the ``yt_emulator`` fixture), and expect rows back as YT gives them (:func:`yt_value`)."""

    simulation_types = YT_TYPES
    simulation_values = YT_VALUES

    @pytest.fixture
    def simulation_env(self, yt_emulator: Any) -> Any:
        return yt_emulator

    def simulation_row(self, spec: Any, row: dict[str, Any]) -> dict[str, Any]:
        return {k: yt_value(v) for k, v in row.items()}
