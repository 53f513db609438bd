"""YSON writing, text and binary."""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from typing import Any

from .yson_values import Attributed, Entity, Uint64, YsonError


def _zigzag(v: int) -> int:
    return (v << 1) ^ (v >> 63)


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _escape(b: bytes) -> bytes:
    out = bytearray(b'"')
    for ch in b:
        if ch == 0x22:
            out += b'\\"'
        elif ch == 0x5C:
            out += b"\\\\"
        elif ch == 0x0A:
            out += b"\\n"
        elif ch == 0x09:
            out += b"\\t"
        elif ch == 0x0D:
            out += b"\\r"
        elif ch < 0x20 or ch >= 0x7F:
            out += b"\\x%02X" % ch
        else:
            out.append(ch)
    out += b'"'
    return bytes(out)


def _as_bytes(s: str | bytes | bytearray) -> bytes:
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


def _write(v: Any, out: bytearray, binary: bool) -> None:
    if isinstance(v, Attributed):
        out += b"<"
        _write_map_items(v.attributes, out, binary)
        out += b">"
        v = v.value
    if v is None or isinstance(v, Entity):
        out += b"#"
    elif isinstance(v, bool):
        if binary:
            out.append(0x05 if v else 0x04)
        else:
            out += b"%true" if v else b"%false"
    elif isinstance(v, Uint64):
        if binary:
            out.append(0x06)
            out += _varint(int(v))
        else:
            out += b"%du" % int(v)
    elif isinstance(v, int):
        if v >= 2**63:
            return _write(Uint64(v), out, binary)
        if binary:
            out.append(0x02)
            out += _varint(_zigzag(v) & 0xFFFFFFFFFFFFFFFF)
        else:
            out += b"%d" % v
    elif isinstance(v, float):
        if binary:
            out.append(0x03)
            out += struct.pack("<d", v)
        elif math.isnan(v):
            out += b"%nan"
        elif math.isinf(v):
            out += b"%inf" if v > 0 else b"%-inf"
        else:
            r = repr(v)
            if "." not in r and "e" not in r and "E" not in r:
                r += "."
            out += r.encode("ascii")
    elif isinstance(v, (str, bytes, bytearray)):
        b = _as_bytes(v)
        if binary:
            out.append(0x01)
            out += _varint(_zigzag(len(b)))
            out += b
        else:
            out += _escape(b)
    elif isinstance(v, dict):
        out += b"{"
        _write_map_items(v, out, binary)
        out += b"}"
    elif isinstance(v, (list, tuple)):
        out += b"["
        for item in v:
            _write(item, out, binary)
            out += b";"
        out += b"]"
    else:
        raise YsonError(f"Cannot serialize {type(v)!r} to YSON")


def _write_map_items(d: dict[str, Any], out: bytearray, binary: bool) -> None:
    for k, val in d.items():
        _write(k, out, binary)
        out += b"="
        _write(val, out, binary)
        out += b";"


def dumps(value: Any, binary: bool = False) -> bytes:
    out = bytearray()
    _write(value, out, binary)
    return bytes(out)


def dump_fragment(values: Iterable[Any], binary: bool = False) -> bytes:
    out = bytearray()
    for v in values:
        _write(v, out, binary)
        out += b";"
        if not binary:
            out += b"\n"
    return bytes(out)
