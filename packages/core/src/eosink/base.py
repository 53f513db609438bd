"""The base class of sinks: options handling and the defaults a sink may keep.

A sink only has to be a class with a ``name``, a ``from_options`` class method and
``@hookimpl`` methods; deriving from :class:`Sink` gives the usual shape: an attrs ``Options``
class, ``from_options`` built on it, and a no-op ``abort``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from eosink.hookspecs import hookimpl
from eosink.options import options_from


class Sink:
    """Base class of eosink sinks.

    Subclasses set ``name`` (the entry point name) and ``Options`` (an attrs class whose fields
    are the sink's options) and implement the hooks of :mod:`eosink.hookspecs`. Instances must
    pickle: they travel to executors and, in the data-source front door, are rebuilt from the
    string options in fresh processes.
    """

    name: ClassVar[str] = ""
    Options: ClassVar[type] = type(None)

    def __init__(self, options: Any = None, /, **kwargs: Any) -> None:
        if options is None or isinstance(options, Mapping):
            options = options_from(self.Options, {**(options or {}), **kwargs}, sink=self.name)
        elif kwargs:
            raise TypeError("pass either an Options instance or keyword options, not both")
        self.options = options

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> Sink:
        """Build the sink from Spark-style string options (case and spelling insensitive)."""
        return cls(dict(options))

    @hookimpl
    def abort(self) -> None:
        """Nothing staged, nothing to clean: the default for sinks without staging."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"
