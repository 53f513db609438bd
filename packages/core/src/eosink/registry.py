"""Finding sinks by name through the ``eosink.sinks`` entry point group.

Users install only the sinks they need, and third parties ship their own: a sink is any class
exposed under the entry point group ``eosink.sinks``. The core never imports a sink by module
name.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from importlib.metadata import EntryPoint, entry_points
from typing import Any

import pluggy

from eosink import hookspecs
from eosink.errors import UnknownSinkError

GROUP = "eosink.sinks"
#: Spark streaming sources shipped as eosink packages: name -> a Spark Python ``DataSource``.
SOURCES_GROUP = "eosink.sources"

#: Sinks maintained with eosink, and the distribution that provides each.
KNOWN_SINKS = {
    "files": "eosink-files",
    "delta": "eosink-delta",
    "iceberg": "eosink-iceberg",
    "yt-dynamic": "eosink-yt-dynamic",
    "yt-static": "eosink-yt-static",
    "postgres": "eosink-postgres",
}
#: Sources maintained with eosink, and the distribution that provides each (named in errors
#: when an entry point does not say, e.g. sources seen through a build tool's path).
KNOWN_SOURCES = {"yt-queue": "eosink-yt-queue"}


def installed_sinks() -> dict[str, EntryPoint]:
    """The installed sinks by name (nothing is imported)."""
    return {ep.name: ep for ep in entry_points(group=GROUP)}


def installed_sources() -> dict[str, EntryPoint]:
    """The installed sources (Spark Python data sources) by name (nothing is imported)."""
    return {ep.name: ep for ep in entry_points(group=SOURCES_GROUP)}


@functools.lru_cache(maxsize=None)
def sink_class(name: str) -> type:
    """Load the class of the sink called ``name``, or explain how to get it."""
    found = installed_sinks()
    if name in found:
        return found[name].load()
    installed = ", ".join(sorted(found)) or "none"
    if name in KNOWN_SINKS:
        raise UnknownSinkError(
            f"sink {name!r} is not installed: `pip install {KNOWN_SINKS[name]}` "
            f"(installed sinks: {installed})"
        )
    raise UnknownSinkError(
        f"unknown sink {name!r}; installed sinks: {installed}. A sink is found through the "
        f"entry point group {GROUP!r}: install the package that provides it."
    )


def sink(name: str, /, **options: Any) -> Any:
    """Create the sink called ``name`` with keyword options, e.g. ``sink("files", path=...)``."""
    return sink_class(name)(dict(options))


def sink_from_options(name: str, options: Mapping[str, Any]) -> Any:
    """Create the sink called ``name`` from Spark-style string options."""
    return sink_class(name).from_options(options)


def plugin_manager(sink_instance: Any, plugins: Iterable[Any] = ()) -> pluggy.PluginManager:
    """A plugin manager holding one sink and the cross-cutting plugins that wrap it."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    pm.register(sink_instance, name=f"sink:{getattr(sink_instance, 'name', '?')}")
    for plugin in plugins:
        pm.register(plugin)
    return pm


def upsert_key(sink_instance: Any) -> tuple[str, ...] | None:
    """The key ``sink_instance`` replaces rows by (its ``upsert_key`` hook), or ``None``."""
    key = plugin_manager(sink_instance).hook.upsert_key()
    return tuple(key) if key else None
