"""The YSON value model: what the codec reads into and writes from (see ``yson.py``)."""

from __future__ import annotations

from typing import Any


class YsonError(ValueError):
    pass


class Entity:
    """YSON entity ``#`` (null)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Entity) or other is None

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "Entity()"

    def __bool__(self) -> bool:
        return False


ENTITY = Entity()


class Uint64(int):
    """An unsigned 64-bit YSON integer (``123u``)."""

    def __repr__(self) -> str:
        return f"Uint64({int(self)})"


class Attributed:
    """A YSON value with attributes: ``<attrs>value``."""

    __slots__ = ("value", "attributes")

    def __init__(self, value: Any, attributes: Any) -> None:
        self.value = value
        self.attributes = dict(attributes)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attributed):
            return self.value == other.value and self.attributes == other.attributes
        return False

    def __repr__(self) -> str:
        return f"Attributed({self.value!r}, {self.attributes!r})"


def unwrap(value: Any) -> tuple[Any, dict[str, Any]]:
    """Return ``(value, attributes)`` for a possibly attributed value."""
    if isinstance(value, Attributed):
        return value.value, value.attributes
    return value, {}


def attrs_of(value: Any) -> dict[str, Any]:
    return value.attributes if isinstance(value, Attributed) else {}


def _to_text(b: bytes) -> str | bytes:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b
