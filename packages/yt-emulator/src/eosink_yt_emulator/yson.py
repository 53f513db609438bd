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
"""

from __future__ import annotations

import json
import math
import struct

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


class YsonError(ValueError):
    pass


class Entity:
    """YSON entity ``#`` (null)."""

    __slots__ = ()

    def __eq__(self, other):
        return isinstance(other, Entity) or other is None

    def __hash__(self):
        return 0

    def __repr__(self):
        return "Entity()"

    def __bool__(self):
        return False


ENTITY = Entity()


class Uint64(int):
    """An unsigned 64-bit YSON integer (``123u``)."""

    def __repr__(self):
        return "Uint64(%d)" % int(self)


class Attributed:
    """A YSON value with attributes: ``<attrs>value``."""

    __slots__ = ("value", "attributes")

    def __init__(self, value, attributes):
        self.value = value
        self.attributes = dict(attributes)

    def __eq__(self, other):
        if isinstance(other, Attributed):
            return self.value == other.value and self.attributes == other.attributes
        return False

    def __repr__(self):
        return "Attributed(%r, %r)" % (self.value, self.attributes)


def unwrap(value):
    """Return ``(value, attributes)`` for a possibly attributed value."""
    if isinstance(value, Attributed):
        return value.value, value.attributes
    return value, {}


def attrs_of(value):
    return value.attributes if isinstance(value, Attributed) else {}


def _to_text(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b


# ---------------------------------------------------------------- parsing

_WS = b" \t\r\n"
_UNQUOTED_START = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_UNQUOTED = _UNQUOTED_START | set(b"0123456789-.")
_NUMBER_CHARS = set(b"0123456789+-.eEu")
_ESCAPES = {
    ord("n"): b"\n",
    ord("t"): b"\t",
    ord("r"): b"\r",
    ord("\\"): b"\\",
    ord('"'): b'"',
    ord("'"): b"'",
    ord("0"): b"\0",
    ord("a"): b"\a",
    ord("b"): b"\b",
    ord("f"): b"\f",
    ord("v"): b"\v",
    ord("/"): b"/",
}


class _Parser:
    def __init__(self, data: bytes):
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.data = bytes(data)
        self.pos = 0
        self.n = len(self.data)

    def error(self, msg):
        raise YsonError("%s at position %d" % (msg, self.pos))

    def skip_ws(self):
        d, p, n = self.data, self.pos, self.n
        while p < n and d[p] in _WS:
            p += 1
        self.pos = p

    def peek(self):
        self.skip_ws()
        if self.pos >= self.n:
            return None
        return self.data[self.pos]

    def expect(self, ch):
        c = self.peek()
        if c != ch:
            self.error("Expected %r, found %r" % (chr(ch), None if c is None else chr(c)))
        self.pos += 1

    def read_varint(self):
        result = 0
        shift = 0
        d = self.data
        while True:
            if self.pos >= self.n:
                self.error("Premature end of varint")
            b = d[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                self.error("Varint is too long")

    def parse_value(self):
        c = self.peek()
        if c is None:
            self.error("Unexpected end of YSON")
        if c == ord("<"):
            self.pos += 1
            attrs = self.parse_map_body(ord(">"))
            value = self.parse_value()
            if isinstance(value, Attributed):
                value = value.value
            return Attributed(value, attrs)
        return self.parse_plain(c)

    def parse_plain(self, c):
        d = self.data
        if c == ord("{"):
            self.pos += 1
            return self.parse_map_body(ord("}"))
        if c == ord("["):
            self.pos += 1
            return self.parse_list_body(ord("]"))
        if c == ord("#"):
            self.pos += 1
            return ENTITY
        if c == 0x01:
            self.pos += 1
            length = _unzigzag(self.read_varint())
            if length < 0 or self.pos + length > self.n:
                self.error("Bad binary string length")
            s = d[self.pos : self.pos + length]
            self.pos += length
            return _to_text(s)
        if c == 0x02:
            self.pos += 1
            return _unzigzag(self.read_varint())
        if c == 0x06:
            self.pos += 1
            return Uint64(self.read_varint())
        if c == 0x03:
            self.pos += 1
            if self.pos + 8 > self.n:
                self.error("Premature end of double")
            v = struct.unpack("<d", d[self.pos : self.pos + 8])[0]
            self.pos += 8
            return v
        if c == 0x04:
            self.pos += 1
            return False
        if c == 0x05:
            self.pos += 1
            return True
        if c == ord('"'):
            return _to_text(self.parse_quoted())
        if c == ord("%"):
            return self.parse_percent()
        if c in _NUMBER_CHARS and c not in b"eEu":
            return self.parse_number()
        if c in _UNQUOTED_START:
            return _to_text(self.parse_unquoted())
        self.error("Unexpected character %r" % chr(c))

    def parse_quoted(self):
        d = self.data
        self.pos += 1
        out = bytearray()
        while True:
            if self.pos >= self.n:
                self.error("Unterminated string")
            b = d[self.pos]
            if b == ord('"'):
                self.pos += 1
                return bytes(out)
            if b == ord("\\"):
                self.pos += 1
                if self.pos >= self.n:
                    self.error("Unterminated escape")
                e = d[self.pos]
                if e == ord("x"):
                    out.append(int(d[self.pos + 1 : self.pos + 3], 16))
                    self.pos += 3
                elif e == ord("u"):
                    out += chr(int(d[self.pos + 1 : self.pos + 5], 16)).encode("utf-8")
                    self.pos += 5
                elif (
                    ord("0") <= e <= ord("7")
                    and self.pos + 1 < self.n
                    and ord("0") <= d[self.pos + 1] <= ord("7")
                ):
                    j = self.pos
                    while j < self.pos + 3 and j < self.n and ord("0") <= d[j] <= ord("7"):
                        j += 1
                    out.append(int(d[self.pos : j], 8) & 0xFF)
                    self.pos = j
                elif e in _ESCAPES:
                    out += _ESCAPES[e]
                    self.pos += 1
                else:
                    out.append(e)
                    self.pos += 1
            else:
                out.append(b)
                self.pos += 1

    def parse_unquoted(self):
        d = self.data
        start = self.pos
        while self.pos < self.n and d[self.pos] in _UNQUOTED:
            self.pos += 1
        return d[start : self.pos]

    def parse_percent(self):
        d = self.data
        for lit, val in (
            (b"%true", True),
            (b"%false", False),
            (b"%nan", math.nan),
            (b"%-inf", -math.inf),
            (b"%+inf", math.inf),
            (b"%inf", math.inf),
        ):
            if d.startswith(lit, self.pos):
                self.pos += len(lit)
                return val
        self.error("Bad %-literal")

    def parse_number(self):
        d = self.data
        start = self.pos
        while self.pos < self.n and d[self.pos] in _NUMBER_CHARS:
            if d[self.pos] == ord("u"):
                self.pos += 1
                return Uint64(int(d[start : self.pos - 1]))
            self.pos += 1
        tok = d[start : self.pos].decode("ascii")
        if any(ch in tok for ch in ".eE"):
            return float(tok)
        try:
            return int(tok)
        except ValueError:
            self.error("Bad number %r" % tok)

    def parse_key(self):
        c = self.peek()
        if c == 0x01:
            self.pos += 1
            length = _unzigzag(self.read_varint())
            s = self.data[self.pos : self.pos + length]
            self.pos += length
            return _key(s)
        if c == ord('"'):
            return _key(self.parse_quoted())
        if c is not None and c in _UNQUOTED_START:
            return _key(self.parse_unquoted())
        self.error("Expected map key")

    def parse_map_body(self, end):
        result = {}
        while True:
            c = self.peek()
            if c == end:
                self.pos += 1
                return result
            key = self.parse_key()
            self.expect(ord("="))
            result[key] = self.parse_value()
            c = self.peek()
            if c == ord(";"):
                self.pos += 1
            elif c != end:
                self.error("Expected ';' or end of map")

    def parse_list_body(self, end):
        result = []
        while True:
            c = self.peek()
            if c == end:
                self.pos += 1
                return result
            result.append(self.parse_value())
            c = self.peek()
            if c == ord(";"):
                self.pos += 1
            elif c != end:
                self.error("Expected ';' or end of list")


def _key(b):
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


def _unzigzag(v):
    return (v >> 1) ^ -(v & 1)


def loads(data):
    """Parse one YSON node."""
    p = _Parser(data)
    v = p.parse_value()
    if p.peek() is not None:
        p.error("Trailing data")
    return v


def load_fragment(data):
    """Parse a list fragment (``a;b;c;``), e.g. a tabular YSON stream."""
    p = _Parser(data)
    out = []
    while True:
        c = p.peek()
        if c is None:
            return out
        out.append(p.parse_value())
        c = p.peek()
        if c == ord(";"):
            p.pos += 1
        elif c is not None:
            p.error("Expected ';' between list fragment items")


# ---------------------------------------------------------------- writing


def _zigzag(v):
    return (v << 1) ^ (v >> 63)


def _varint(v):
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


def _as_bytes(s):
    return s.encode("utf-8") if isinstance(s, str) else bytes(s)


def _write(v, out: bytearray, binary: bool):
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
        raise YsonError("Cannot serialize %r to YSON" % (type(v),))


def _write_map_items(d, out, binary):
    for k, val in d.items():
        _write(k, out, binary)
        out += b"="
        _write(val, out, binary)
        out += b";"


def dumps(value, binary=False) -> bytes:
    out = bytearray()
    _write(value, out, binary)
    return bytes(out)


def dump_fragment(values, binary=False) -> bytes:
    out = bytearray()
    for v in values:
        _write(v, out, binary)
        out += b";"
        if not binary:
            out += b"\n"
    return bytes(out)


# ---------------------------------------------------------------- JSON mapping


def _json_str_out(s, encode_utf8):
    b = _as_bytes(s)
    if encode_utf8:
        return b.decode("latin-1")
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        raise YsonError("Non-UTF-8 string cannot be written as JSON with encode_utf8=%false")


def _json_key_out(k, encode_utf8, escape_dollar):
    k = _json_str_out(k, encode_utf8)
    if escape_dollar and k.startswith("$"):
        k = "$" + k
    return k


def to_json_obj(v, encode_utf8=True, escape_dollar=True):
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
    raise YsonError("Cannot serialize %r to JSON" % (type(v),))


def to_json(v, encode_utf8=True) -> bytes:
    return json.dumps(
        to_json_obj(v, encode_utf8), ensure_ascii=False, separators=(",", ":")
    ).encode("utf-8")


def _json_str_in(s, encode_utf8):
    if encode_utf8:
        try:
            return _to_text(s.encode("latin-1"))
        except UnicodeEncodeError:
            raise YsonError(
                "JSON string contains characters outside of Latin-1 while encode_utf8 is enabled"
            )
    return s


def from_json_obj(o, encode_utf8=True):
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


def _typed(value, t):
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


def from_json(data, encode_utf8=True):
    return from_json_obj(
        json.loads(data.decode("utf-8") if isinstance(data, bytes) else data), encode_utf8
    )


def from_json_lines(data, encode_utf8=True):
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
