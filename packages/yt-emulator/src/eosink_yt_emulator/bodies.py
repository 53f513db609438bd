"""Request bodies as the client sends them: ``chunked`` or sized, and content-encoded.

``gzip`` (zlib or gzip streams), ``deflate`` and ``identity``; ``br`` when the ``brotli``
module is importable (the client only sends it if it has the module itself).
"""

from __future__ import annotations

import zlib
from email.message import Message
from typing import BinaryIO

from .errors import YtError

try:  # optional, only if the client is configured for brotli
    import brotli  # type: ignore
except ImportError:  # pragma: no cover
    brotli = None


def read_body(rfile: BinaryIO, headers: Message) -> bytes:
    """The request's body, de-chunked and decoded."""
    te = (headers.get("Transfer-Encoding") or "").lower()
    if "chunked" in te:
        parts = []
        while True:
            line = rfile.readline()
            if not line:
                break
            size = int(line.split(b";")[0].strip() or b"0", 16)
            if size == 0:
                while True:
                    trailer = rfile.readline()
                    if trailer in (b"\r\n", b"\n", b""):
                        break
                break
            parts.append(rfile.read(size))
            rfile.readline()
        data = b"".join(parts)
    else:
        length = int(headers.get("Content-Length") or 0)
        data = rfile.read(length) if length else b""
    enc = (headers.get("Content-Encoding") or "identity").lower().strip()
    if not data or enc == "identity":
        return data
    if enc == "gzip":
        return zlib.decompress(data, 47)
    if enc == "deflate":
        return zlib.decompress(data)
    if enc == "br" and brotli is not None:
        return brotli.decompress(data)
    raise YtError(f"Content encoding {enc!r} is not supported by the emulator", 1)
