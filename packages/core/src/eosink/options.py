"""Typed options from Spark's string options.

Spark hands options as a case-insensitive ``dict[str, str]`` (``partitionBy`` arrives as
``partitionby``); Python callers pass keyword arguments (``partition_by=["day"]``). Both map
onto one attrs class per sink, so a sink declares its options once, with types and defaults.

Store options (credentials, endpoint, region: whatever the sink's store client takes) are one
field, ``storage_options``, a dict. Python callers pass it whole; Spark options spell each entry
``storage.<key>`` (``.option("storage.endpoint_url", ...)``), the way Spark's own sources take
``fs.s3a.*``. Their values may be secrets: :func:`masked` is what a ``repr`` shows of them.
"""

from __future__ import annotations

import json
import os
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from eosink.errors import ConfigurationError

T = TypeVar("T")

#: Spark options ``storage.<key>`` are the entries of a sink's ``storage_options`` field.
STORAGE_PREFIX = "storage."
STORAGE_FIELD = "storage_options"

#: Parts of a store option's name that say its value is (or holds) a credential.
SECRET_KEY_MARKERS = (
    "key",
    "secret",
    "token",
    "password",
    "credential",
    "sas",
    "signature",
    "connection_string",
    "auth",
)
MASK = "***"


def option_key(name: str) -> str:
    """The spelling-independent key of an option: ``partitionBy`` == ``partition_by``."""
    return name.replace("_", "").replace("-", "").replace(".", "").lower()


def names(value: object) -> tuple[str, ...]:
    """attrs converter for options that list names: ``"a, b"`` from Spark or an iterable."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return tuple(str(v) for v in value)  # type: ignore[attr-defined]


def location(path: str) -> str:
    """A folder as every process must see it: an absolute local path, or a URL as given.

    A relative path is resolved here, once, so that executors and the fresh Python workers of
    the data-source front door (whose working directory may differ) reach the same folder.
    ``file:`` URLs become plain paths.
    """
    path = str(path).strip()
    if path.startswith("file://"):
        path = path[len("file://") :]
    elif path.startswith("file:"):
        path = path[len("file:") :]
    if "://" in path:
        return path.rstrip("/")
    return os.path.abspath(path)


def is_secret_key(name: object) -> bool:
    """Whether a store option of this name holds a credential (its value is never shown)."""
    return isinstance(name, str) and any(m in name.lower() for m in SECRET_KEY_MARKERS)


def masked(value: Any) -> Any:
    """``value`` with every credential-looking entry replaced by ``***``, at any depth.

    Also drops the user info of URLs (``https://user:pass@host``), the other place secrets hide.
    """
    if isinstance(value, Mapping):
        return {k: MASK if is_secret_key(k) else masked(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(masked(v) for v in value)
    if isinstance(value, str) and "://" in value and "@" in value.split("://", 1)[1]:
        scheme, rest = value.split("://", 1)
        return f"{scheme}://{MASK}@{rest.split('@', 1)[1]}"
    return value


def secret_values(value: Any) -> list[str]:
    """Every credential-looking string in ``value`` (to scrub from the text of errors)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            if is_secret_key(k) and isinstance(v, str) and v:
                found.append(v)
            else:
                found += secret_values(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            found += secret_values(v)
    return found


def mapping_option(value: Any, how: str) -> dict[str, Any]:
    """An option that is a dict, given whole (Python) or as its JSON text (one Spark option);
    None is empty. Anything else is a ``ConfigurationError`` that says ``how`` to give it."""
    if value is None:
        return {}
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else {}
        except ValueError:
            value = None
    if not isinstance(value, Mapping):
        raise ConfigurationError(how)
    return dict(value)


def storage_options(value: Any) -> dict[str, Any]:
    """attrs converter of ``storage_options``: a dict, or its JSON text (one Spark option)."""
    return mapping_option(
        value,
        "option storage_options: give a dict (Python) or one Spark option per entry, "
        "e.g. .option('storage.endpoint_url', 'https://...')",
    )


def _convert(value: Any, hint: Any, name: str) -> Any:
    if not isinstance(value, str):
        return value
    origin = typing.get_origin(hint)
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if origin in (typing.Union, types.UnionType) and len(args) == 1:
        if value.lower() in ("", "none", "null"):
            return None
        return _convert(value, args[0], name)
    target = origin or hint
    try:
        if target is bool:
            lowered = value.strip().lower()
            if lowered in ("true", "1", "yes", "on"):
                return True
            if lowered in ("false", "0", "no", "off"):
                return False
            raise ValueError(value)
        if target is int:
            return int(value)
        if target is float:
            return float(value)
        if target in (tuple, list):
            items = [part.strip() for part in value.split(",") if part.strip()]
            return tuple(items) if target is tuple else items
    except ValueError:
        raise ConfigurationError(
            f"option {name!r}: cannot read {value!r} as {getattr(target, '__name__', target)}"
        ) from None
    return value


def options_from(cls: type[T], options: Mapping[str, Any], *, sink: str = "") -> T:
    """Build the attrs options class ``cls`` from a mapping of (often string) options.

    Unknown options are an error that lists the known ones: a typo must not silently fall back
    to a default (for instance a misspelled ``path``). Options ``storage.<key>`` are entries
    of the ``storage_options`` field, for classes that have one (the key keeps its spelling,
    lower-cased by Spark).
    """
    fields = {option_key(f.name): f for f in attrs.fields(cls)}
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    storage: dict[str, Any] = {}
    for name, value in options.items():
        if name.lower().startswith(STORAGE_PREFIX) and STORAGE_FIELD in attrs.fields_dict(cls):
            storage[name[len(STORAGE_PREFIX) :]] = value
            continue
        field = fields.get(option_key(name))
        if field is None:
            known = ", ".join(sorted(f.name for f in attrs.fields(cls)))
            where = f"sink {sink!r}: " if sink else ""
            raise ConfigurationError(f"{where}unknown option {name!r}; known options: {known}")
        kwargs[field.name] = _convert(value, hints.get(field.name, str), field.name)
    if storage:
        kwargs[STORAGE_FIELD] = {**storage_options(kwargs.get(STORAGE_FIELD)), **storage}
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a missing mandatory option
        where = f"sink {sink!r}: " if sink else ""
        raise ConfigurationError(f"{where}{exc}") from None
