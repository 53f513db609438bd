"""A self-contained YSON codec (text and binary) and YT's JSON mapping.

The emulator does not import ``yt.yson``: it must understand exactly the bytes
the client puts on the wire, with or without the ``ytsaurus-yson`` bindings on
the client side, so it parses and writes YSON itself.

Follows https://ytsaurus.tech/docs/en/user-guide/storage/yson (grammar, binary
markers 0x01 string, 0x02 int64, 0x03 double, 0x04 false, 0x05 true, 0x06 uint64)
and https://ytsaurus.tech/docs/en/user-guide/storage/formats#json (``$attributes``/
``$value`` wrapping, ``encode_utf8``).

Value model: ``dict``, ``list``, ``str`` (valid UTF-8) or ``bytes`` (anything else),
``int`` (int64), :class:`Uint64`, ``float``, ``bool``, :class:`Entity` (``#``).
A value carrying YSON attributes is wrapped in :class:`Attributed`.

The value model is in ``yson_values.py``, the parser in ``yson_parse.py``, the writer in
``yson_write.py``; this module is the codec's interface and holds the JSON mapping.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .yson_parse import load_fragment, loads
from .yson_values import ENTITY, Attributed, Entity, Uint64, YsonError, _to_text, attrs_of, unwrap
from .yson_write import _as_bytes, dump_fragment, dumps

__all__ = [
    "Entity",
    "Uint64",
    "Attributed",
    "YsonError",
    "loads",
    "dumps",
    "load_fragment",
    "dump_fragment",
    "unwrap",
    "attrs_of",
    "to_json",
    "from_json",
    "ENTITY",
]


def _json_str_out(s: str | bytes | bytearray, encode_utf8: bool) -> str:
    b = _as_bytes(s)
    if encode_utf8:
        return b.decode("latin-1")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise YsonError("Non-UTF-8 string cannot be written as JSON with encode_utf8=%false")


def _json_key_out(k: str | bytes, encode_utf8: bool, escape_dollar: bool) -> str:
    k = _json_str_out(k, encode_utf8)
    if escape_dollar and k.startswith("$"):
        k = "$" + k
    return k


def to_json_obj(v: Any, encode_utf8: bool = True, escape_dollar: bool = True) -> Any:
    """YSON value -> JSON-able object (YT JSON format conventions)."""
    if isinstance(v, Attributed):
        return {
            "$attributes": {
                _json_key_out(k, encode_utf8, escape_dollar): to_json_obj(
                    x, encode_utf8, escape_dollar
                )
                for k, x in v.attributes.items()
            },
            "$value": to_json_obj(v.value, encode_utf8, escape_dollar),
        }
    if v is None or isinstance(v, Entity):
        return None
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return int(v)
    if isinstance(v, float):
        if math.isnan(v) or math.isinf(v):
            return {
                "$value": "%nan" if math.isnan(v) else ("%inf" if v > 0 else "%-inf"),
                "$type": "double",
            }
        return v
    if isinstance(v, (str, bytes, bytearray)):
        return _json_str_out(v, encode_utf8)
    if isinstance(v, dict):
        return {
            _json_key_out(k, encode_utf8, escape_dollar): to_json_obj(x, encode_utf8, escape_dollar)
            for k, x in v.items()
        }
    if isinstance(v, (list, tuple)):
        return [to_json_obj(x, encode_utf8, escape_dollar) for x in v]
    raise YsonError(f"Cannot serialize {type(v)!r} to JSON")


def to_json(v: Any, encode_utf8: bool = True) -> bytes:
    return json.dumps(
        to_json_obj(v, encode_utf8), ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")


def _json_str_in(s: str, encode_utf8: bool) -> str | bytes:
    if encode_utf8:
        try:
            return _to_text(s.encode("latin-1"))
        except UnicodeEncodeError:
            raise YsonError(
                "JSON string contains characters outside of Latin-1 while encode_utf8 is enabled"
            )
    return s


def from_json_obj(o: Any, encode_utf8: bool = True) -> Any:
    if isinstance(o, dict):
        if "$value" in o and set(o) <= {"$value", "$attributes", "$type"}:
            value = from_json_obj(o["$value"], encode_utf8)
            t = o.get("$type")
            if t is not None:
                value = _typed(value, t)
            if "$attributes" in o:
                return Attributed(value, from_json_obj(o["$attributes"], encode_utf8))
            return value
        out = {}
        for k, x in o.items():
            k = _json_str_in(k, encode_utf8)
            if isinstance(k, bytes):
                k = k.decode("latin-1")
            if k.startswith("$$"):
                k = k[1:]
            out[k] = from_json_obj(x, encode_utf8)
        return out
    if isinstance(o, list):
        return [from_json_obj(x, encode_utf8) for x in o]
    if isinstance(o, str):
        return _json_str_in(o, encode_utf8)
    if o is None:
        return ENTITY
    if isinstance(o, int) and not isinstance(o, bool) and o >= 2**63:
        return Uint64(o)
    return o


def _typed(value: Any, t: str) -> Any:
    if t == "uint64":
        return Uint64(int(value))
    if t == "int64":
        return int(value)
    if t == "double":
        if isinstance(value, str):
            return {"%nan": math.nan, "%inf": math.inf, "%-inf": -math.inf}.get(
                value, None
            ) or float(value)
        return float(value)
    if t == "boolean":
        return value in (True, "true", "%true")
    return value


def from_json(data: bytes, encode_utf8: bool = True) -> Any:
    return from_json_obj(
        json.loads(data.decode("utf-8") if isinstance(data, bytes) else data), encode_utf8
    )


def from_json_lines(data: bytes, encode_utf8: bool = True) -> list[Any]:
    out = []
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    dec = json.JSONDecoder()
    pos, n = 0, len(text)
    while True:
        while pos < n and text[pos] in " \t\r\n":
            pos += 1
        if pos >= n:
            return out
        obj, pos = dec.raw_decode(text, pos)
        out.append(from_json_obj(obj, encode_utf8))
