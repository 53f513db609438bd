"""YPath: the path syntax of Cypress (https://ytsaurus.tech/docs/en/user-guide/storage/ypath)."""

from __future__ import annotations

from typing import Any

from .errors import RESOLVE_ERROR, YtError
from .yson import unwrap


def parse_ypath(path: Any) -> tuple[str, list[str], list[str] | None]:
    """Split a YPath into (root, keys, attribute_path).

    ``root`` is ``"/"`` or ``"#<id>"``; ``keys`` are child keys; ``attribute_path``
    is ``None`` for the node itself, ``[]`` for ``/@`` (all attributes) or
    ``["attr", "sub", ...]``.  See https://ytsaurus.tech/docs/en/user-guide/storage/ypath.
    """
    path, _ = unwrap(path)
    if isinstance(path, bytes):
        path = path.decode("utf-8", "replace")
    if not isinstance(path, str):
        raise YtError(f"Invalid path {path!r}")
    p = path.strip()
    if p.startswith("#"):
        end = 1
        while end < len(p) and p[end] != "/":
            end += 1
        root = p[:end]
        rest = p[end:]
    elif p.startswith("//"):
        root = "/"
        rest = p[1:]
    elif p == "/" or p.startswith("/@") or p == "":
        root = "/"
        rest = p
    else:
        raise YtError(
            f'Error parsing YPath {path!r}: expected "/" or "#"', RESOLVE_ERROR, {"path": path}
        )
    tokens = []
    i = 0
    n = len(rest)
    while i < n:
        if rest[i] != "/":
            raise YtError(f"Unexpected character in YPath {path!r}", RESOLVE_ERROR, {"path": path})
        i += 1
        is_attr = False
        if i < n and rest[i] == "@":
            is_attr = True
            i += 1
        buf = []
        while i < n and rest[i] != "/":
            c = rest[i]
            if c == "\\" and i + 1 < n:
                buf.append(rest[i + 1])
                i += 2
                continue
            buf.append(c)
            i += 1
        tokens.append((is_attr, "".join(buf)))
    keys = []
    attr_path = None
    for is_attr, tok in tokens:
        if attr_path is not None:
            attr_path.append(tok)
        elif is_attr:
            attr_path = [tok] if tok != "" else []
        else:
            if tok == "" and not keys:
                continue
            keys.append(tok)
    return root, keys, attr_path


def escape_key(key: str) -> str:
    """A child key as it must be written in a YPath."""
    return key.replace("\\", "\\\\").replace("/", "\\/").replace("@", "\\@").replace("&", "\\&")
