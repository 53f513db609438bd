"""YSON parsing, text and binary (grammar and binary markers as in ``yson.py``)."""

from __future__ import annotations

import math
import struct
from typing import Any, Never

from .yson_values import ENTITY, Attributed, Uint64, YsonError, _to_text

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
    def __init__(self, data: bytes) -> None:
        if isinstance(data, str):
            data = data.encode("utf-8")
        self.data = bytes(data)
        self.pos = 0
        self.n = len(self.data)

    def error(self, msg: str) -> Never:
        raise YsonError(f"{msg} at position {self.pos}")

    def skip_ws(self) -> None:
        d, p, n = self.data, self.pos, self.n
        while p < n and d[p] in _WS:
            p += 1
        self.pos = p

    def peek(self) -> int | None:
        self.skip_ws()
        if self.pos >= self.n:
            return None
        return self.data[self.pos]

    def expect(self, ch: int) -> None:
        c = self.peek()
        if c != ch:
            self.error(f"Expected {chr(ch)!r}, found {None if c is None else chr(c)!r}")
        self.pos += 1

    def read_varint(self) -> int:
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

    def parse_value(self) -> Any:
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

    def parse_plain(self, c: int) -> Any:
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
        self.error(f"Unexpected character {chr(c)!r}")

    def parse_quoted(self) -> bytes:
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

    def parse_unquoted(self) -> bytes:
        d = self.data
        start = self.pos
        while self.pos < self.n and d[self.pos] in _UNQUOTED:
            self.pos += 1
        return d[start : self.pos]

    def parse_percent(self) -> bool | float:
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

    def parse_number(self) -> int | float:
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
            self.error(f"Bad number {tok!r}")

    def parse_key(self) -> str:
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

    def parse_map_body(self, end: int) -> dict[str, Any]:
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

    def parse_list_body(self, end: int) -> list[Any]:
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


def _key(b: bytes) -> str:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return b.decode("latin-1")


def _unzigzag(v: Any) -> int:
    return (v >> 1) ^ -(v & 1)


def loads(data: bytes) -> Any:
    """Parse one YSON node."""
    p = _Parser(data)
    v = p.parse_value()
    if p.peek() is not None:
        p.error("Trailing data")
    return v


def load_fragment(data: bytes) -> list[Any]:
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
