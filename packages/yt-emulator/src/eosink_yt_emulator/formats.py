"""Wire formats: YSON (binary/text/pretty) and JSON, structured and tabular.

Follows https://ytsaurus.tech/docs/en/user-guide/storage/formats: tabular YSON is a
list fragment of maps (control attributes as ``<row_index=N>#`` entities), tabular
JSON is one object per line with ``$attributes``/``$value`` for control rows and
``encode_utf8`` (default ``%true``: bytes are mapped to code points 0-255).  Other
formats (dsv, schemaful_dsv, skiff, arrow, protobuf, yamr) are refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from . import yson
from .errors import YtError
from .yson import unwrap

SUPPORTED = ("yson", "json")


class Format:
    def __init__(self, spec: Any, default: Any = "yson") -> None:
        if spec is None:
            spec = default
        if isinstance(spec, bytes):
            spec = spec.decode("utf-8")
        name, attrs = unwrap(spec)
        if isinstance(name, bytes):
            name = name.decode()
        if name not in SUPPORTED:
            raise YtError(
                f"Format {name!r} is not supported by the emulator (supported: yson, json)",
                1,
                {"format": name},
            )
        self.name = name
        self.attrs = attrs
        self.binary = name == "yson" and attrs.get("format", "text") == "binary"
        self.encode_utf8 = bool(attrs.get("encode_utf8", True))

    @property
    def content_type(self) -> str:
        if self.name == "json":
            return "application/json"
        return "application/x-yt-yson-binary" if self.binary else "application/x-yt-yson-text"

    # structured
    def dump_node(self, value: Any) -> bytes:
        if self.name == "json":
            return yson.to_json(value, self.encode_utf8)
        return yson.dumps(value, binary=self.binary)

    # tabular
    def dump_rows(self, rows: Iterable[dict[str, Any]]) -> bytes:
        if self.name == "json":
            out = []
            for r in rows:
                out.append(yson.to_json(r, self.encode_utf8))
                out.append(b"\n")
            return b"".join(out)
        return yson.dump_fragment(rows, binary=self.binary)

    def load_rows(self, data: bytes) -> list[dict[str, Any]]:
        if self.name == "json":
            items = yson.from_json_lines(data, self.encode_utf8)
        else:
            items = yson.load_fragment(data)
        rows = []
        for item in items:
            value, attrs = unwrap(item)
            if isinstance(value, yson.Entity):
                continue  # control row (table_index etc.)
            if not isinstance(value, dict):
                raise YtError(f"Invalid row: expected a map, found {type(value).__name__}", 1)
            rows.append(value)
        return rows
